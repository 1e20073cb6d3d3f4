"""A run whose phases are known: tests/fixtures/tl_phases.c computes in phase_a for its
first two seconds, then in phase_b for two more, and reports each phase's CPU time."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from proftui.collectors.base import Collector
from proftui.collectors.model.profile import Profile
from proftui.collectors.sampler.collector import SamplerCollector

from tests.conftest import build_fixture
from tests.helpers.collect import attach, run_to_end
from tests.helpers.reference import fixture_cpu_ns


def _two_phases(collector_class: type[Collector], fixture: str, work: Path,
                seconds: float) -> tuple[Profile, dict[str, int], float]:
    """`fixture` (first phase for `seconds`, then the second for as long) profiled to
    its end: (the profile, what the program counted per phase, when the second phase
    began in seconds of the profile's clock)."""
    binary = build_fixture(fixture, ["-O2", "-g"])
    out = work / "phases.txt"
    start = time.time()
    profile, _output = run_to_end(collector_class, binary, f"{start + seconds:.3f}",
                                  f"{start + 2 * seconds:.3f}", str(out))
    assert profile.meta.exit_status == 0 and profile.meta.start_time is not None
    return profile, fixture_cpu_ns(out), start + seconds - profile.meta.start_time


def record_phases(work: Path, seconds: float = 2.0) -> tuple[Profile, dict[str, int], float]:
    """tl_phases.c sampled at 1 kHz: (the profile, each phase's CPU ns, how late the
    run's clock started: when the switch happened minus `seconds`)."""
    profile, cpu, switch = _two_phases(SamplerCollector, "tl_phases.c", work, seconds)
    return profile, cpu, switch - seconds


def attach_phases(seconds: float = 1.5) -> tuple[Profile, float]:
    """tl_phases.c sampled by attach mode (500 Hz) from its start to its exit: (the
    profile, when phase_b began in seconds of the profile's clock)."""
    binary = build_fixture("tl_phases.c", ["-O2", "-g"])
    start = time.time()
    switch = start + seconds
    target = subprocess.Popen([str(binary), f"{switch:.3f}", f"{switch + seconds:.3f}",
                               os.devnull])
    try:
        collector = attach(target.pid, frequency_hz=500)
        try:
            profile = collector.wait()
        finally:
            collector.stop()
        assert target.wait(timeout=30) == 0
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    assert profile.meta.start_time is not None
    return profile, switch - profile.meta.start_time


def record_heap_phases(work: Path, seconds: float = 1.0) -> tuple[Profile, dict[str, int], float]:
    """tests/fixtures/tl_heap_phases.c under the heap profiler: (the profile, each phase's
    block count as the program counted them, when alloc_b began in seconds of the
    profile's clock)."""
    from proftui.collectors.heap.collector import HeapCollector

    return _two_phases(HeapCollector, "tl_heap_phases.c", work, seconds)
