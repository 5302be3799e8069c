#!/usr/bin/env bash
# Builds and runs the demo program; extra arguments are passed to it.
# Usage: scripts/demo.sh [args...]   (FROST_DEMO_TARGET=<target> picks another program)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=${FROST_DEMO_TARGET:-research_to_production}

bash scripts/install_deps.sh

# A bench_* target lives among the benchmarks, so build those only when asked for one.
benchmarks=OFF
[[ $target == bench_* ]] && benchmarks=ON

build=build/release
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DFROST_BUILD_TESTS=OFF -DFROST_BUILD_EXAMPLES=ON -DFROST_BUILD_BENCHMARKS=$benchmarks
cmake --build "$build" -j2 --target "$target"
"$build/$target" "$@"
