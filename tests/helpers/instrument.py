"""Shared helpers of the instrument-mode tests: build fixtures, run them, read trees."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from proftui.collectors.base import CollectorOptions
from proftui.collectors.instrument.collector import InstrumentCollector
from proftui.collectors.model.profile import CallTree, Profile

from tests.conftest import build_fixture
from tests.helpers.collect import run_to_end
from tests.helpers.costs import flat_rows, self_of

FLAGS = ["-O2", "-g", "-finstrument-functions", "-pthread"]


def build(source: str, extra: list[str] | None = None, compiler: str = "gcc",
          output: str | None = None) -> Path:
    return build_fixture(source, [*FLAGS, *(extra or [])], output=output, compiler=compiler)


def build_plugin(source: str) -> Path:
    """An instrumented shared library (no `lib` prefix needed: used by path)."""
    return build_fixture(source, [*FLAGS, "-shared", "-fPIC"], output=f"{Path(source).stem}.so")


def record(argv: list[str | Path], **options: Any) -> tuple[Profile, str]:
    """Run to the end under instrument mode; the profile and the target's output."""
    return run_to_end(InstrumentCollector, *map(str, argv), **options)


def calls_by_path(profile: Profile, part: str | None = None) -> dict[tuple[str, ...], int]:
    """Every calling context as a tuple of function names (outermost first) -> calls.

    Rows that only carry sampled time (calls unknown: [instrumentation], code a tick
    landed in outside the node's own function) are not contexts and are left out."""
    tree: CallTree | None = profile.tree if part is None else profile.parts[part]
    assert tree is not None
    out: dict[tuple[str, ...], int] = {}
    stack = [(child, (profile.frames[child.frame_id].function,))
             for child in tree.root.children.values()]
    while stack:
        node, path = stack.pop()
        if node.calls is None:
            continue
        out[path] = out.get(path, 0) + node.calls
        stack.extend((c, (*path, profile.frames[c.frame_id].function))
                     for c in node.children.values())
    return out


def function_calls(profile: Profile, name: str) -> int:
    """Calls of `name` over every context."""
    return sum(calls for path, calls in calls_by_path(profile).items() if path[-1] == name)


def start_spin(**options: object) -> InstrumentCollector:
    """ins_spin (main -> spin -> tick, for 20 s) started under instrument mode."""
    collector = InstrumentCollector([str(build("ins_spin.c")), "20"],
                                    CollectorOptions(output="log", **options))  # type: ignore[arg-type]
    collector.start()
    return collector


def wait_for_ticks(collector: InstrumentCollector, at_least: int) -> Profile:
    """The first live profile in which tick() has been called `at_least` times."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        profile = collector.collect()
        if function_calls(profile, "tick") >= at_least:
            return profile
        time.sleep(0.05)
    raise AssertionError("the target never called tick()")


def start_ins_open(spin_s: str, loop_s: str, **options: object) -> InstrumentCollector:
    """ins_open.c started under instrument mode: leaf_spin computes `spin_s` seconds (no
    hook runs meanwhile), then loop_calls `loop_s`."""
    collector = InstrumentCollector([str(build("ins_open.c")), spin_s, loop_s],
                                    CollectorOptions(output="log", **options))  # type: ignore[arg-type]
    collector.start()
    return collector


def kill_after_a_look(collector: InstrumentCollector) -> tuple[Profile, Profile]:
    """(a live profile of `collector`'s target 1.5 s in, its final profile once it has been
    killed with SIGKILL right after); the collector is stopped."""
    try:
        time.sleep(1.5)
        live = collector.collect()
        assert collector.process is not None
        collector.process.send_signal(signal.SIGKILL)
        collector.process.wait()
        return live, collector.collect()
    finally:
        collector.stop()


def open_call_seen_live(metric: int, **options: object) -> tuple[Profile, Profile]:
    """ins_open (leaf_spin 3 s without a hook, then loop_calls 1 s) under instrument mode
    with `options`, looked at 1.5 s in: the live profile has leaf_spin's time so far in
    metric `metric` (over 0.8 s, at most the time elapsed) within main's total.
    (the live profile, the final one)."""
    begun = time.monotonic()
    collector = start_ins_open("3", "1", **options)
    try:
        time.sleep(1.5)
        live = collector.collect()
        assert collector.exit_info() is None, "the fixture ended too soon"
        spun = self_of(live, "leaf_spin", metric)
        elapsed = time.monotonic() - begun
        print(f"live: leaf_spin {spun / 1e9:.2f} s after {elapsed:.2f} s")
        assert 0.8e9 < spun <= elapsed * 1e9
        assert flat_rows(live)["main"].total_cost[metric] >= spun
        return live, collector.wait()
    finally:
        collector.stop()
