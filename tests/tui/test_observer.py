"""The observer stays light (issue 15), correctness only (the CPU figures are in
benchmarks/bench_tui.py): no snapshot is recomputed while nothing changes (paused),
one arrives as soon as data moves again, and the incrementally built live profile
equals one built from scratch out of the same stacks."""

from __future__ import annotations

import time
from dataclasses import replace

from proftui.collectors.base import Collector, CollectorOptions
from proftui.collectors.model.profile import CallTree, Profile
from proftui.collectors.model.views import flat_profile
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.collect import attached
from tests.helpers.instrument import start_spin, wait_for_ticks
from tests.helpers.targets import ATT_FLAGS, SpinTarget
from tests.helpers.tui import quit_live, run_app, wait_for


def spin_sampler(seconds: str) -> SamplerCollector:
    """The sampler on att_spin (two spinning threads) for `seconds`, started."""
    binary = build_fixture("att_spin.c", ATT_FLAGS)
    collector = SamplerCollector([str(binary), seconds], CollectorOptions(output="log",
                                                                          frequency_hz=500))
    collector.start()
    return collector


async def settle(pilot: Pilot, app: ProfTuiApp, collector: Collector) -> None:
    """Until the paused data stopped moving (records written before the pause may still
    be drained: two of the app's poll rounds with no change) and the app shows it."""
    seen: dict[str, object] = {"version": None, "round": 0}

    def settled() -> bool:
        version = collector.data_version()
        if version != seen["version"]:
            seen["version"], seen["round"] = version, app.poll_rounds
            return False
        return (app.poll_rounds >= int(seen["round"]) + 2  # type: ignore[call-overload]
                and app.shown_version == version and app.snapshots_taken > 0)

    await wait_for(pilot, settled, timeout=20, what="the paused snapshot")
    await pilot.pause(0.1)  # its message handled


def test_paused_app_recomputes_nothing_until_new_data() -> None:
    collector = spin_sampler("30")
    try:
        app = ProfTuiApp(collector=collector)

        async def body(pilot: Pilot, app: ProfTuiApp) -> None:
            await wait_for(pilot, lambda: app.profile is not None
                           and app.profile.total(0) > 20, what="live samples")
            await pilot.press("p")
            assert app.paused
            await settle(pilot, app, collector)
            taken, version = app.snapshots_taken, collector.data_version()
            shown = app.profile
            rounds = app.poll_rounds
            await wait_for(pilot, lambda: app.poll_rounds >= rounds + 3, timeout=20,
                           what="three more poll rounds")
            assert collector.data_version() == version  # the runtime recorded nothing
            assert app.snapshots_taken == taken, "snapshots recomputed while paused"
            assert app.profile is shown
            await pilot.press("p")
            assert not app.paused
            await wait_for(pilot, lambda: app.snapshots_taken > taken
                           and app.profile is not shown
                           and app.profile.total(0) > shown.total(0),
                           what="a new snapshot once samples arrive again")
            await quit_live(pilot)

        run_app(app, body)
    finally:
        collector.stop()


def test_unchanged_version_means_unchanged_snapshot() -> None:
    """data_version() moves exactly when the data does: equal versions, equal profiles."""
    collector = spin_sampler("30")
    try:
        time.sleep(0.5)
        collector.pause()
        time.sleep(0.3)  # the drain thread empties what was recorded before the pause
        collector.poll()
        first_version, first = collector.data_version(), collector.snapshot()
        time.sleep(0.4)
        assert collector.data_version() == first_version
        assert tree_costs(collector.snapshot()) == tree_costs(first)
        collector.resume()
        deadline = time.monotonic() + 10
        while collector.data_version() == first_version:
            assert time.monotonic() < deadline, "data_version never moved after resume"
            time.sleep(0.05)
        collector.reset()
        assert collector.data_version() != first_version
    finally:
        collector.stop()


def tree_costs(profile: Profile, tree: CallTree | None = None) -> dict[tuple[str, ...], tuple]:
    """{path of function names: (self costs, total costs)} of a tree (the merged one)."""
    tree = tree or profile.tree
    assert tree is not None
    out: dict[tuple[str, ...], tuple] = {}
    for node in tree.nodes():
        path = tuple(profile.frames[f].function for f in node.path())
        out[path] = (tuple(round(c, 3) for c in node.self_cost),
                     tuple(round(c, 3) for c in node.total_cost))
    return out


def assert_same_profile(live: Profile, whole: Profile) -> None:
    assert tree_costs(live) == tree_costs(whole)
    assert set(live.parts) == set(whole.parts)
    for name in live.parts:
        assert tree_costs(live, live.parts[name]) == tree_costs(whole, whole.parts[name])
    assert live.line_costs == whole.line_costs
    assert live.address_costs == whole.address_costs
    flat = [(e.frame.function, e.self_cost, e.total_cost) for e in flat_profile(live)]
    assert flat == [(e.frame.function, e.self_cost, e.total_cost) for e in flat_profile(whole)]
    # the per-function totals kept as costs changed equal those summed from the tree
    from_tree = replace(live, functions=None)
    assert flat == [(e.frame.function, e.self_cost, e.total_cost)
                    for e in flat_profile(from_tree)]


def test_sampler_incremental_profile_equals_a_full_rebuild() -> None:
    collector = spin_sampler("2")
    try:
        snapshots = []
        while collector.is_running():
            snapshots.append(collector.snapshot())  # each folds in only what moved
            time.sleep(0.2)
        final = collector.wait()
        assert len(snapshots) >= 3 and final.total(0) > 100
        # Snapshots handed out earlier never change under the views.
        assert snapshots[0].total(0) < final.total(0)
        before = tree_costs(snapshots[0])
        collector.snapshot()
        assert tree_costs(snapshots[0]) == before
        with collector._sym_lock:
            collector._profile.rebuild()  # from every stack again
        assert_same_profile(final, collector.snapshot())
    finally:
        collector.stop()


def test_attach_incremental_profile_equals_a_full_rebuild() -> None:
    with SpinTarget(2.0) as target, attached(target, frequency_hz=500) as collector:
        shown = None
        while collector.is_running():
            shown = collector.snapshot()
            time.sleep(0.2)
        final = collector.wait()
        assert shown is not None and final.total(0) > 100
        with collector._sym_lock:
            collector._profile.rebuild()
        assert_same_profile(final, collector.snapshot())


def test_instrument_paused_app_recomputes_nothing() -> None:
    """Instrument mode cannot tell cheaply whether its in-place counters moved while
    recording, but paused they cannot: the app stops recomputing until resume."""
    collector = start_spin()
    try:
        wait_for_ticks(collector, 1000)
        assert collector.data_version() is None  # recording: every poll takes a snapshot
        app = ProfTuiApp(collector=collector)

        async def body(pilot: Pilot, app: ProfTuiApp) -> None:
            await wait_for(pilot, lambda: app.profile is not None, what="a snapshot")
            await pilot.press("p")
            await settle(pilot, app, collector)
            taken, rounds = app.snapshots_taken, app.poll_rounds
            await wait_for(pilot, lambda: app.poll_rounds >= rounds + 3, timeout=20,
                           what="three more poll rounds")
            assert app.snapshots_taken == taken, "snapshots recomputed while paused"
            shown = app.profile
            await pilot.press("p")
            await wait_for(pilot, lambda: app.profile is not shown, what="a new snapshot")
            await quit_live(pilot)

        run_app(app, body)
    finally:
        collector.stop()
