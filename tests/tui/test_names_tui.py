"""Long C++ names in the app (issue 15): a -O2 C++ fixture with std::map, std::vector,
lambdas and overloads, recorded by the sampler and shown at 80x24: shortened names in
the flat pane and the tree, the `c` toggle, the whole name of the selected row in the
status line, and overloads that stay distinguishable."""

from __future__ import annotations

import pytest
from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.search import NameMatcher
from proftui.tui.widgets.flat_table import NAME, FlatTable
from proftui.tui.widgets.status_line import StatusLine
from textual.pilot import Pilot

from tests.helpers.tui import flat_ready, run_app, screen_text, status_text, wait_for

NARROW = (80, 24)


def test_flat_names_shortened_at_80_columns(cxx_profile: Profile) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        await pilot.pause()
        table = app.query_one(FlatTable)
        widths = table._widths(table.scrollable_content_region.width)
        assert widths[NAME] >= 29, widths  # the numbers and the module give way
        lines = screen_text(app).splitlines()
        rows = [line for line in lines[3:-3] if line.strip()]
        assert not any("std::allocator<" in row for row in rows), "\n".join(lines)
        # A long libstdc++ name keeps its method: std::_Rb_tree<…>::_M_...(...)
        long_row = next(i for i, e in enumerate(flat.shown)
                        if e.frame.function.startswith("std::_Rb_tree<"))
        full = flat.shown[long_row].frame.function
        label = table.label(flat.shown[long_row])
        assert table.name_mode == "templates", (table.name_mode, len(table.labels))
        method = full.split(">::")[-1].split("(")[0].split("<")[0]
        assert label.startswith("std::_Rb_tree<…>::") and method in label, label
        table.move_cursor(long_row)
        await pilot.pause()
        shown = screen_text(app)
        cursor_line = shown.splitlines()[3 + long_row - table.scroll_offset.y]
        # cut, but not the method (cut as fit() does unless another row's label would
        # then read the same: tui.names.Fitter)
        cell = table.fitter.get(label, widths[NAME] - 1)
        assert cell in cursor_line and "…" in cell, shown
        # The status line: the whole name (middle cut at 80 columns), and the module.
        status = status_text(app)
        assert status.strip().startswith(full[:20]), status
        assert full.rstrip()[-12:] in status and "names_cxx" in status, status
        assert app.query_one(StatusLine).frame == flat.shown[long_row].frame
        # The two Grid::fill overloads never show as identical rows.
        fills = [e for e in flat.shown if "::fill(" in e.frame.function]
        assert len(fills) == 2, [e.frame.function for e in flat.shown]
        await pilot.press("c")  # templates -> templates and parameters
        await pilot.pause()
        assert table.name_mode == "params"
        labels = {table.label(e) for e in fills}
        assert len(labels) == 2, labels
        assert all("std::map<…>" in x or "std::vector<…>" in x for x in labels), labels
        # No two different functions share a label in the view.
        assert len({table.label(e) for e in flat.shown}) == len(
            {e.frame.function for e in flat.shown})
        assert any(table.label(e).endswith("(…)") for e in flat.shown)
        await pilot.press("c")  # -> full names, as c++filt prints them
        await pilot.pause()
        assert table.name_mode == "full"
        assert table.label(flat.shown[long_row]) == full
        assert "std::" in screen_text(app) and "<…>" not in screen_text(app).splitlines()[
            5]

    run_app(app, body, NARROW)


def test_status_line_shows_the_whole_name_when_it_fits(cxx_profile: Profile) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        row = next(i for i, e in enumerate(flat.shown)
                   if "{lambda(int)#1}" in e.frame.function)
        full = flat.shown[row].frame.function
        app.query_one(FlatTable).move_cursor(row)
        await pilot.pause()
        assert full in status_text(app)
        assert "{lambda(int)#1}::operator()" in screen_text(app)
        await pilot.press("3")  # the source pane: short title and trail, whole name below
        await wait_for(pilot, lambda: "source: main::{lambda(…)#1}::operator()(…) const"
                       in screen_text(app), what="the source pane")
        assert full in status_text(app)

    run_app(app, body, (200, 30))


def test_tree_pane_on_long_cxx_names(cxx_profile: Profile) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.query_one(FlatPane).shown, what="the profile")
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: tree.root.children, what="the tree")
        # Search for a function deep in the tree: its ancestors expand.
        await pilot.press("slash")
        await pilot.pause()
        for key in "square_mod|point_work":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause()
        frame = tree.selected_frame()
        assert frame is not None and frame.function in ("square_mod(long)",
                                                        "point_work(int)")
        total = len(tree.search.matches or [])
        assert total >= 2, total
        assert f"match 1 of {total}" in status_text(app)
        assert frame.function.split("(")[0] in screen_text(app)  # its row is shown
        await pilot.press("n")
        await pilot.pause()
        assert f"match 2 of {total}" in status_text(app)
        second = tree.cursor_node
        await pilot.press("N")
        await pilot.press("N")
        await pilot.pause()
        assert f"match {total} of {total}" in status_text(app)  # wraps around
        await pilot.press("n")
        await pilot.press("n")
        await pilot.pause()
        assert tree.cursor_node is second
        # Every match is a row whose function matches (regex, across the whole tree).
        for _top, path in tree.search.matches or []:
            name = tree.view_profile.frames[path[-1].frame_id].function
            assert name.startswith(("square_mod", "point_work")), name
        # % of parent: the selected row's share of its caller.
        node = tree.cursor_node
        parent = node.parent.data.call
        call = node.data.call
        m = tree.metric
        of_total = 100 * call.total_cost[m] / node.data.whole
        of_parent = 100 * call.total_cost[m] / parent.total_cost[m]
        assert str(node.label).lstrip().startswith(f"{of_total:.1f}%")
        assert "% of total" in status_text(app)
        await pilot.press("percent_sign")
        await pilot.pause()
        assert str(tree.cursor_node.label).lstrip().startswith(f"{of_parent:.1f}%")
        assert "% of parent" in status_text(app)
        await pilot.press("percent_sign")
        await pilot.pause()
        assert str(tree.cursor_node.label).lstrip().startswith(f"{of_total:.1f}%")
        # A search with no match says so.
        await pilot.press("slash")
        await pilot.press("ctrl+u")
        for key in "zzqq":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause()
        assert "no match" in status_text(app)

    run_app(app, body, NARROW)


def test_flat_filter_is_a_regex(cxx_profile: Profile) -> None:
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        await pilot.press("slash")
        for key in "::fill\\(std::(map|vector)":
            await pilot.press(key)
        await pilot.pause()
        assert sorted(e.frame.function.split("::fill(")[1][:8] for e in flat.shown) == [
            "std::map", "std::vec"]
        await pilot.press("ctrl+u")
        for key in "SQUARE_MOD":  # a capital letter: case-sensitive
            await pilot.press(key)
        await pilot.pause()
        assert flat.shown == []
        await pilot.press("ctrl+u")
        for key in "square_mod|point_work":
            await pilot.press(key)
        await pilot.pause()
        assert {e.frame.function for e in flat.shown} >= {"square_mod(long)",
                                                          "point_work(int)"}
        await pilot.press("ctrl+u")
        for key in "operator()(":  # invalid regex: a substring, and the status says so
            await pilot.press(key)
        await pilot.pause()
        assert flat.shown and all("operator()(" in e.frame.function for e in flat.shown)
        assert "invalid regex" in screen_text(app)
        await pilot.press("enter")
        await pilot.press("q")

    run_app(app, body, NARROW)


def test_each_keystroke_filters_as_a_fresh_filter_would(cxx_profile: Profile) -> None:
    """A keystroke that lengthens a plain pattern looks at the last matches only; what it
    shows must be what filtering every function afresh shows, in the same order, also
    after Backspace, a capital (case-sensitive) and regex syntax."""
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        every = list(flat.shown)
        await pilot.press("slash")
        typed, sizes = "", []
        for key in ["s", "q", "u", "backspace", "u", "a", "R", "backspace", "backspace",
                    "ctrl+u", "p", "o", "|", "s", "q", "ctrl+u", *"operator("]:
            await pilot.press(key)
            typed = ("" if key == "ctrl+u" else typed[:-1] if key == "backspace"
                     else typed + key)
            await pilot.pause()
            assert flat.filter_text == typed
            matcher = NameMatcher(typed)
            want = [e for e in every if matcher.matches(e.frame.function)] if typed else every
            assert flat.shown == want, typed
            sizes.append(len(want))
        # Not vacuous: the patterns narrowed, widened and emptied the list.
        assert sizes[0] > sizes[2] > 0 and 0 in sizes and sizes[-1] > 0, sizes
        assert len(set(sizes)) >= 4, sizes
        await pilot.press("enter")
        await pilot.press("q")

    run_app(app, body, NARROW)


def test_clearing_the_filter_refreshes_the_rows_once(cxx_profile: Profile,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Esc on a filtered table shows every row again with one refresh (each costs a pass
    over every function: two made the key twice as slow on 50,000 functions)."""
    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        every = list(flat.shown)
        await pilot.press("slash", *"sq", "enter")
        await pilot.pause()
        assert 0 < len(flat.shown) < len(every)
        refreshes: list[str] = []
        real = flat.refresh_rows
        monkeypatch.setattr(flat, "refresh_rows", lambda: (refreshes.append(flat.filter_text),
                                                            real())[1])
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert flat.filter_text == "" and flat.shown == every
        assert refreshes == [""]
        await pilot.press("q")

    run_app(app, body, NARROW)


@pytest.mark.parametrize("mode", ["full", "templates"])
def test_sorting_and_filtering_look_for_new_names_once(cxx_profile: Profile, mode: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A sort or a filter shows functions the table has labelled and fitted already: it
    does not read every row's name again (a pass over 50,000 functions per key)."""
    from proftui.tui.widgets import flat_table

    app = ProfTuiApp(profile=cxx_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        table = flat.query_one(FlatTable)
        table.set_name_mode(mode)
        await pilot.pause()
        first = list(flat.shown)

        def cells() -> list[str]:
            room = table._name_room(table._widths(table.scrollable_content_region.width))
            return [table.fitter.get(table.label(e), room) for e in flat.shown]

        real = flat_table.function_of
        read: list[str] = []
        monkeypatch.setattr(flat_table, "function_of", lambda e: read.append(real(e)) or real(e))
        await pilot.press("s")
        await pilot.pause()
        assert flat.shown != first and len(flat.shown) == len(first)  # sorted another way
        assert read == []
        sorted_cells = cells()
        await pilot.press("slash", *"sq", "enter")
        await pilot.pause()
        matching = {e.frame.function for e in flat.shown}
        assert 0 < len(matching) < len(first)
        assert set(read) <= matching  # at most the rows shown, if their width is new
        read.clear()
        await pilot.press("escape")
        await pilot.pause()
        assert flat.filter_text == "" and len(flat.shown) == len(first)
        assert read == []
        assert cells() == sorted_cells  # every row cut as before the filter
        await pilot.press("q")

    run_app(app, body, NARROW)
