"""Real collectors on fixture programs: run one to the target's end, or attach to a
running target."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import Collector, CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Profile
from proftui.collectors.sampler.collector import SamplerCollector

from tests.conftest import build_fixture
from tests.helpers.targets import ATT_DONE, ReadyTarget, SpinTarget


def run_to_end(collector_class: type[Collector], binary: Path | str, *args: str,
               **options: object) -> tuple[Profile, str]:
    """Profile `binary args` with `collector_class` to the end; (profile, the target's
    stdout+stderr)."""
    collector = collector_class([str(binary), *args],
                                CollectorOptions(output="log", **options))  # type: ignore[arg-type]
    try:
        collector.start()
        profile = collector.wait()
        assert collector.process is not None
        output = collector.process.output_text()
    finally:
        collector.stop()
    return profile, output


def wait_applying_drained(collector: Collector) -> tuple[Profile, list[int]]:
    """Start `collector` and wait for its target as a headless `record` does (applying
    what was drained every second); stops it.  (The final profile, the stacks its live
    profile held at each look every 50 ms while the target ran.)"""
    collector.start()
    seen = []
    try:
        with collector.applying_drained():
            while collector.is_running():
                seen.append(len(collector.stack_tables()[0]))
                time.sleep(0.05)
        return collector.wait(), seen
    finally:
        collector.stop()


def run_sampler(binary: Path, *args: str, **options: object) -> tuple[Profile, str]:
    """The sampler's profile of `binary args`, run to its end, and the target's output."""
    return run_to_end(SamplerCollector, binary, *args, **options)


def start_sampler(binary: Path, *args: str, **options: object) -> SamplerCollector:
    """A SamplerCollector started on `binary args` (the output kept in memory)."""
    collector = SamplerCollector([str(binary), *args],
                                 CollectorOptions(output="log", **options))  # type: ignore[arg-type]
    collector.start()
    return collector


def sampled(argv: list[str]) -> Profile:
    """The sampler's profile of `argv`, run to its exit (output kept in memory)."""
    return run_sampler(Path(argv[0]), *argv[1:])[0]


def attach(pid: int, method: str | None = None, **options: object) -> AttachCollector:
    """A started AttachCollector on `pid` (with `method`, or the default); skips when the
    machine forbids that kind of sampling."""
    if method is not None:
        options["method"] = method
    collector = AttachCollector([], CollectorOptions(pid=pid, **options))  # type: ignore[arg-type]
    try:
        collector.start()
    except ProftuiError as exc:
        collector.stop()
        if any(w in str(exc) for w in ("denied", "refused", "ptrace_scope", "paranoid",
                                       "disabled", "not allowed")):
            pytest.skip(f"{method or 'attach'} sampling is not allowed here: {exc}")
        raise
    return collector


@contextlib.contextmanager
def attached(target: ReadyTarget, method: str | None = None,
             **options: object) -> Iterator[AttachCollector]:
    """An AttachCollector started on `target` (attach()), stopped at the end."""
    collector = attach(target.pid, method, **options)
    try:
        yield collector
    finally:
        collector.stop()


def attached_profile(target: ReadyTarget, method: str | None = None,
                        **options: object) -> Profile:
    """`target` sampled by attach mode (with `method`, or the default) from now until it
    exits, or for `duration_s` when that is among the options."""
    collector = attach(target.pid, method, **options)
    profile = collector.wait()
    collector.stop()
    return profile


def attached_until(pid: int, samples: int, method: str | None = None, within: float = 40,
                   **options: object) -> Profile:
    """`pid` sampled by attach mode until `samples` are in or `within` seconds passed
    (CPU-time samples come slower on a loaded machine): the live profile then."""
    collector = attach(pid, method, **options)
    try:
        deadline = time.monotonic() + within
        profile = collector.snapshot()
        while profile.total(0) < samples and time.monotonic() < deadline:
            time.sleep(0.1)  # polling a live profile, not waiting for an event
            profile = collector.snapshot()
    finally:
        collector.stop()
    return profile


def attach_profile(seconds: float = 2.0) -> Profile:
    """att_spin (running `seconds`) sampled by attach mode until it exits."""
    with SpinTarget(seconds) as target:
        profile = attached_profile(target, frequency_hz=500)
        assert target.finish() == (ATT_DONE, 7)
    assert profile.total(0) > 50, "too few samples to test with"
    return profile


def gprof_collector(units: str = "150", status: str = "3") -> Collector:
    """A GprofCollector (not started) on gp_split: heavy/medium/light = 60/30/10 of step."""
    from proftui.collectors.gprof.collector import GprofCollector

    binary = build_fixture("gp_split.c", ["-pg", "-g", "-O1", "-fno-inline"])
    return GprofCollector([str(binary), units, status], CollectorOptions(output="log"))
