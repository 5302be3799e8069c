#!/usr/bin/env bash
# Builds and runs the test suite (doctest cases, examples, install test).
# Usage: scripts/test.sh [--sanitize]   (--sanitize: ASan + UBSan build in build/asan)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

sanitize=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: $0 [--sanitize]" >&2; exit 2 ;;
  esac
done

bash scripts/install_deps.sh

if [[ $sanitize -eq 1 ]]; then
  build=build/asan
  # -O1 -g1 without -DNDEBUG: sanitizer stacks with file:line (-g1 keeps the line
  # tables and halves the compile time of full -g), and Eigen's own asserts stay on.
  # The suites' own code at -O0 (FROST_TEST_CXX_FLAGS): half the compile time;
  # the kernels (frost::compiled, the per-ISA programs) stay at -O1.
  # The doctest suite and the per-ISA kernel tests only: the examples and the
  # install test ran in the plain build, and under the sanitizers they cost
  # a third of this stage (~5 of 17 minutes on 2 cores) for code the suite
  # already covers.
  cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DFROST_TEST_CXX_FLAGS=-O0 \
    -DFROST_SANITIZE=ON -DFROST_WITH_CUDA=OFF \
    -DFROST_BUILD_TESTS=ON -DFROST_BUILD_EXAMPLES=OFF -DFROST_BUILD_BENCHMARKS=OFF -DFROST_INSTALL=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  build=build/tests
  cmake -S . -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DFROST_SANITIZE=OFF \
    -DFROST_BUILD_TESTS=ON -DFROST_BUILD_EXAMPLES=ON -DFROST_BUILD_BENCHMARKS=ON
fi

cmake --build "$build" -j2
ctest --test-dir "$build" --output-on-failure -j2

# The plan loader's fuzz target, briefly (hostile plan files: an Error, never a crash).
[[ $sanitize -eq 1 ]] || bash scripts/fuzz.sh 15
