"""CPU profiles of the exp_work fixture recorded by the reference tools (gperftools'
libprofiler, `perf record`), for the importers' and exporters' tests.

Each helper skips the calling test, with the reason, when its tool is absent or does
not work here.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import build_fixture

FLAGS = ("-O0", "-g", "-fno-omit-frame-pointer")


def libprofiler() -> str:
    """The libprofiler shared object to preload, or skip with the reason."""
    name = ctypes.util.find_library("profiler")
    if name is None:
        pytest.skip("libprofiler (Debian google-perftools) is not installed")
    return name


def record_gperftools(directory: Path, units: int = 250) -> tuple[Path, Path]:
    """Run the exp_work fixture under libprofiler; (binary, CPU profile)."""
    binary = build_fixture("exp_work.c", FLAGS)
    prof = directory / "cpu.prof"
    env = {**os.environ, "CPUPROFILE": str(prof), "CPUPROFILE_FREQUENCY": "1000",
           "LD_PRELOAD": libprofiler()}
    result = subprocess.run([str(binary), str(units)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("done"), result.stderr
    if not prof.exists():
        pytest.skip(f"libprofiler wrote no profile: {result.stderr.strip()}")
    return binary, prof


def record_perf(directory: Path, units: int = 60) -> tuple[Path, Path]:
    """`perf record -g` the exp_work fixture; (perf.data, perf script text)."""
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    check = subprocess.run(["perf", "record", "-g", "-o", str(directory / "check.data"),
                            "true"], capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or ["?"]
        pytest.skip(f"perf record does not work here: {lines[0]}")
    binary = build_fixture("exp_work.c", FLAGS)
    data = directory / "perf.data"
    result = subprocess.run(["perf", "record", "-g", "-F", "1000", "-o", str(data),
                             str(binary), str(units)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    script = directory / "perf.txt"
    with open(script, "w") as out:
        subprocess.run(["perf", "script", "-i", str(data)], stdout=out, check=True,
                       stderr=subprocess.DEVNULL, timeout=120)
    return data, script
