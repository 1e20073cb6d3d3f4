"""Samples in the vDSO (clock_gettime and friends) get the vDSO's own function names.

tests/fixtures/vdso_clock.c spends nearly all its time in clock_gettime(CLOCK_MONOTONIC),
which runs in the kernel's vDSO image: no file, "[vdso]" in /proc/PID/maps.  The sampler
(from its runtime's map log) and attach (from /proc/PID/maps) both name the frames, and
the share is held to perf recording the same run.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.annotate import disassembly_listing
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.collectors.symbols.elf import ElfFile
from proftui.collectors.symbols.maps import parse_maps
from proftui.collectors.symbols.vdso import VDSO, vdso_file

from tests.conftest import build_fixture
from tests.helpers.reference import perf_allowed, perf_user_shares, proftui_symbol_shares

FLAGS = ["-O2", "-g"]
VDSO_CLOCK = "__vdso_clock_gettime"  # the name perf gives it too (alias: clock_gettime)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def vdso_frames(profile: Profile) -> set[tuple[str, str]]:
    return {(f.function, f.module) for f in profile.frames if f.module == VDSO}


def test_own_image_opens_as_an_elf_with_the_clock_function() -> None:
    path = vdso_file(None)
    assert path is not None
    with ElfFile(path) as elf:
        assert elf.section(".dynsym") is not None
    maps = Path("/proc/self/maps").read_text()
    assert [m.path for m in parse_maps(maps) if m.path == VDSO] == [VDSO]


def test_sampler_names_vdso_frames(tmp_path: Path) -> None:
    binary = build_fixture("vdso_clock.c", FLAGS)
    out = tmp_path / "clock.proftui"
    run = cli("record", "--mode", "sampler", "-o", str(out), str(binary), "5000000")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "clock read 5000000 times\n"
    profile = storage.load(out)
    assert (VDSO_CLOCK, VDSO) in vdso_frames(profile), sorted(vdso_frames(profile))
    shares = proftui_symbol_shares(profile)
    assert shares.get(VDSO_CLOCK, 0) > 50, shares
    assert not any(f.function.startswith("0x") for f in profile.frames), \
        [f.function for f in profile.frames]
    assert not any(VDSO in w for w in profile.meta.warnings), profile.meta.warnings
    # the source pane disassembles it from proftui's own image (same kernel, same build-id)
    frame = next(f for f in profile.frames if f.function == VDSO_CLOCK)
    listing = disassembly_listing(profile, frame)
    assert listing is not None and listing.kind == "disassembly"
    costed = [row for row in listing.lines if row.cost and row.cost[0] > 0]
    assert costed and all(row.text.strip() for row in costed), listing.lines[:5]


def test_vdso_share_agrees_with_perf_on_the_same_run(tmp_path: Path) -> None:
    if not perf_allowed(tmp_path):
        pytest.skip("perf is not installed or not permitted here (perf_event_paranoid)")
    binary = build_fixture("vdso_clock.c", FLAGS)
    out, perf_data = tmp_path / "clock.proftui", tmp_path / "perf.data"
    run = subprocess.run(
        ["perf", "record", "-q", "-F", "1000", "-g", "-o", str(perf_data), "--",
         sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out), "--mode", "sampler",
         "-F", "1000", str(binary), "20000000"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    saved = storage.load(out)
    ours, ours_samples = proftui_symbol_shares(saved), saved.total(0)
    theirs = perf_user_shares(perf_data, binary.name[:15])
    print(f"{VDSO_CLOCK}: perf {theirs.get(VDSO_CLOCK, 0):.1f}%, proftui "
          f"{ours.get(VDSO_CLOCK, 0):.1f}%")
    assert theirs.get(VDSO_CLOCK, 0) > 50, theirs  # perf agrees the time is in the vDSO
    # 5 points, or 5 standard errors of the two shares where that is wider (a quiet run
    # once gave perf 84.5 against 92.1 on about 700 samples each).
    share, samples = theirs[VDSO_CLOCK] / 100, max(ours_samples, 1)
    spread = 500 * math.sqrt(2 * share * (1 - share) / samples)
    assert abs(theirs[VDSO_CLOCK] - ours.get(VDSO_CLOCK, 0)) <= max(5.0, spread), \
        (VDSO_CLOCK, ours.get(VDSO_CLOCK), theirs.get(VDSO_CLOCK), samples,
         sorted(theirs.items(), key=lambda kv: -kv[1])[:8])


def test_attach_names_vdso_frames(tmp_path: Path) -> None:
    binary = build_fixture("vdso_clock.c", FLAGS)
    target = subprocess.Popen([str(binary), "2000000000"], stdout=subprocess.DEVNULL)
    out = tmp_path / "attach.proftui"
    try:
        time.sleep(0.2)
        run = cli("record", "--pid", str(target.pid), "--duration", "1", "-o", str(out))
        assert run.returncode == 0, run.stderr
    finally:
        target.kill()
        target.wait()
    profile = storage.load(out)
    assert (VDSO_CLOCK, VDSO) in vdso_frames(profile), sorted(vdso_frames(profile))
    assert proftui_symbol_shares(profile).get(VDSO_CLOCK, 0) > 50
