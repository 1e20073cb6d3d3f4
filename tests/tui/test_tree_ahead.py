"""A saved profile's bottom-up and threads-as-roots trees are derived ahead, once the
first screen is drawn (issue 33): `u` and `T` then show them without a derivation."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from proftui.collectors.model import views
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.tree import CallTreeView
from textual.pilot import Pilot

from tests.helpers.profiles import sample_profile, two_processes
from tests.helpers.tui import flat_ready, run_app, wait_for


def rows(tree: CallTreeView) -> list[tuple[str, float]]:
    """(function, total) of the view's top rows."""
    assert tree.view_profile is not None
    return [(tree.view_profile.frames[n.data.call.frame_id].function,
             n.data.call.total_cost[0])
            for n in tree.root.children if n.data is not None and n.data.call is not None]


def test_u_and_T_show_the_trees_derived_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {"bottom_up_tree": 0, "threads_as_roots": 0}

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            if name != "threads_as_roots" or not kwargs.get("inverted"):
                calls[name] += 1
            return real(*args, **kwargs)
        return spy

    # Wherever the tree pane calls them from (its deriving module imports them by name).
    for module_name in ("proftui.tui.panes.tree", "proftui.tui.panes.tree_derive"):
        if importlib.util.find_spec(module_name) is None:
            continue
        for name in calls:
            monkeypatch.setattr(f"{module_name}.{name}", counted(name, getattr(views, name)),
                                raising=False)
    profile = two_processes()
    want_bottom_up = rows_of(views.bottom_up_tree(profile), profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        # Nothing pressed yet: both are derived while the first screen is read.
        await wait_for(pilot, lambda: calls["bottom_up_tree"] and calls["threads_as_roots"],
                       what="the trees derived ahead")
        tree = app.query_one(CallTreeView)
        await pilot.press("2", "u")
        await wait_for(pilot, lambda: not tree.pending and rows(tree) == want_bottom_up,
                       what="the bottom-up tree")
        await pilot.press("u", "T")
        await wait_for(pilot, lambda: not tree.pending and len(rows(tree)) == 2,
                       what="threads as roots")
        assert [name for name, _ in rows(tree)] == ["process 20 child", "process 10 prog"]
        assert calls == {"bottom_up_tree": 1, "threads_as_roots": 1}  # none derived again

    run_app(ProfTuiApp(profile=profile), body)


def rows_of(tree: Any, profile: Any) -> list[tuple[str, float]]:
    ordered = sorted(tree.root.children.values(), key=lambda c: -c.total_cost[0])
    return [(profile.frames[c.frame_id].function, c.total_cost[0]) for c in ordered]


def test_the_selected_functions_focus_view_is_derived_while_the_user_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A flat row at rest has its focus view derived ahead: Enter shows it with no
    derivation of its own, equal to one derived when asked; rows passed over quickly
    are not derived."""
    import proftui.tui.panes.tree as tree_module
    from proftui.tui.panes.tree_derive import derive as real_derive
    from proftui.tui.widgets.flat_table import FlatTable

    derived: list[str] = []

    def spy(profile: Any, need: Any, baseline: Any) -> Any:
        if need[0] == "focus":
            derived.append(need[1].function)
        return real_derive(profile, need, baseline)

    monkeypatch.setattr(tree_module, "derive", spy)
    profile = sample_profile()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        table = app.query_one(FlatTable)
        tree = app.query_one(CallTreeView)
        for row in range(3):  # passed over: each replaces the last before it is at rest
            table.move_cursor(row=row)
        await pilot.pause()
        frame = app.query_one(FlatPane).selected_frame()
        assert frame is not None
        await wait_for(pilot, lambda: ("focus", frame, None, False) in tree._derived,
                       what="the focus view derived ahead")
        assert derived == [frame.function]
        await pilot.press("enter")
        await wait_for(pilot, lambda: tree.view == "focus" and not tree.pending,
                       what="the focus view")
        assert derived == [frame.function]  # Enter derived nothing more
        shown = [str(n.label) for n in tree.root.children]
        assert shown[0].startswith(f"{frame.function} and what it calls")
        # Moving on while a view is awaited never drops that view.
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.nav[-1].pane == "flat", what="back to flat")
        table.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: tree.view == "focus" and not tree.pending and
                       tree.focus_frame == app.query_one(FlatPane).selected_frame(),
                       what="the next focus view")

    run_app(ProfTuiApp(profile=profile), body)
