#!/usr/bin/env bash
# Set up proftui on a fresh Debian/Ubuntu machine: the C toolchain and binutils
# (apt-get, only when missing), then the Python package with its C runtime.
# Usage: ./install.sh          install proftui
#        ./install.sh --test   also the test tools (pytest, hypothesis, ruff, tmux)
set -euo pipefail
cd "$(dirname "$0")"

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

missing=()
for tool in gcc:gcc g++:g++ gprof:binutils addr2line:binutils objdump:binutils; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if (( want_test )); then
    command -v tmux >/dev/null 2>&1 || missing+=(tmux)
fi
if (( ${#missing[@]} )); then
    if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then SUDO=sudo; else SUDO=; fi
    echo "install.sh: installing ${missing[*]} with apt-get" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q --disable-pip-version-check -e ".$( (( want_test )) && echo '[test]')"
