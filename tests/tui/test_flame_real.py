"""The flame pane on a real sampled program: tests/fixtures/thr_ratio.c (four named
threads spinning 1:2:3:4 units in thr_spin_1..4, main a little in thr_main_work).

The search share of `thr_spin_` is checked against the fixture's own per-thread CPU
time (CLOCK_THREAD_CPUTIME_ID, written to its report), and the per-thread graph
against the thread's total; the sandwich of a spin function holds its real caller.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from proftui.collectors.model.parts import part_total
from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flame import FlamePane
from proftui.tui.widgets.flame_graph import FlameGraph
from textual.pilot import Pilot

from tests.helpers.thr_ratio import WORKERS, Report
from tests.helpers.tui import choose_thread, run_app, wait_for

SHARE_TOLERANCE = 0.04  # sampled share of thr_spin_* vs the workers' measured CPU share


def test_flame_search_share_matches_measured_cpu(
        thr_ratio: tuple[Profile, Report], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    profile, report = thr_ratio
    measured = sum(report.threads[w][1] for w in WORKERS) / sum(
        ns for _tid, ns in report.threads.values())

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.profile is not None, what="profile")
        await pilot.press("5")
        graph = app.query_one("#flame-graph", FlameGraph)
        pane = app.query_one(FlamePane)
        await wait_for(pilot, lambda: graph.call_tree is not None, what="graph")
        await pilot.press("slash", *"thr_spin_", "enter")
        await wait_for(pilot, lambda: pane.share is not None, what="share")
        assert pane.share is not None
        assert abs(pane.share - measured) <= SHARE_TOLERANCE, (pane.share, measured)
        # n goes to the widest match first: thr_spin_4 (4 units of 10).
        await pilot.press("n")
        frame = graph.selected_frame()
        assert frame is not None and frame.function.startswith("thr_spin_")
        await pilot.press("enter")  # zoom: it fills the width, its callers stay below
        layout = graph.flame_layout
        assert layout is not None and graph.zoomed
        assert layout.row_cells(layout.zoom_row()) == [(0, 0, graph.size.width)]
        assert all(len(layout.row(k)) == 1 for k in range(layout.zoom_row()))
        # Its sandwich: the thread entry that calls it, among its callers.
        await pilot.press("v")
        callers = app.query_one("#sandwich-callers", FlameGraph)
        assert callers.call_tree is not None and callers.frames is not None
        names = {callers.frames[n.frame_id].function for n in callers.call_tree.nodes()}
        assert frame.function in names and "worker" in names, names
        await pilot.press("escape")  # leaves the sandwich
        assert graph.display and graph.zoomed
        await pilot.press("escape")  # zooms out
        assert not graph.zoomed and app.nav[-1].pane == "flame"
        # One thread: the graph is that thread's tree.
        chosen = await choose_thread(pilot, app, "worker-2")
        await wait_for(pilot, lambda: graph.call_tree is not None and graph.call_tree
                       is not profile.tree, what="worker-2's graph")
        assert graph.call_tree is not None
        assert graph.call_tree.root.total_cost[0] == part_total(profile, chosen.label, 0)
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"thr_spin_2", "enter")
        await wait_for(pilot, lambda: pane.share is not None and pane.pattern ==
                       "thr_spin_2", what="share in worker-2")
        assert pane.share is not None and pane.share > 0.9, pane.share

    run_app(ProfTuiApp(profile=profile), body)
