// All ops, in dependency order (see tensor.hpp: include <frost/tensor.hpp> or
// <frost/frost.hpp>, not these files one by one).
#pragma once
#include "common.hpp"
#include "elementwise.hpp"
#include "factories.hpp"
#include "views.hpp"
#include "transfer.hpp"
#include "reduce.hpp"
#include "linalg.hpp"
#include "indexing.hpp"
#include "integer.hpp"
#include "rounding.hpp"
#include "masking.hpp"
#include "op_list.hpp"
