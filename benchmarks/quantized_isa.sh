#!/usr/bin/env bash
# The int8 linear kernel against float on each instruction set it has a path
# for: benchmarks/bench_quantized_linear.cpp built for this machine (AVX-512
# VNNI here), for AVX2 with AVX-VNNI and for AVX2 alone, run one after
# another (a build this CPU cannot run is skipped). Usage:
#   bash benchmarks/quantized_isa.sh [extra benchmark flags]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A flags=([native]="-march=native" [avxvnni]="-march=x86-64-v3 -mavxvnni" [avx2]="-march=x86-64-v3")
for isa in native avxvnni avx2; do
  # shellcheck disable=SC2086  # the flags are words
  g++ -std=c++20 -O3 -DNDEBUG ${flags[$isa]} -mtune=generic -fopenmp -Iinclude -isystem /usr/include/eigen3 \
    benchmarks/bench_quantized_linear.cpp -lbenchmark -lpthread -o "$out/$isa"
  echo "== $isa (${flags[$isa]})"
  if ! "$out/$isa" --benchmark_counters_tabular=true "$@"; then
    echo "(this CPU cannot run the $isa build)"
  fi
done
