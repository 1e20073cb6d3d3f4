"""Tree search across live refreshes: each snapshot rebuilds the tree, the search finds
its matches again in the new one and keeps its place (issue 15)."""

from __future__ import annotations

import re

from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.tree import CallTreeView
from textual.pilot import Pilot

from tests.helpers.tui import ReplayCollector, run_app, status_text, wait_for


def test_search_survives_live_refreshes(cxx_profile: Profile) -> None:
    collector = ReplayCollector(cxx_profile)
    app = ProfTuiApp(collector=collector)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: collector.ticks >= 2, what="snapshots")
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: tree.root.children, what="the tree")
        await pilot.press("slash")
        for key in "square_mod|point_work":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "match 1 of" in status_text(app), what="a match")
        found = re.search(r"match 1 of (\d+)", status_text(app))
        assert found is not None
        total = int(found.group(1))  # (a refresh may already have dropped the matches)
        assert total >= 2
        built = tree.view_profile
        await wait_for(pilot, lambda: tree.view_profile is not built,
                       what="a refresh of the tree")
        await pilot.pause()
        assert tree.search.matches is None  # they pointed into the previous tree
        assert f"match 1 of {total}" in status_text(app)  # the note stays
        await pilot.press("n")
        await pilot.pause()
        assert f"match 2 of {total}" in status_text(app)
        frame = tree.selected_frame()
        assert frame is not None and frame.function in ("square_mod(long)",
                                                        "point_work(int)")
        await collector.end_and_quit(pilot, app)

    try:
        run_app(app, body, (100, 30))
    finally:
        collector.stop()
