"""The flame graph pane (5): navigate, zoom, search share, live update, icicle, sandwich,
differential colours, mouse; on hand-built profiles whose truth is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from proftui.collectors.model.diff import align
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta
from proftui.collectors.model.views import flat_profile
from proftui.tui.app import ProfTuiApp, Snapshot
from proftui.tui.panes.flame import FlamePane
from proftui.tui.widgets.flame_graph import FlameGraph
from proftui.tui.widgets.search_prompt import SearchPrompt
from proftui.tui.widgets.status_line import StatusLine
from textual.pilot import Pilot

from tests.helpers.tui import run, run_app, screen_text, wait_for

SIZE = (120, 30)
# Stacks (outermost first) and their self samples: the truth the tests compare with.
STACKS: list[tuple[tuple[str, ...], int]] = [
    (("main", "a", "leaf"), 60), (("main", "b", "leaf"), 30), (("main",), 10),
    (("main", "rec", "rec", "rec"), 5),
]


def build(stacks: list[tuple[tuple[str, ...], int]], order: tuple[str, ...] = ()) -> Profile:
    """A profile of `stacks`; `order` interns those frames first (other frame ids)."""
    profile = Profile(ProfileMeta(mode="sampler", argv=["prog"], pids=[1]), (SAMPLES,))
    for name in order:
        profile.frames.intern(Frame(name, module="/bin/prog"))
    for stack, cost in stacks:
        ids = [profile.frames.intern(Frame(n, module="/bin/prog" if n != "memcpy" else
                                           "/lib/libc.so.6")) for n in stack]
        profile.tree.add_stack(ids, [cost])
    return profile.finalize()


def truth_share(stacks: list[tuple[tuple[str, ...], int]], names: set[str]) -> float:
    """Share of the samples whose stack holds a matching function (each sample once)."""
    whole = sum(c for _s, c in stacks)
    return sum(c for s, c in stacks if names & set(s)) / whole


@pytest.fixture(autouse=True)
def private_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test reads and writes its own settings file (icicle is remembered)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return tmp_path / "proftui" / "settings.json"


async def open_flame(pilot: Pilot, app: ProfTuiApp) -> FlameGraph:
    await wait_for(pilot, lambda: app.profile is not None, what="profile")
    await pilot.press("5")
    await wait_for(pilot, lambda: app.nav[-1].pane == "flame", what="flame pane")
    graph = app.query_one("#flame-graph", FlameGraph)
    await wait_for(pilot, lambda: graph.call_tree is not None, what="graph")
    return graph


def selected(graph: FlameGraph) -> str:
    frame = graph.selected_frame()
    return frame.function if frame is not None else "all"


def info(app: ProfTuiApp) -> str:
    return str(app.query_one("#flame-info").render())


def graph_lines(app: ProfTuiApp, graph: FlameGraph) -> list[str]:
    top = graph.region.y
    return screen_text(app).splitlines()[top:top + graph.region.height]


def test_flame_zoom_keys() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        assert not graph.icicle and selected(graph) == "all"
        lines = graph_lines(app, graph)
        assert lines[-1].startswith(" all") and lines[-2].startswith(" main")  # root below
        assert lines[-3].startswith(" a ")  # the costliest child leftmost
        await pilot.press("up", "up")  # towards the leaves, as drawn
        assert selected(graph) == "a"
        assert "a  total 60 (57.1%)  self 0 (0.0%)" in info(app)
        await pilot.press("right")
        assert selected(graph) == "b"
        await pilot.press("right", "right")  # rec, then nothing further right
        assert selected(graph) == "rec"
        await pilot.press("left", "down")
        assert selected(graph) == "main"
        await pilot.press("up", "right", "up")  # b's first child
        assert selected(graph) == "leaf" and graph.sel[1] == 1
        await pilot.press("down", "enter")  # zoom to b: it fills the width
        assert graph.zoomed and [f.function for f in graph.zoom_path] == ["main", "b"]
        lines = graph_lines(app, graph)
        assert lines[-3].startswith(" b ") and lines[-4].startswith(" leaf ")
        layout = graph.flame_layout
        assert layout is not None and layout.row_cells(3) == [(0, 0, SIZE[0])]
        assert "zoom: main › b" in info(app)
        assert app.query_one(StatusLine).frame == Frame("b", module="/bin/prog")
        await pilot.press("up", "enter")  # zoom further, to leaf under b
        assert [f.function for f in graph.zoom_path] == ["main", "b", "leaf"]
        await pilot.press("escape")  # one step out along the breadcrumb
        assert [f.function for f in graph.zoom_path] == ["main", "b"]
        await pilot.press("escape")
        assert not graph.zoomed and app.nav[-1].pane == "flame"
        await pilot.press("escape")  # not zoomed: back, as Esc does everywhere
        assert app.nav[-1].pane == "flat"

    run_app(ProfTuiApp(profile=build(STACKS)), body, SIZE)


def test_flame_search_counts_each_path_once() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        pane = app.query_one(FlamePane)
        for pattern, names in (("rec", {"rec"}), ("leaf|rec", {"leaf", "rec"}),
                               ("^(a|leaf)$", {"a", "leaf"})):
            await pilot.press("slash")
            await wait_for(pilot, lambda: app.query_one(SearchPrompt).has_focus,
                           what="prompt")
            await pilot.press("ctrl+a", "ctrl+k", *pattern, "enter")
            await wait_for(pilot, lambda: app.focused is graph, what="prompt closed")
            want = 100 * truth_share(STACKS, names)
            await wait_for(pilot, lambda p=pattern, w=want: f"/{p}: {w:.1f}% in matching "
                           "frames" in info(app), what=f"share of {pattern}")
        # a (60) holds its leaf: counted once, plus the leaf under b (30)
        assert pane.search_share() == pytest.approx(90 / 105)
        graph.action_to_root()
        await pilot.press("n")
        assert selected(graph) == "a"
        await pilot.press("n", "n")
        assert selected(graph) == "leaf" and graph.sel == (3, 1)  # a, leaf, leaf (b's)
        await pilot.press("N")
        assert graph.sel == (3, 0)
        # Matching frames are drawn bold and underlined, the others dimmed.
        layout = graph.flame_layout
        assert layout is not None
        assert graph._style(layout.row(2)[0], True).bold  # a
        assert not graph._style(layout.row(2)[1], True).bold  # b

    run_app(ProfTuiApp(profile=build(STACKS)), body, SIZE)


def test_live_snapshots_keep_the_zoom_and_the_selection() -> None:
    first = build(STACKS)
    grown = [(("main", "a", "leaf"), 60), (("main", "b", "leaf"), 90), (("main",), 10),
             (("main", "b", "memcpy"), 20), (("main", "rec", "rec", "rec"), 5)]
    # Interned in another order: the same frames get other ids in the second snapshot.
    second = build(grown, order=("memcpy", "leaf", "rec", "b", "a", "main"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        await pilot.press("up", "up", "right", "enter", "up")  # zoom b, select its leaf
        assert selected(graph) == "leaf" and graph.zoomed
        app.post_message(Snapshot(second, flat_profile(second), None, False))
        await wait_for(pilot, lambda: graph.frames is second.frames, what="snapshot")
        assert [f.function for f in graph.zoom_path] == ["main", "b"]
        assert selected(graph) == "leaf" and graph.sel == (3, 0)
        layout = graph.flame_layout
        assert layout is not None and layout.span == 110
        assert [(second.frames[i.node.frame_id].function, i.width)
                for i in layout.row(3) if i.node is not None] == [("leaf", 90), ("memcpy", 20)]
        assert "leaf  total 90 (48.6%)" in info(app), info(app)
        # A snapshot where the zoomed frame vanished: zoom out to what is left.
        third = build([(("main", "a", "leaf"), 10)])
        app.post_message(Snapshot(third, flat_profile(third), None, False))
        await wait_for(pilot, lambda: graph.frames is third.frames, what="snapshot 3")
        assert [f.function for f in graph.zoom_path] == ["main"]

    run_app(ProfTuiApp(profile=first), body, SIZE)


def test_icicle_toggle_is_drawn_and_remembered(private_settings: Path) -> None:
    async def body() -> None:
        app = ProfTuiApp(profile=build(STACKS))
        async with app.run_test(size=SIZE) as pilot:
            graph = await open_flame(pilot, app)
            await pilot.press("i")
            assert graph.icicle
            lines = graph_lines(app, graph)
            assert lines[0].startswith(" all") and lines[1].startswith(" main")
            await pilot.press("down", "down")  # in an icicle, down goes to the leaves
            assert selected(graph) == "a"
        assert json.loads(private_settings.read_text())["flame_icicle"] is True
        again = ProfTuiApp(profile=build(STACKS))
        async with again.run_test(size=SIZE) as pilot:
            graph = await open_flame(pilot, again)
            assert graph.icicle
    run(body)


def test_sandwich_shows_callers_above_and_callees_below() -> None:
    stacks = [*STACKS, (("main", "b", "leaf", "memcpy"), 15), (("main", "leaf"), 5)]

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        await pilot.press("up", "up", "up")  # leaf under a
        assert selected(graph) == "leaf"
        await pilot.press("v")
        pane = app.query_one(FlamePane)
        await wait_for(pilot, lambda: not pane.sandwich_pending, what="sandwich")
        callers = app.query_one("#sandwich-callers", FlameGraph)
        callees = app.query_one("#sandwich-callees", FlameGraph)
        assert app.focused is callees and not graph.display
        frames = app.profile.frames  # type: ignore[union-attr]

        def rows(g: FlameGraph) -> list[list[tuple[str, float]]]:
            layout = g.flame_layout
            assert layout is not None
            return [[(frames[i.node.frame_id].function, i.width) for i in row
                     if i.node is not None] for row in (list(layout.items()) and layout.rows)]

        # leaf's callers: a (60), b (30 + 15 through memcpy), main directly (5).
        assert rows(callers) == [[("leaf", 110)], [("a", 60), ("b", 45), ("main", 5)],
                                 [("main", 60), ("main", 45)]]
        assert rows(callees) == [[("leaf", 110)], [("memcpy", 15)]]
        lines = graph_lines(app, callers)
        assert lines[-1].startswith(" leaf") and lines[-2].startswith(" a ")  # inverted
        text = screen_text(app)
        assert "who calls leaf" in text and "leaf and what it calls" in text
        await pilot.press("escape")  # not zoomed in the sandwich: back to the flame
        assert graph.display and app.focused is graph and app.nav[-1].pane == "flame"

    run_app(ProfTuiApp(profile=build(stacks)), body, SIZE)


def test_differential_colours_against_an_aligned_baseline() -> None:
    base_stacks = [(("main", "a", "leaf"), 60), (("main", "b", "leaf"), 30), (("main",), 10)]
    new_stacks = [(("main", "a", "leaf"), 30), (("main", "b", "leaf"), 60), (("main",), 10),
                  (("main", "memcpy"), 10)]
    new = build(new_stacks)
    base = build(base_stacks, order=("leaf", "b"))
    assert align(base, new).total() == 100  # the app aligns it (open --base)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        layout = graph.flame_layout
        assert layout is not None and graph.base is not None
        by_name = {new.frames[i.node.frame_id].function: i for i in layout.row(2)
                   if i.node is not None}
        assert [*by_name] == ["b", "a", "memcpy"]  # widths from NEW: b 60, a 30

        def rgb(name: str) -> tuple[int, int, int]:
            colour = graph._style(by_name[name], True).bgcolor
            assert colour is not None
            return colour.get_truecolor()

        b, a, memcpy = rgb("b"), rgb("a"), rgb("memcpy")
        assert b[0] > b[2] and a[2] > a[0]  # b grew: red; a shrank: blue
        assert memcpy[0] > b[0] and memcpy[0] > 190  # new in NEW: full red
        await pilot.press("up", "up", "right", "right")
        assert selected(graph) == "memcpy" and "(new)" in info(app)

    run_app(ProfTuiApp(profile=new, base=base), body, SIZE)


def test_mouse_click_selects_and_click_again_zooms() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        layout = graph.flame_layout
        assert layout is not None
        _index, x0, _x1 = layout.row_cells(2)[1]  # b
        y = graph.size.height - 1 - 2  # flame: row 2 is the third line from the bottom
        await pilot.click(FlameGraph, offset=(x0 + 1, y))
        assert selected(graph) == "b" and not graph.zoomed
        await pilot.click(FlameGraph, offset=(x0 + 1, y))
        assert graph.zoomed and graph.zoom_path[-1].function == "b"

    run_app(ProfTuiApp(profile=build(STACKS)), body, SIZE)


def test_metric_change_redraws_widths_by_the_new_metric() -> None:
    """`m` (app-wide) cycles to a heap metric: widths follow it."""
    from proftui.collectors.model.profile import ALLOC_BYTES

    profile = Profile(ProfileMeta(mode="heap", argv=["prog"], pids=[1]), (SAMPLES, ALLOC_BYTES))
    ids = {n: profile.frames.intern(Frame(n, module="/bin/prog")) for n in ("main", "a", "b")}
    profile.tree.add_stack([ids["main"], ids["a"]], [90, 1_000])
    profile.tree.add_stack([ids["main"], ids["b"]], [10, 3_000])
    profile.finalize()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        layout = graph.flame_layout
        assert layout is not None
        assert [(profile.frames[i.node.frame_id].function, i.width) for i in layout.row(2)
                if i.node is not None] == [("a", 90), ("b", 10)]
        await pilot.press("m")
        await wait_for(pilot, lambda: graph.metric == 1, what="metric")
        layout = graph.flame_layout
        assert layout is not None and layout.span == 4_000
        assert [(profile.frames[i.node.frame_id].function, i.width) for i in layout.row(2)
                if i.node is not None] == [("b", 3_000), ("a", 1_000)]
        await pilot.press("up", "up")
        assert info(app).startswith(" b  total ") and "(75.0%)" in info(app), info(app)

    run_app(ProfTuiApp(profile=profile), body, SIZE)


def test_sandwich_colours_by_the_baseline() -> None:
    """With a baseline, the sandwich's frames are coloured by change (widths from NEW)."""
    base_stacks = [(("main", "a", "leaf"), 60), (("main", "b", "leaf"), 30), (("main",), 10)]
    new_stacks = [(("main", "a", "leaf"), 30), (("main", "b", "leaf"), 60), (("main",), 10)]
    new = build(new_stacks)
    base = build(base_stacks, order=("leaf", "b"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        graph = await open_flame(pilot, app)
        await wait_for(pilot, lambda: graph.base is not None, what="baseline")
        await pilot.press("up", "up", "up")
        assert selected(graph) == "leaf"
        await pilot.press("v")
        pane = app.query_one(FlamePane)
        await wait_for(pilot, lambda: not pane.sandwich_pending, what="sandwich")
        callers = app.query_one("#sandwich-callers", FlameGraph)
        assert callers.base is not None
        layout = callers.flame_layout
        assert layout is not None
        by_name = {new.frames[i.node.frame_id].function: i for i in layout.row(1)
                   if i.node is not None}
        assert {n: i.width for n, i in by_name.items()} == {"b": 60, "a": 30}
        b = callers._style(by_name["b"], True).bgcolor
        a = callers._style(by_name["a"], True).bgcolor
        assert b is not None and a is not None
        rb, ra = b.get_truecolor(), a.get_truecolor()
        assert rb[0] > rb[2] and ra[2] > ra[0]  # b's calls grew: red; a's shrank: blue
        root = callers._style(layout.row(0)[0], True).bgcolor  # leaf: 90 then 90
        assert root is not None
        r = root.get_truecolor()
        assert abs(r[0] - r[2]) < 10  # unchanged: neutral

    run_app(ProfTuiApp(profile=new, base=base), body, SIZE)


def test_key_bar_at_80_columns_keeps_the_panes_own_keys() -> None:
    """On an 80x24 terminal the flame pane's key bar still offers zoom, search, icicle
    and the sandwich (the pane switches fold into `1-6 panes`), with help and quit."""
    app = ProfTuiApp(profile=build(STACKS))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await open_flame(pilot, app)
        await pilot.pause()
        bar = screen_text(app).splitlines()[-1]
        for item in ("⏎ Zoom", "esc Unzoom", "/ Search", "i Icicle", "v Sandwich",
                     "1-6 panes", "? Help", "q Quit"):
            assert item in bar, bar

    run_app(app, body, (80, 24))
