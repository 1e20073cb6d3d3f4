"""What the panes say about the numbers they show (issue 27), on the demo program as a
user runs it (`proftui demo`): the focus view's percentages are what its label says, and
`%` changes them; the source pane says it is loading rather than "select a function"."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.tui import demo
from proftui.tui.app import ProfTuiApp
from proftui.tui.format import percent
from proftui.tui.panes import source
from proftui.tui.panes.source import SourceView
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.widgets.flat_table import NAME, FlatTable
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.collect import sampled
from tests.helpers.tui import flat_ready, run, run_app, screen_text, wait_for

SIZE = (150, 45)


@pytest.fixture(scope="module")
def demo_profile() -> Profile:
    """tui/demo/demo.c, built as `proftui demo` builds it, sampled to its exit."""
    profile = sampled([str(demo.build_demo("sampler")), "150"])
    assert profile.total(0) > 300, "too few samples to test with"
    return profile


async def focus_on(pilot: Pilot, app: ProfTuiApp, name: str) -> CallTreeView:
    """Enter on `name` in the flat profile: the tree focused on it, derived."""
    await flat_ready(pilot, app)
    table = app.query_one(FlatTable)
    table.move_cursor(next(i for i, e in enumerate(table.rows) if e.frame.function == name))
    await pilot.press("enter")
    tree = app.query_one(CallTreeView)
    await wait_for(pilot, lambda: tree.view == "focus" and not tree.pending
                   and bool(tree.root.children), what=f"the tree focused on {name}")
    return tree


def caller_rows(tree: CallTreeView) -> Iterator[tuple[str, float, float, str]]:
    """(name, the row's total, its callee's total, the row's text) of the callers shown
    under the focused function."""
    section = next(n for n in tree.root.children if n.data and n.data.key == "callers")
    for focused in section.children:
        for row in focused.children:
            if row.data is not None and row.data.call is not None and focused.data is not None:
                name = tree.view_profile.frames[row.data.call.frame_id].function
                yield (name, row.data.call.total_cost[0], focused.data.call.total_cost[0],
                       row.label.plain)


def test_focus_percentages_are_what_the_label_says(demo_profile: Profile) -> None:
    """Enter on spin: "% of total" rows are shares of the whole profile (render showed its
    share of spin); `%` turns them into shares of the row above, and says so."""
    app = ProfTuiApp(profile=demo_profile)
    whole = demo_profile.total(0)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        tree = await focus_on(pilot, app, "spin")
        assert tree.status_note == "samples · % of total"
        assert "% of total" in screen_text(app).splitlines()[-2]
        rows = list(caller_rows(tree))
        assert {r[0] for r in rows} >= {"render", "physics", "audio"}, rows
        for name, total, callee, text in rows:
            assert text.lstrip().startswith(f"{percent(total, whole):.1f}%"), (name, text)
            assert percent(total, whole) < percent(total, callee)  # they differ
        head = next(n for n in tree.root.children if n.data and n.data.key == "callees")
        spin = sum(e.total_cost[0] for e in app.query_one(FlatTable).rows
                   if e.frame.function == "spin")
        assert f"({percent(spin, whole):.1f}% of total)" in head.label.plain
        await pilot.press("percent_sign")
        await pilot.pause()
        assert "% of parent" in screen_text(app).splitlines()[-2]
        for name, total, callee, text in caller_rows(tree):
            assert text.lstrip().startswith(f"{percent(total, callee):.1f}%"), (name, text)

    run_app(app, body, SIZE)


def test_the_source_pane_says_it_is_loading(demo_profile: Profile,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Enter on a function's tree row while its listing takes long (a big binary's DWARF
    and objdump): the pane says it is loading that function, never "Select a function"."""
    gate = threading.Event()
    real = source.annotate

    def slow_annotate(*args: object, **kwargs: object) -> object:
        gate.wait(20)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(source, "annotate", slow_annotate)
    app = ProfTuiApp(profile=demo_profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        tree = await focus_on(pilot, app, "spin")
        assert tree.selected_frame() is not None
        await pilot.press("enter")
        await wait_for(pilot, lambda: "source: spin" in screen_text(app), what="source")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "Select a function" not in text and "loading its source" in text, text
        gate.set()
        await wait_for(pilot, lambda: "the hot line" in screen_text(app),
                       what="the listing")
        assert "loading" not in screen_text(app)
        await pilot.press("d")  # disassembly: loading again, then the instructions
        await wait_for(pilot, lambda: "disassembly:" in screen_text(app),
                       what="the disassembly")

    run_app(app, body, SIZE)


def test_two_functions_never_share_a_label_at_80_columns() -> None:
    """libstdc++ at 80 columns: std::map<…>::lower_bound and std::_Rb_tree<…>::lower_bound
    both read `std::…::lower_bound(long const&)`; std::__unguarded_partition lost its
    namespace with no mark.  Every row, scrolled through as a user would, is distinct."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    binary = build_fixture("names_stl.cpp", ["-O1", "-fno-inline", "-g",
                                             "-fno-omit-frame-pointer"], compiler="g++")
    profile = sampled([str(binary), "12"])
    functions = {f.function for f in profile.frames}
    assert {"lower_bound(long const&)" in f and f.startswith(s) for f in functions
            for s in ("std::map<", "std::_Rb_tree<")} >= {True}
    app = ProfTuiApp(profile=profile)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        table = app.query_one(FlatTable)
        widths = table._widths(table.scrollable_content_region.width)
        start = sum(widths[:NAME])
        cells: dict[int, str] = {}
        for _ in range(len(table.rows) // 4 + 3):  # down through it all, and read the end
            top = table.scroll_offset.y
            lines = screen_text(app).splitlines()[3:3 + table._page]
            for i, line in enumerate(lines):
                if top + i < len(table.rows):  # the name column, as drawn
                    cells[top + i] = line[start - 1:start + widths[NAME] - 1].strip()
            await pilot.press(*["down"] * 4)
            await pilot.pause()
        assert len(cells) == len(table.rows)
        names = {i: table.rows[i].frame.function for i in cells}
        shown = list(cells.values())
        shared = {i: (names[i], c) for i, c in cells.items() if shown.count(c) > 1}
        assert len({names[i] for i in shared}) <= 1, shared  # one function, one label
        assert sum("::lower_bound(" in n for n in names.values()) >= 2, names
        partition = next(c for i, c in cells.items() if "__unguarded_partition<" in names[i])
        assert partition.startswith(("std::", "…")), partition

    run_app(app, body, (80, 24))


STL_TREE = "/usr/include/c++/12/bits/stl_tree.h"


def test_system_header_source_is_shown(tmp_path: Path) -> None:
    """A C++ template's cost in a system header every user may read: `f` to
    /usr/include/c++/12/bits/stl_tree.h shows its text, not bare line numbers, live and
    in a saved profile, which embeds it."""
    if shutil.which("g++") is None or not Path(STL_TREE).is_file():
        pytest.skip(f"g++ with {STL_TREE} is not installed")
    binary = build_fixture("names_stl.cpp", ["-O2", "-g", "-fno-omit-frame-pointer"],
                           compiler="g++")
    profile = sampled([str(binary), "12"])
    assert any(path == STL_TREE for path, _line in profile.line_costs), "no cost in the header"
    saved = tmp_path / "stl.proftui"
    text = Path(STL_TREE).read_text()
    for step in ("live", "saved"):
        if step == "saved":  # as `proftui open` reads it: the header's text is embedded
            storage.save(profile, saved)
            profile = storage.load(saved)
            assert STL_TREE in profile.sources
        app = ProfTuiApp(profile=profile)

        async def body(app: ProfTuiApp = app) -> None:
            async with app.run_test(size=SIZE) as pilot:
                await focus_on(pilot, app, "main")
                await pilot.press("3")
                await wait_for(pilot, lambda: "source: " in screen_text(app)
                               and "loading" not in screen_text(app), what="main's source")
                for _ in range(8):  # the files of main's cost, costliest first
                    if "stl_tree.h" in screen_text(app).splitlines()[2]:
                        break
                    await pilot.press("f")
                    await wait_for(pilot, lambda: "loading" not in screen_text(app),
                                   what="the next file")
                screen = screen_text(app)
                assert "stl_tree.h" in screen.splitlines()[2], screen
                assert "not available" not in screen, screen
                view = app.query_one(SourceView)
                row = view.listing.lines[view.cursor]  # the hottest line, as shown
                assert row.number is not None and row.text.strip()
                assert row.text == text.splitlines()[row.number - 1]
                assert row.text.strip() in screen
        run(body)
