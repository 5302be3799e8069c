#!/usr/bin/env bash
# Times compiling one file that includes frost.hpp, defines a small model and
# runs backward (examples/train_mlp.cpp) at -O2, header-only and against
# frost::compiled. Usage: benchmarks/compile_time.sh [build-dir with libfrost_compiled.a]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build/tests}
flags=(-std=c++20 -O2 -fopenmp -march=native -Iinclude -I/usr/include/eigen3)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

t0=$(date +%s.%N)
g++ "${flags[@]}" -c examples/train_mlp.cpp -o "$out/a.o"
t1=$(date +%s.%N)
g++ "${flags[@]}" -DFROST_CPU_BACKEND_EXTERN -c examples/train_mlp.cpp -o "$out/b.o"
t2=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "header-only (frost::frost):    %.1f s\n", b - a }'
awk -v a="$t1" -v b="$t2" 'BEGIN { printf "precompiled (frost::compiled): %.1f s\n", b - a }'
if [[ -f $build/libfrost_compiled.a ]]; then
  g++ "${flags[@]}" "$out/b.o" "$build/libfrost_compiled.a" -o "$out/app" && "$out/app" > /dev/null && echo "linked and ran OK"
fi
