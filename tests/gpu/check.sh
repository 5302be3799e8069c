#!/usr/bin/env bash
# The GPU check: builds frost with CUDA and runs, on one GPU, the CUDA test
# suite (CPU-vs-CUDA parity of every op-table row forward and backward, the
# nn layers, optimizer steps, ResearchModel training steps against the CPU
# run, device moves, errors and memory counters), then the CUDA benchmark.
# Usage: tests/gpu/check.sh LOG_DIR   (writes LOG_DIR/gpu_check.log, and
# LOG_DIR/eager_vs_frozen_cuda.json when Google Benchmark is found).
# What the GPU machine may lack (Eigen, doctest, nlohmann-json, Google
# Benchmark) comes from .gpu/deps when it is there: tests/gpu/prepare.sh
# makes it on a machine that can reach Debian's archive; carry .gpu.
# Time limits, in seconds: FROST_GPU_TOTAL_SECONDS (450, inside the issue's
# 8 minutes with the start-up around it) for the whole check, build included; within it
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
deadline=$((SECONDS + ${FROST_GPU_TOTAL_SECONDS:-450}))
# A GPU machine on which the program sees no device fails the check (the
# cases would otherwise skip and pass).
export FROST_REQUIRE_CUDA=1
# The smaller of a stage's own limit ($1) and the seconds the check has left.
limit() {
  local left=$((deadline - SECONDS))
  ((left < $1)) && echo "$left" || echo "$1"
}

{
  echo "== GPU check: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not available"
  nvcc --version | tail -1
  echo "host compiler: $(c++ --version | head -1); $(cmake --version | head -1)"

  deps=$PWD/.gpu/deps/usr
  if [[ -d $deps ]]; then
    echo "== dependencies from .gpu/deps"
    export CMAKE_PREFIX_PATH=$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    # doctest's CMake package names /usr/include whatever its prefix: the
    # compilers find the headers through CPATH instead (nvcc's host compiler too).
    export CPATH=$deps/include${CPATH:+:$CPATH}
    export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    [[ -z ${BENCHMARK_DIR:-} && -d $deps/lib/x86_64-linux-gnu/cmake/benchmark ]] &&
      BENCHMARK_DIR=$deps/lib/x86_64-linux-gnu/cmake/benchmark
  fi
  # cuDNN from PyTorch's wheel when the system has none.
  if [[ -z ${CUDNN_ROOT:-} ]] && ! compgen -G "/usr/include/cudnn*.h" >/dev/null &&
    ! compgen -G "/usr/local/cuda*/include/cudnn*.h" >/dev/null &&
    ! compgen -G "/usr/include/x86_64-linux-gnu/cudnn*.h" >/dev/null; then
    if root=$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])' 2>/dev/null); then
      export CUDNN_ROOT=$root
      export LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      echo "== cuDNN from $root"
    fi
  fi

  # Google Benchmark is optional here: the suite runs without it
  # (BENCHMARK_DIR may name its CMake package folder).
  bench=OFF
  bench_args=()
  if [[ -n ${BENCHMARK_DIR:-} && -f $BENCHMARK_DIR/benchmarkConfig.cmake ]]; then
    bench=ON
    bench_args=(-Dbenchmark_DIR="$BENCHMARK_DIR")
  elif [[ -n ${BENCHMARK_DIR:-} ]]; then
    echo "== BENCHMARK_DIR=$BENCHMARK_DIR has no benchmarkConfig.cmake: the benchmark is left out"
  elif [[ -f /usr/include/benchmark/benchmark.h || -f /usr/local/include/benchmark/benchmark.h ]]; then
    bench=ON
  fi
  arch=${FROST_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFROST_WITH_CUDA=ON \
    ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} \
    -DFROST_BUILD_TESTS=ON -DFROST_BUILD_EXAMPLES=OFF -DFROST_BUILD_BENCHMARKS=$bench -DFROST_INSTALL=OFF \
    -DFROST_CUDA_WERROR=OFF "${bench_args[@]}" || exit 1
  # The tests first, alone: a benchmark that fails to build loses only itself.
  echo "== build (frost_cuda_tests, $jobs jobs)"
  if ! time timeout -k 10 "$(limit 100000)" cmake --build "$build" -j"$jobs" --target frost_cuda_tests; then
    echo "== the build failed, or ran past FROST_GPU_TOTAL_SECONDS; nothing run"
    exit 1
  fi
  if [[ $bench == ON ]]; then
    echo "== build (bench_eager_vs_frozen)"
    if ! timeout -k 10 "$(limit 100000)" cmake --build "$build" -j"$jobs" --target bench_eager_vs_frozen; then
      echo "== the benchmark's build failed: it is left out"
      bench=OFF
      status=1
    fi
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
  suite_log=$(mktemp)
  timeout -k 10 "$suite_limit" "$tests" -ts=cuda --duration=true 2>&1 | tee "$suite_log"
  rc=${PIPESTATUS[0]}
  # A device fault (illegal address, a failed launch) is sticky: every later
  # CUDA call of the process fails, and doctest reports them as failed checks.
  sticky=0
  grep -qE "illegal memory access|unspecified launch failure|misaligned address|illegal instruction|cudaErrorLaunch" \
    "$suite_log" && sticky=1
  rm -f "$suite_log"
  if ((rc != 0)); then
    status=1
    if ((rc > 1 || sticky)); then
      # Not only failed checks (doctest's 1) but a crash or a device fault:
      # every case again, each in its own process, so one hides no other
      # case's result.
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
        echo "== case $i: status $case_rc"
        ((case_rc != 0)) && crashed+=("$i (status $case_rc)")
      done
      echo "== cases that failed or crashed alone (by position in the suite): ${crashed[*]:-none}"
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
