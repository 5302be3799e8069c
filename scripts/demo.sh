#!/usr/bin/env bash
# Builds and runs the demo: the guide's research-to-production run, then the
# eager-vs-frozen benchmark table (its rows also go to
# build/release/eager_vs_frozen.json).
# Usage: scripts/demo.sh   (FROST_DEMO_TARGET=<target> [args...] runs that one program instead)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=${FROST_DEMO_TARGET:-}

bash scripts/install_deps.sh

build=build/release
cmake -S . -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DFROST_BUILD_TESTS=OFF -DFROST_BUILD_EXAMPLES=ON -DFROST_BUILD_BENCHMARKS=ON
if [[ -n $target ]]; then
  cmake --build "$build" -j2 --target "$target"
  "$build/$target" "$@"
  exit
fi
cmake --build "$build" -j2 --target research_to_production bench_eager_vs_frozen
"$build/research_to_production"
echo
echo "== eager vs frozen (bench_eager_vs_frozen; medians of 5 repetitions) =="
"$build/bench_eager_vs_frozen" --benchmark_format=console --json "$build/eager_vs_frozen.json"
