"""`proftui demo`: compile the bundled demo program for a mode, cached per user."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.symbols.cachedir import CacheDir, default_cache_dir

DEMO_SOURCE = Path(__file__).with_name("demo.c")
# Heap mode has its own demo: a program whose memory, not time, has a shape.
HEAP_DEMO_SOURCE = Path(__file__).with_name("demo_heap.c")
MODE_FLAGS = {
    "gprof": ["-O2", "-g", "-pg"],
    "instrument": ["-O2", "-g", "-finstrument-functions"],
    "sampler": ["-O2", "-g"],
    "heap": ["-O2", "-g"],
}
PREFERENCE = ("sampler", "instrument", "gprof")  # live modes first


def demo_mode(available: Mapping[str, object]) -> str:
    """The most live mode this build of proftui has."""
    for mode in PREFERENCE:
        if mode in available:
            return mode
    raise ProftuiError("this build of proftui has no collector to run the demo with")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/proftui/demo when only this user can write there (a binary in a
    directory others can write to could be swapped for theirs), else a private
    directory for this run, removed at exit."""
    base, _symbols = default_cache_dir()
    warnings: list[str] = []
    cache = CacheDir(base / "proftui" / "demo", base, warnings, what="demo cache")
    if cache.usable(create=True):
        return cache.path
    for warning in warnings:
        print(f"proftui: {warning}; building the demo in a private directory", file=sys.stderr)
    private = Path(tempfile.mkdtemp(prefix="proftui-demo-"))
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    return private


def build_demo(mode: str) -> Path:
    """Compile demo.c with `mode`'s flags (once per source, its path and the flags);
    return the binary."""
    compiler = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if compiler is None:
        raise ProftuiError("the demo needs a C compiler: install gcc")
    flags = MODE_FLAGS[mode]
    source = HEAP_DEMO_SOURCE if mode == "heap" else DEMO_SOURCE
    # The binary's debug info names the source by path: a copy of proftui elsewhere
    # (another checkout, a removed one) must not reuse it, or its source pane is empty.
    digest = hashlib.sha256(source.read_bytes() + " ".join(flags).encode()
                            + bytes(source.resolve())).hexdigest()
    target = cache_dir() / f"demo-{mode}-{digest[:10]}"
    if target.exists():
        return target
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    result = subprocess.run([compiler, *flags, "-o", str(tmp), str(source)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (result.stderr.strip().splitlines() or ["unknown error"])[0]
        raise ProftuiError(f"compiling the demo failed: {first}")
    tmp.replace(target)
    return target
