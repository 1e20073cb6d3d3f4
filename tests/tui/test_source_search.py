"""Search in the source pane (issue 15): `/` opens a regex prompt (case-insensitive when
all lower case, as less does), `n`/`N` go to the next/previous match, matches are
highlighted, the status says "match k of n" or "no match", Esc closes the prompt and
gives the focus back to the listing (and a second Esc goes back, as everywhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.source import Listing, ListingLine
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.source import SearchInput, SourceView
from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static

from tests.helpers.src_tmpl import HEADER, open_crunch
from tests.helpers.tui import run_app

LINES = HEADER.read_text().splitlines()


@pytest.fixture
def tmpl_profile(tmpl_run: tuple[Path, Profile]) -> Profile:
    return tmpl_run[1]


def status(app: ProfTuiApp) -> str:
    return str(app.query_one("#source-status", Static).render())


def expected_rows(pattern: str, flags: int) -> list[int]:
    """Rows of the header matching `pattern`, computed here with `re` directly."""
    return [i for i, text in enumerate(LINES) if re.search(pattern, text, flags)]


async def type_search(pilot: Pilot, text: str) -> None:
    await pilot.press("slash")
    await pilot.press(*[{"(": "left_parenthesis", ")": "right_parenthesis",
                         "\\": "backslash", " ": "space"}.get(c, c) for c in text])


def test_source_search_keys(tmpl_profile: Profile) -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await open_crunch(pilot, app, tmpl_profile)
        view = app.query_one(SourceView)
        origin = view.cursor
        rows = expected_rows("state", re.IGNORECASE)
        assert len(rows) >= 3
        await type_search(pilot, "state")
        assert isinstance(app.focused, SearchInput)
        first = next((r for r in rows if r >= origin), rows[0])
        assert view.cursor == first
        k = rows.index(first) + 1
        assert status(app) == f"/state: match {k} of {len(rows)}"
        await pilot.press("enter")
        assert app.focused is view and not app.query_one(SearchInput).display
        await pilot.press("n")
        second = rows[k % len(rows)]
        assert view.cursor == second
        assert status(app).startswith(f"/state: match {rows.index(second) + 1} of")
        await pilot.press("N")
        assert view.cursor == first
        # the match is highlighted in the drawn row
        strip = view.render_line(view.cursor - view.scroll_offset.y)
        match_bg = view._styles["match"].bgcolor
        lit = "".join(s.text for s in strip if isinstance(s, Segment) and s.style
                      and s.style.bgcolor == match_bg)
        assert lit.lower() == "state" * LINES[first].lower().count("state")
        # less's smart case: an upper-case letter makes the search case-sensitive
        await type_search(pilot, "T")
        exact = expected_rows("T", 0)
        assert status(app).endswith(f"of {len(exact)}")
        await pilot.press("escape")  # closes the prompt, keeps the search
        await type_search(pilot, "t")
        anycase = expected_rows("t", re.IGNORECASE)
        assert len(exact) < len(anycase) and status(app).endswith(f"of {len(anycase)}")
        await pilot.press("escape")
        assert app.focused is view and not app.query_one(SearchInput).display
        await type_search(pilot, "t(")  # not a regex
        assert "not a regex" in status(app)
        await pilot.press("escape")
        await type_search(pilot, "zzqq")
        assert status(app) == "/zzqq: no match"
        await pilot.press("escape")
        assert app.focused is view
        await pilot.press("n")
        assert "no match" in status(app)
        # no trap: Esc in the listing goes back along the trail, q still quits
        await pilot.press("escape")
        assert app.nav[-1].pane == "flat"
        await pilot.press("q")

    run_app(ProfTuiApp(profile=tmpl_profile), body)


def test_source_text_cannot_drive_the_terminal() -> None:
    """Tabs are expanded (8 columns) and control characters escaped, and search spans
    land on the text as drawn: a source file must not drive the terminal."""

    class ViewApp(App[None]):
        def compose(self) -> ComposeResult:
            yield SourceView()

    async def body(pilot: Pilot, app: ViewApp) -> None:
        view = app.query_one(SourceView)
        rows = [ListingLine("\tint x = 1; /* \x1b[31m red */", 1, [3.0]),
                ListingLine("int y;", 2, None)]
        view.set_listing(Listing("source", "t.c", rows, path="t.c", function_cost=[3.0]),
                         0, "count")
        await pilot.pause()
        drawn = "".join(s.text for s in view.render_line(0))
        assert "\x1b" not in drawn and "\t" not in drawn and "\\x1b[31m" in drawn
        assert drawn.index("int x") == drawn.index("│ ") + 2 + 8
        assert view.find("x = 1") == "/x = 1: match 1 of 1"
        match_bg = view._styles["match"].bgcolor
        lit = "".join(s.text for s in view.render_line(0)
                      if s.style is not None and s.style.bgcolor == match_bg)
        assert lit == "x = 1"

    run_app(ViewApp(), body, (100, 10))
