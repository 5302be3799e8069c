// frost::nn: modules, containers, layers, functional forms, losses.
#pragma once

#include "containers.hpp"
#include "functional/linear.hpp"
#include "layers/activation.hpp"
#include "layers/linear.hpp"
#include "losses.hpp"
#include "module.hpp"
#include "state_dict.hpp"
