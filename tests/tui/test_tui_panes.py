"""Pilot tests of every pane and the drill-down path, on a real attach-mode profile of
tests/fixtures/att_spin.c (two spinning threads: att_hot under main -> att_outer ->
att_middle, att_cold under att_thread_main)."""

from __future__ import annotations

from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FilterInput, FlatPane
from proftui.tui.panes.process import ProcPane
from proftui.tui.panes.source import SourcePane, SourceView
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.widgets.flat_table import FlatTable
from textual.pilot import Pilot
from textual.widgets import Input

from tests.helpers.collect import attach_profile
from tests.helpers.tui import SIZE, flat_ready, run, run_app, screen_text, wait_for


@pytest.fixture(scope="module")
def profile() -> Profile:
    return attach_profile()


def names(pane: FlatPane) -> list[str]:
    return [e.frame.function for e in pane.shown]


def test_flat_pane_keys(profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        # Both spinning leaves take about half the samples each; nothing else has self.
        assert set(names(flat)[:2]) == {"att_hot", "att_cold"}
        top = flat.shown[0]
        assert top.self_cost[0] >= flat.shown[1].self_cost[0]
        text = screen_text(app)
        assert "Self%" in text and "att_hot" in text and "1 Flat" in text
        await pilot.press("s")  # sort by total: the outermost callers come first
        assert flat.sort_key == "total"
        totals = [e.total_cost[0] for e in flat.shown]
        assert totals == sorted(totals, reverse=True)
        # An outermost frame of one of the two threads holds about half of everything.
        assert flat.shown[0].total_cost[0] >= 0.4 * profile.total(0)
        await pilot.press("s")  # name: attach records no call counts, so no calls sort
        assert flat.sort_key == "name"
        assert names(flat) == sorted(names(flat))
        await pilot.press("S")  # reverse
        assert names(flat) == sorted(names(flat), reverse=True)
        await pilot.press("slash")
        await pilot.press(*"att_mid")
        await pilot.pause()
        assert names(flat) == ["att_middle"]
        assert "matching 'att_mid'" in screen_text(app)
        await pilot.press("escape")  # closes the filter box, keeps the filter
        assert app.focused is app.query_one(FlatTable)
        assert len(app.nav) == 1 and names(flat) == ["att_middle"]
        await pilot.press("escape")  # on the table: clears the applied filter
        await pilot.pause()
        assert flat.filter_text == "" and len(names(flat)) > 1
        assert "matching" not in screen_text(app)
        assert not app.query_one(FilterInput).display

    run_app(ProfTuiApp(profile=profile), body)


def test_tree_pane_keys(profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        assert app.focused is tree and tree.view == "top-down"
        await pilot.press("h")
        await pilot.pause()
        leaf = tree.selected_frame()
        assert leaf is not None and leaf.function in ("att_hot", "att_cold")
        chain = []
        node = tree.cursor_node
        while node is not None and node.data is not None and node is not tree.root:
            chain.append(node.data.key.function)
            node = node.parent
        chain.reverse()
        # att_middle's 4th call to att_hot is a tail call (jmp at -O2): att_outer ->
        # att_hot is a true path too, and the hotter one when the sampling period
        # aliases with the loop (seen on a loaded machine).
        expected = ([["main", "att_outer", "att_middle", "att_hot"],
                     ["main", "att_outer", "att_hot"]]
                    if leaf.function == "att_hot" else [["att_thread_main", "att_cold"]])
        assert any(chain[-len(e):] == e for e in expected), chain
        assert leaf.function in screen_text(app)
        await pilot.press("u")  # bottom-up: the leaves with self cost are the roots
        await wait_for(pilot, lambda: not tree.pending, what="bottom-up tree")
        assert tree.view == "bottom-up"
        roots = [n.data.key.function for n in tree.root.children]  # costliest first
        assert set(roots[:2]) == {"att_hot", "att_cold"}, roots
        await pilot.press("escape")
        assert tree.view == "top-down"

    run_app(ProfTuiApp(profile=profile), body)


def test_drill_down_trail(profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        row = names(flat).index("att_hot")
        table = app.query_one(FlatTable)
        table.move_cursor(row=row)
        await pilot.press("enter")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending, what="focused tree")
        assert app.nav[-1].pane == "tree" and tree.view == "focus"
        assert tree.selected_frame() is not None
        assert tree.selected_frame().function == "att_hot"
        text = screen_text(app)
        assert "who calls att_hot" in text and "tree: att_hot" in text
        # Callers, nearest first, the costliest first: att_middle and att_outer (its
        # tail call from att_middle; either can hold more, see test_tree_pane_keys).
        callers = next(n for n in tree.root.children if n.data.key == "callers")
        hot = callers.children[0]
        nearest = [(c.data.key.function, c.data.call.total_cost[0]) for c in hot.children]
        assert nearest and {name for name, _ in nearest} <= {"att_middle", "att_outer"}, nearest
        assert nearest[0][1] == max(cost for _, cost in nearest), nearest
        await pilot.press("enter")
        source = app.query_one(SourcePane)
        await wait_for(pilot, lambda: source.listing is not None, what="source listing")
        listing = source.listing
        assert listing is not None and listing.kind == "source"
        view = app.query_one(SourceView)
        hottest = listing.lines[view.cursor]
        assert "sink += i * 2654435761u" in hottest.text  # att_hot's loop line
        assert hottest.cost is not None and hottest.cost[0] > 0
        text = screen_text(app)
        assert "source: att_hot" in text and "att_spin.c" in text
        await pilot.press("escape")
        assert app.nav[-1].pane == "tree" and app.focused is tree
        await pilot.press("escape")
        assert app.nav[-1].pane == "flat" and len(app.nav) == 1
        assert "Flat profile" in screen_text(app)

    run_app(ProfTuiApp(profile=profile), body)


def test_source_pane_keys(profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        app.query_one(FlatTable).move_cursor(row=names(flat).index("att_hot"))
        await pilot.press("3")  # the source of the function under the cursor
        source = app.query_one(SourcePane)
        await wait_for(pilot, lambda: source.listing is not None, what="source")
        view = app.query_one(SourceView)
        await pilot.press("home")
        assert view.cursor == 0
        await pilot.press("tab")  # next line with cost (n/N: search matches, issue 15)
        assert source.listing is not None
        assert source.listing.lines[view.cursor].cost is not None
        await pilot.press("g")
        assert view.cursor == source.listing.hottest()
        await pilot.press("d")
        await wait_for(pilot, lambda: source.listing is not None
                       and source.listing.kind == "disassembly", what="disassembly")
        listing = source.listing
        costed = [ln for ln in listing.lines if ln.cost]
        assert costed, "no instruction carries a sample"
        assert sum(ln.cost[0] for ln in costed) == pytest.approx(listing.function_cost[0])
        assert listing.lines[0].number == source.frame.address  # starts at the symbol
        assert "disassembly" in screen_text(app)

    run_app(ProfTuiApp(profile=profile), body)


def test_proc_pane_for_saved_profile(profile: Profile, tmp_path: Path) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        assert app.query_one(ProcPane).display
        assert "no live process" in screen_text(app)
        await pilot.press("p", "r")  # live-only keys do nothing here
        assert not app.paused

    run_app(ProfTuiApp(profile=profile), body)


def test_export_dialog_writes_folded_stacks(profile: Profile, tmp_path: Path) -> None:
    async def body() -> None:
        app = ProfTuiApp(profile=profile)
        out = tmp_path / "out.folded"
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("e")
            await pilot.pause()
            assert "Export the profile shown" in screen_text(app)
            await pilot.press("down", "down", "space")  # proftui (the default) -> pprof -> folded
            box = app.screen.query_one("#export-path", Input)
            assert box.value.endswith(".folded")
            box.value = str(out)
            box.focus()
            await pilot.press("enter")
            await wait_for(pilot, out.exists, what="export file")
        folded = out.read_text()
        assert any(line.split(" ")[0].endswith("att_outer;att_middle;att_hot")
                   for line in folded.splitlines()), folded
    run(body)


def test_every_action_is_in_the_palette(profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for key in ("(1)", "(2)", "(3)", "(4)", "(Escape)", "(m)", "(e)", "(/)", "(s)",
                    "(h)", "(b)", "(g)", "(d)"):
            assert any(key in t for t in titles), (key, titles)
        footer = screen_text(app).rstrip("\n").splitlines()[-1]
        for word in ("Filter", "Sort", "Flat", "Tree", "Export", "Quit"):
            assert word in footer, footer

    run_app(ProfTuiApp(profile=profile), body)


def test_listing_falls_back_to_addresses_without_binary(profile: Profile) -> None:
    """Source gone and binary gone (deleted after the run): the costed addresses remain."""
    from dataclasses import replace

    from proftui.collectors.annotate import annotate

    hot = next(f for f in profile.frames if f.function == "att_hot")
    listing = annotate(profile, hot)
    assert listing.kind == "source"
    gone = replace(hot, module="/nonexistent/att_spin", file=None)
    moved = Profile(profile.meta, profile.metrics, address_costs={
        (gone.module, addr): cost for (module, addr), cost in profile.address_costs.items()
        if module == hot.module})
    moved.frames.intern(gone)
    listing = annotate(moved, gone)
    assert listing.kind == "addresses" and listing.lines
    assert all(line.number is not None and line.number >= hot.address for line in listing.lines)
    hottest = listing.lines[listing.hottest()]
    assert hottest.cost is not None and hottest.cost[0] > 0
