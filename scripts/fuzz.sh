#!/usr/bin/env bash
# Builds the plan loader's libFuzzer target with clang (ASan + UBSan) and runs
# it for a while from seed plans. Usage: scripts/fuzz.sh [seconds]   (default 20)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-20}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; skipping the plan-loader fuzz run (install clang to run it)"
  exit 0
fi
out=build/fuzz
mkdir -p "$out/corpus"
flags=(-std=c++20 -O1 -g1 -Iinclude -isystem /usr/include/eigen3 -fopenmp=libgomp)
# The two builds side by side (~80 s each, one core apiece).
clang++ "${flags[@]}" -DFROST_FUZZ_SEEDS tests/fuzz/plan_loader.cpp -o "$out/seeds" -lgomp &
seeds_build=$!
clang++ "${flags[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/plan_loader.cpp -o "$out/plan_loader_fuzz" -lgomp
wait "$seeds_build"
"$out/seeds" "$out/corpus"
ASAN_OPTIONS=detect_leaks=0 "$out/plan_loader_fuzz" -max_total_time="$seconds" -max_len=200000 -rss_limit_mb=4096 \
  -print_final_stats=1 -print_funcs=0 "$out/corpus"
