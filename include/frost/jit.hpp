// frost::jit: trace a run of C++ code into a Graph (guards for its tensor
// branches), freeze it into an allocation-free Plan<T>.
#pragma once
#include "jit/compile.hpp"
#include "jit/freeze.hpp"
#include "jit/graph.hpp"
#include "jit/plan.hpp"
#include "jit/trace.hpp"
