"""The source pane's interleaved mode and header files (issue 15), and its colours
following the Textual theme: on a sampler profile of tests/fixtures/src_tmpl.cpp,
whose time is in templates of src_tmpl.hpp inlined into crunch()."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.model.profile import Profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.source import SourceView
from proftui.tui.widgets.source_view import HEAT_STEPS
from rich.segment import Segment
from textual.color import Color
from textual.pilot import Pilot
from textual.widgets import Static

from tests.helpers.reference import addr2line_innermost
from tests.helpers.src_tmpl import HDR_HOT, HEADER, SOURCE, open_crunch
from tests.helpers.tui import run_app, screen_text, wait_for


def test_interleaved_listing_of_inlined_header_code(tmpl_run: tuple[Path, Profile]) -> None:
    binary, profile = tmpl_run

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        pane = await open_crunch(pilot, app, profile)
        view = app.query_one(SourceView)
        assert pane.listing is not None
        assert pane.listing.lines[view.cursor].number == HDR_HOT  # the header, hot line
        title = str(app.query_one("#source-title", Static).render())
        assert "file 1 of 2 (f: next)" in title
        assert "i Src+asm" in screen_text(app)  # the key bar names the mode's key
        await pilot.press("f")  # crunch's own file
        await wait_for(pilot, lambda: pane.listing is not None
                       and pane.listing.path == str(SOURCE), what="src_tmpl.cpp")
        title = str(app.query_one("#source-title", Static).render())
        assert "inlined from other files (src_tmpl.hpp)" in title and "file 2 of 2" in title
        await pilot.press("i")
        await wait_for(pilot, lambda: pane.listing is not None
                       and pane.listing.kind == "interleaved", what="interleaved listing")
        listing = pane.listing
        text = screen_text(app)
        assert f"── {HEADER} ──" in text and "imul" in text
        row = listing.lines[view.cursor]
        assert row.kind == "insn" and row.number is not None
        # the cursor opens on the hottest instruction, which binutils puts on HDR_HOT
        where = addr2line_innermost(binary, [row.number])  # type: ignore[list-item]
        assert where[row.number] == (str(HEADER), HDR_HOT)
        heads = [r for r in listing.lines[:view.cursor] if r.kind == "head"]
        assert heads[-1].file == str(HEADER) and heads[-1].number == HDR_HOT
        await pilot.press("slash", "i", "m", "u", "l", "enter")  # search works here too
        assert "imul" in listing.lines[view.cursor].text
        await pilot.press("i")  # back to the source
        await wait_for(pilot, lambda: pane.listing is not None
                       and pane.listing.kind == "source", what="source again")
        await pilot.press("q")

    run_app(ProfTuiApp(profile=profile), body)


def test_source_colours_follow_the_theme(tmpl_run: tuple[Path, Profile]) -> None:
    """Heat is the theme's $error laid over its $background (more of it as the share
    grows), the cursor its $primary: switching themes re-colours the listing."""
    _binary, profile = tmpl_run

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await open_crunch(pilot, app, profile)
        view = app.query_one(SourceView)
        listing = view.listing
        assert listing is not None
        row = listing.lines[view.cursor]
        assert row.cost is not None
        share = row.cost[0] / listing.function_cost[0]
        step = max(1, round(min(1.0, share) ** 0.5 * HEAT_STEPS))
        seen = {}
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()
            variables = app.get_css_variables()
            background = Color.parse(variables["background"])
            heat = background.blend(Color.parse(variables["error"]),
                                    0.25 + 0.75 * step / HEAT_STEPS)
            cursor = background.blend(Color.parse(variables["primary"]), 0.5)
            strip = view.render_line(view.cursor - view.scroll_offset.y)
            cells = [s for s in strip if isinstance(s, Segment) and s.style is not None]
            cost_cell = next(s for s in cells if s.text.strip())
            code_cell = cells[-1]
            assert cost_cell.style.bgcolor is not None and code_cell.style.bgcolor is not None
            assert Color.from_rich_color(cost_cell.style.bgcolor) == heat, theme
            assert Color.from_rich_color(code_cell.style.bgcolor) == cursor, theme
            seen[theme] = heat
        assert seen["textual-dark"] != seen["textual-light"]
        await pilot.press("q")

    run_app(ProfTuiApp(profile=profile), body)
