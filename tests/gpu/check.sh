#!/usr/bin/env bash
# The GPU check: builds frost with CUDA and runs, on one GPU, the CUDA test
# suite (CPU-vs-CUDA parity of every op-table row forward and backward, the
# nn layers, optimizer steps, ResearchModel training steps against the CPU
# run, device moves, errors and memory counters), then the CUDA benchmark.
# Usage: tests/gpu/check.sh LOG_DIR   (writes LOG_DIR/gpu_check.log, and
# LOG_DIR/eager_vs_frozen_cuda.json when Google Benchmark is installed).
# Time limits, in seconds: FROST_GPU_TOTAL_SECONDS (480, the issue's 8
# minutes) for the whole check, build included; within it
# FROST_GPU_SUITE_SECONDS (300) for the suite, FROST_GPU_RERUN_SECONDS (180)
# for rerunning its cases after a crash, FROST_GPU_BENCH_SECONDS (240) for
# the benchmark. A stage gets what is left of the whole when that is less.
set -uo pipefail
out=${1:?usage: tests/gpu/check.sh LOG_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${FROST_GPU_BUILD:-build/gpu}
jobs=$(nproc 2>/dev/null || echo 4)
status=0
deadline=$((SECONDS + ${FROST_GPU_TOTAL_SECONDS:-480}))
# The smaller of a stage's own limit ($1) and the seconds the check has left.
limit() {
  local left=$((deadline - SECONDS))
  ((left < $1)) && echo "$left" || echo "$1"
}

{
  echo "== GPU check: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not available"
  nvcc --version | tail -1

  # Google Benchmark is optional here: the suite runs without it
  # (BENCHMARK_DIR may name its CMake package folder).
  bench=OFF
  bench_args=()
  if [[ -n ${BENCHMARK_DIR:-} ]]; then
    bench=ON
    bench_args=(-Dbenchmark_DIR="$BENCHMARK_DIR")
  elif [[ -f /usr/include/benchmark/benchmark.h || -f /usr/local/include/benchmark/benchmark.h ]]; then
    bench=ON
  fi
  arch=${FROST_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFROST_WITH_CUDA=ON \
    ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} \
    -DFROST_BUILD_TESTS=ON -DFROST_BUILD_EXAMPLES=OFF -DFROST_BUILD_BENCHMARKS=$bench -DFROST_INSTALL=OFF \
    "${bench_args[@]}" || exit 1
  targets=(frost_cuda_tests)
  [[ $bench == ON ]] && targets+=(bench_eager_vs_frozen)
  echo "== build (${targets[*]}, $jobs jobs)"
  if ! time timeout -k 10 "$(limit 100000)" cmake --build "$build" -j"$jobs" --target "${targets[@]}"; then
    echo "== the build failed, or ran past FROST_GPU_TOTAL_SECONDS; nothing run"
    exit 1
  fi

  # Every run has a time limit: a hung case (a deadlock, a spin on a failed
  # thread) must not take the device time the rest of the check needs.
  # timeout's 124 (or 137 after its KILL) counts as a crash below.
  echo "== CUDA test suite"
  tests="$build"/frost_cuda_tests
  suite_limit=$(limit "${FROST_GPU_SUITE_SECONDS:-300}")
  if ((suite_limit < 10)); then
    echo "== out of time: the build left ${suite_limit}s of FROST_GPU_TOTAL_SECONDS; nothing run"
    exit 1
  fi
  timeout -k 10 "$suite_limit" "$tests" -ts=cuda --duration=true
  rc=$?
  if ((rc != 0)); then
    status=1
    if ((rc > 1)); then
      # Not a failed check (doctest's 1) but a crash: every case again, each
      # in its own process, so one crash hides no other case's result.
      n=$("$tests" -ts=cuda --count | sed -n 's/.*passing the current filters: \([0-9]*\).*/\1/p')
      echo "== the suite ended with status $rc: its ${n:-?} cases one process each"
      crashed=()
      rerun_end=$((SECONDS + $(limit "${FROST_GPU_RERUN_SECONDS:-180}")))
      for ((i = 1; i <= ${n:-0}; i++)); do
        if ((SECONDS + 5 >= rerun_end)); then
          echo "== out of time for the reruns: cases $i to $n not run again"
          break
        fi
        timeout -k 5 "$(limit 60)" "$tests" -ts=cuda --first=$i --last=$i --duration=true
        case_rc=$?
        ((case_rc > 1)) && crashed+=("$i (status $case_rc)")
      done
      echo "== cases that crashed (by position in the suite): ${crashed[*]:-none}"
    fi
  fi

  bench_limit=$(limit "${FROST_GPU_BENCH_SECONDS:-240}")
  if [[ $bench == ON ]] && ((bench_limit < 10)); then
    echo "== CUDA benchmark: not run, ${bench_limit}s of FROST_GPU_TOTAL_SECONDS left"
    status=1
  elif [[ $bench == ON ]]; then
    echo "== CUDA benchmark (${bench_limit}s limit)"
    timeout -k 10 "$bench_limit" "$build"/bench_eager_vs_frozen --device cuda --profile \
      --json "$out/eager_vs_frozen_cuda.json" || status=1
  fi
  [[ $bench == ON ]] || echo "== CUDA benchmark: skipped (Google Benchmark not found; set BENCHMARK_DIR)"
  echo "== GPU check finished: status $status"
  exit $status
} 2>&1 | tee "$out/gpu_check.log"
exit "${PIPESTATUS[0]}"
