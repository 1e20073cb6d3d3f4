"""The timeline's data (collectors/model/slices.py) on a run whose phases are known:
a time range's profile holds what the program did in that range, checked against the
program's own per-phase CPU clock on the same run, saved and loaded, and through
`proftui report --from/--to`."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.slices import range_profile
from proftui.collectors.model.views import flat_profile

from tests.conftest import build_fixture
from tests.helpers.collect import wait_applying_drained
from tests.helpers.phases import attach_phases, record_heap_phases, record_phases
from tests.helpers.reference import fixture_cpu_ns


def totals(profile: Profile) -> dict[str, float]:
    """Samples under each function (its calls' total, recursion once)."""
    return {e.frame.function: e.total_cost[0] for e in flat_profile(profile)}


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, dict[str, int], float]:
    """A 4 s run: phase_a for its first 2 s, phase_b for the next 2 (1 kHz)."""
    return record_phases(tmp_path_factory.mktemp("tl"))


def test_each_phase_is_its_range(phases: tuple[Profile, dict[str, int], float]) -> None:
    profile, cpu, skew = phases
    period = profile.meta.period_ns or 1_000_000
    assert profile.slices is not None and profile.slices.width <= 0.25
    edge = 2.0 + skew  # the switch, in seconds of the run
    first = range_profile(profile, 0.0, edge - 0.25)  # whole slices of phase_a only
    # A sample is stamped when its signal handler runs, which a loaded machine delays
    # after the tick that took it: the second range starts a whole slice past the edge
    # (edge + 0.25 widened down to its slice may start a millisecond after it).
    second = range_profile(profile, edge + 0.5, 5.0)
    a, b = totals(first), totals(second)
    assert b.get("phase_a", 0.0) == 0 and a.get("phase_b", 0.0) == 0, (a, b)
    # each range holds its phase's CPU time, but at most what is left out at the edge
    # (and the start-up before main)
    for spent, phase, left_out in ((a.get("phase_a", 0) * period / 1e9, "phase_a", 0.35),
                                   (b.get("phase_b", 0) * period / 1e9, "phase_b", 0.6)):
        assert cpu[phase] / 1e9 - left_out <= spent <= cpu[phase] / 1e9 + 0.05, \
            (phase, spent, cpu)
    whole = range_profile(profile, 0.0, 1e9)
    assert whole.total(0) == profile.total(0)  # every sample is in some slice


@pytest.fixture
def saved_phases(phases: tuple[Profile, dict[str, int], float], tmp_path: Path) -> Path:
    path = tmp_path / "run.proftui"
    storage.save(phases[0], path, embed_sources=False)
    return path


def test_ranges_survive_saving(phases: tuple[Profile, dict[str, int], float],
                               saved_phases: Path) -> None:
    profile, _cpu, skew = phases
    loaded = storage.load(saved_phases)
    assert loaded.slices is not None
    cut = 2.0 + skew - 0.25
    assert totals(range_profile(loaded, 0, cut)) == \
        totals(range_profile(profile, 0, cut))


def test_report_shows_the_range_asked_for(phases: tuple[Profile, dict[str, int], float],
                                          saved_phases: Path) -> None:
    cut = 2.0 + phases[2] - 0.25
    path = saved_phases
    text = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "report", "--from", "0",
                           "--to", f"{cut:.3f}", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert "phase_a" in text and "phase_b" not in text


def test_report_refuses_a_reversed_range(saved_phases: Path) -> None:
    path = saved_phases
    bad = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "report", "--from", "3",
                          "--to", "1", str(path)], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["report", "export", "open"])
def test_ranges_outside_the_run_are_one_line(saved_phases: Path, command: str) -> None:
    """A range past the run's end, or empty, is one line and exit status 2 (an IndexError
    traceback and exit 1 before) for every command that takes --from/--to."""
    extra = ["-f", "folded", "-o", "/dev/null"] if command == "export" else []
    for bad in (["--from", "100"], ["--from", "1e8"], ["--to", "0"],
                ["--from", "4.5", "--to", "99"]):
        result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", command, *extra, *bad,
                                 str(saved_phases)], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, (bad, result.stderr)
        assert "Traceback" not in result.stderr and "no part of the run" in lines[0], lines


def test_a_range_says_the_seconds_it_used(phases: tuple[Profile, dict[str, int], float]) -> None:
    """A range is widened to whole slices: its note gives the seconds actually used, to
    the hundredth, and says it was widened (\"2.2-4.2\" for 2.25-4.25 s before)."""
    profile = phases[0]
    assert profile.slices is not None and profile.slices.width == 0.25
    note = range_profile(profile, 2.3, 3.2).meta.warnings[-1]
    assert note.startswith("time range 2.25-3.25 s of the run (asked 2.3-3.2 s;"), note
    assert "widened to whole slices" in note
    exact = range_profile(profile, 0.5, 1.5).meta.warnings[-1]
    assert exact == "time range 0.50-1.50 s of the run", exact


def test_attach_counts_land_in_their_phase() -> None:
    """Attach mode's timeline: the helper sends counts every tenth of a second with
    their time, so each phase of a program attached from its start is its own range."""
    profile, edge = attach_phases()
    assert profile.slices is not None
    first, second = range_profile(profile, 0.0, edge - 0.3), range_profile(profile, edge + 0.3,
                                                                            1e9)
    a, b = totals(first), totals(second)
    assert a.get("phase_a", 0) > 100 and b.get("phase_b", 0) > 100, (a, b)
    assert a.get("phase_b", 0) == 0 and b.get("phase_a", 0) == 0, (a, b)
    assert range_profile(profile, 0.0, 1e9).total(0) == profile.total(0)


def test_heap_allocations_land_in_their_phase(tmp_path: Path) -> None:
    """A heap profile's timeline: each phase's allocations are in its own range, and
    the whole run's ranges hold every block the program counted itself."""
    profile, blocks, edge = record_heap_phases(tmp_path)
    assert profile.slices is not None
    allocs = profile.metrics.index(next(m for m in profile.metrics if m.name == "allocs"))

    def allocated(p: Profile) -> dict[str, float]:
        return {e.frame.function: e.total_cost[allocs] for e in flat_profile(p)}

    a = allocated(range_profile(profile, 0.0, edge - 0.3))
    b = allocated(range_profile(profile, edge + 0.3, 1e9))
    assert a.get("alloc_a", 0) > 1000 and b.get("alloc_b", 0) > 1000, (a, b)
    assert a.get("alloc_b", 0) == 0 and b.get("alloc_a", 0) == 0, (a, b)
    whole = allocated(range_profile(profile, 0.0, 1e9))
    assert whole["alloc_a"] == blocks["alloc_a"] and whole["alloc_b"] == blocks["alloc_b"]
    assert range_profile(profile, 0.0, 1e9).total(0) == profile.total(0)  # bytes, too


def test_a_headless_heap_wait_folds_stacks_and_slices_in(tmp_path: Path) -> None:
    """The heap's headless wait folds every second: stacks reach the live profile
    before any snapshot (the timeline's entries become slices of them, not a list that
    grows with the run), and the whole run's range still holds every block the program
    counted.  With apply_drained() a no-op no stack exists until the end."""
    from proftui.collectors.heap.collector import HeapCollector

    binary = build_fixture("tl_heap_phases.c", ["-O2", "-g"])
    start, out = time.time(), tmp_path / "phases.txt"
    profile, seen = wait_applying_drained(HeapCollector(
        [str(binary), f"{start + 1.2:.3f}", f"{start + 2.4:.3f}", str(out)],
        CollectorOptions(output="log")))
    assert max(seen) > 0, f"nothing folded in {len(seen) * 0.05:.1f} s of running"
    allocs = [m.name for m in profile.metrics].index("allocs")
    whole = range_profile(profile, 0.0, 1e9)
    counted = {e.frame.function: e.total_cost[allocs] for e in flat_profile(whole)}
    blocks = fixture_cpu_ns(out)  # "NAME COUNT" lines: blocks, here
    assert counted["alloc_a"] == blocks["alloc_a"] and counted["alloc_b"] == blocks["alloc_b"]
    assert whole.total(0) == profile.total(0)
