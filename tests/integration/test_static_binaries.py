"""Static non-PIE binaries: `gcc -static` links .eh_frame but no .eh_frame_hdr (no
PT_GNU_EH_FRAME), so the attach helper finds the FDEs by walking .eh_frame through the
section headers (csrc/common/pt_cfi.c, the one CFI index).  Without that every stack of
an `-O2` static program is cut at its leaf; with it, nearly every sample reaches main.
The launched sampler cannot be preloaded into a static binary: it refuses in one line.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_fixture
from tests.helpers.collect import attached_until
from tests.helpers.costs import names_on_paths, total_of
from tests.helpers.targets import ReadyTarget

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="CFI unwinding is x86-64 only")
CLI = [sys.executable, "-m", "proftui.tui.cli"]
STATIC_LIBC = Path("/usr/lib/x86_64-linux-gnu/libc.a")


def static_fixture() -> Path:
    """att_static.c linked `-static -O2 -g` (no frame pointers, no .eh_frame_hdr)."""
    if not STATIC_LIBC.exists():
        pytest.skip(f"no static libc ({STATIC_LIBC} is not installed): cannot link -static")
    binary = build_fixture("att_static.c", ["-static", "-O2", "-g", "-fomit-frame-pointer"],
                           output="att_static_static")
    headers = subprocess.run(["readelf", "-lW", str(binary)], capture_output=True, text=True)
    assert "GNU_EH_FRAME" not in headers.stdout, "the link made a search table: no test"
    return binary


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_attach_to_static_binary_reaches_main(method: str) -> None:
    # Sampled until 150 samples are in (CPU-time samples come slower on a loaded
    # machine), within a deadline; the target spins longer than that.
    with ReadyTarget([static_fixture(), "60"]) as target:
        profile = attached_until(target.pid, 150, method, frequency_hz=500)
        assert target.proc.poll() is None, "the target did not survive the attach"
    samples = profile.total(0)
    assert samples >= 150, f"too few samples in 40 s: {samples}"
    reached = total_of(profile, "main")
    # 90% of the samples, not all: one may land in _start's or clock_gettime's code
    # before its frame is set up.
    assert reached >= 0.9 * samples, (reached, samples, names_on_paths(profile))
    hot = [p for p in names_on_paths(profile) if p and p[-1] == "st_hot"]
    assert any(p[-4:] == ["main", "st_outer", "st_middle", "st_hot"] for p in hot), hot


def test_sampler_refuses_static_binary_in_one_line() -> None:
    res = subprocess.run([*CLI, "--mode", "sampler", "--text", str(static_fixture()), "0.1"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "statically linked" in lines[0] and "--pid" in lines[0], lines
