#!/usr/bin/env bash
# Gets what tests/gpu/check.sh needs and a GPU machine may lack, on a machine
# that can reach Debian's archive: the header-only libraries frost builds
# with (Eigen, doctest, nlohmann-json) and Google Benchmark, unpacked (not
# installed) into .gpu/deps, which git ignores. Carry .gpu to the GPU
# machine; check.sh uses it when it is there.
# Usage: tests/gpu/prepare.sh   (then, there: bash tests/gpu/check.sh LOG_DIR)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
deps=.gpu/deps
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download libeigen3-dev doctest-dev nlohmann-json3-dev libbenchmark-dev libbenchmark1debian)
rm -rf "$deps"
mkdir -p "$deps"
for f in "$debs"/*.deb; do dpkg -x "$f" "$deps"; done
# Only what a build reads: headers, CMake packages, the benchmark library.
rm -rf "$deps"/usr/share/doc "$deps"/usr/share/man
du -sh "$deps"
ls "$deps"/usr/include
