"""`proftui demo`: compile the bundled demo program for a mode, cached per user."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from proftui.collectors.errors import ProftuiError

DEMO_SOURCE = Path(__file__).with_name("demo.c")
MODE_FLAGS = {
    "gprof": ["-O2", "-g", "-pg"],
    "instrument": ["-O2", "-g", "-finstrument-functions"],
    "sampler": ["-O2", "-g"],
}
PREFERENCE = ("sampler", "instrument", "gprof")  # live modes first


def demo_mode(available: Mapping[str, object]) -> str:
    """The most live mode this build of proftui has."""
    for mode in PREFERENCE:
        if mode in available:
            return mode
    raise ProftuiError("this build of proftui has no collector to run the demo with")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "proftui" / "demo"


def build_demo(mode: str) -> Path:
    """Compile demo.c with `mode`'s flags (once per source and flags); return the binary."""
    compiler = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if compiler is None:
        raise ProftuiError("the demo needs a C compiler: install gcc")
    flags = MODE_FLAGS[mode]
    digest = hashlib.sha256(DEMO_SOURCE.read_bytes() + " ".join(flags).encode()).hexdigest()
    target = cache_dir() / f"demo-{mode}-{digest[:10]}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    result = subprocess.run([compiler, *flags, "-o", str(tmp), str(DEMO_SOURCE)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (result.stderr.strip().splitlines() or ["unknown error"])[0]
        raise ProftuiError(f"compiling the demo failed: {first}")
    tmp.replace(target)
    return target
