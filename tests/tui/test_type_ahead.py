"""Keys typed in one burst after `/` ("/lua⏎" as a fast typist sends it) reach the prompt
that `/` opens: the flat filter box, the call tree's and the flame graph's search. Before
tui/type_ahead.py the app gave them to the pane behind the prompt: lost, or run as that
pane's own keys (the tree's `u`, `f`, `n`)."""

from __future__ import annotations

import pytest
from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flame import FlamePane
from proftui.tui.panes.tree import CallTreeView
from textual import events
from textual.pilot import Pilot

from tests.helpers.tui import flat_ready, run_app, wait_for


def burst(app: ProfTuiApp, text: str, *then: str) -> None:
    """`text` and the keys `then`, queued at once as one terminal read delivers them."""
    for ch in text:
        app.post_message(events.Key("slash" if ch == "/" else ch, ch))
    for key in then:
        app.post_message(events.Key(key, None))


@pytest.mark.parametrize("pane", ["flat filter", "flame search"])
def test_a_pattern_typed_right_after_slash_is_the_pattern(cxx_profile: Profile,
                                                          pane: str) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        every = len(flat.shown)
        flame = app.query_one(FlamePane)
        if pane == "flame search":
            await pilot.press("5")
            await wait_for(pilot, lambda: flame.display, what="the flame graph")
            await pilot.pause()
        burst(app, "/squ", "enter")
        typed = (lambda: flat.filter_text) if pane == "flat filter" else (lambda: flame.pattern)
        await wait_for(pilot, lambda: typed() == "squ", what=f"the {pane} 'squ'")
        if pane == "flat filter":
            assert 0 < len(flat.shown) < every
            assert all("squ" in e.frame.function.lower() for e in flat.shown)
        await pilot.press("q")

    run_app(app, body)


def test_a_tree_search_typed_right_after_slash_runs_no_tree_keys(cxx_profile: Profile) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: tree.has_focus and tree.view == "top-down",
                       what="the call tree")
        burst(app, "/unf", "enter")  # u: bottom-up, f: focus, n: next match, if lost
        await wait_for(pilot, lambda: tree.search.pattern == "unf", what="the search 'unf'")
        await pilot.pause()
        assert tree.view == "top-down"
        await pilot.press("q")

    run_app(app, body)
