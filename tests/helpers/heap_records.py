"""Record the hv_sites heap fixture with gperftools and heaptrack (shared by heap tests).

Each helper skips the calling test, with the reason, when its tool is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import build_fixture

TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so")
FLAGS = ("-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls")

# hv_sites.c's truth per allocating function: (allocs, alloc bytes, leaks, leaked bytes)
TRUTH = {
    "site_freed": (100, 100_000, 0, 0),
    "site_leak": (50, 204_800, 50, 204_800),
    "site_half": (10, 1_000_000, 5, 500_000),
}
PEAK_TRUTH = {"site_freed": 0, "site_leak": 204_800, "site_half": 600_000}


def hv_sites() -> Path:
    return build_fixture("hv_sites.c", FLAGS)


def tcmalloc() -> Path:
    """The libtcmalloc to preload, or skip with the reason."""
    for candidate in (TCMALLOC, TCMALLOC.with_name("libtcmalloc.so.4")):
        if candidate.exists():
            return candidate
    pytest.skip("libtcmalloc (Debian libgoogle-perftools4 / libgoogle-perftools-dev) is "
                "not installed")


def record_gperftools_heap(directory: Path, binary: Path | None = None) -> tuple[Path, Path]:
    """Run hv_sites under HEAPPROFILE; (binary, the dump written at exit)."""
    binary = binary or hv_sites()
    env = {**os.environ, "LD_PRELOAD": str(tcmalloc()),
           "HEAPPROFILE": str(directory / "hv")}
    result = subprocess.run([str(binary)], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    dumps = sorted(directory.glob("hv.*.heap"))
    if not dumps:
        pytest.skip(f"tcmalloc wrote no heap profile: {result.stderr.strip()}")
    return binary, dumps[-1]


def record_heaptrack(directory: Path, binary: Path | None = None) -> tuple[Path, Path]:
    """Run hv_sites under heaptrack; (binary, its data file)."""
    tool = shutil.which("heaptrack")
    if tool is None or shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack / heaptrack_print (Debian heaptrack) is not installed")
    binary = binary or hv_sites()
    result = subprocess.run([tool, "-o", str(directory / "ht"), str(binary)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    files = [p for p in directory.iterdir() if p.name.startswith("ht.")]
    assert len(files) == 1, result.stdout
    return binary, files[0]
