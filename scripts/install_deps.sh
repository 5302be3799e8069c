#!/usr/bin/env bash
# Installs the Debian packages frost needs, touching apt only when one is missing.
# Usage: scripts/install_deps.sh [--docs]   (--docs adds doxygen and graphviz)
set -euo pipefail

packages=(cmake ninja-build g++ libeigen3-dev doctest-dev libbenchmark-dev nlohmann-json3-dev libomp-dev)
for arg in "$@"; do
  case "$arg" in
    --docs) packages+=(doxygen graphviz) ;;
    *) echo "usage: $0 [--docs]" >&2; exit 2 ;;
  esac
done

if ! command -v dpkg >/dev/null 2>&1; then
  echo "install_deps: not a Debian system; install these yourself: ${packages[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  # dpkg -s also succeeds for removed packages that left config files behind.
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install_deps: missing ${missing[*]}, and not root without sudo" >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
