"""Live mode opens the source at the hottest line (issue 15), also when that line is far
down the file: tests/fixtures/src_deep.c's HOT line lies below the first screenful, so
the view must scroll to it on the first snapshot with costs, then keep the user's place."""

from __future__ import annotations

import re
import time
from pathlib import Path

from proftui.collectors.base import CollectorOptions
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.source import SourcePane, SourceView
from proftui.tui.widgets.flat_table import FlatTable
from textual.pilot import Pilot

from tests.conftest import FIXTURES, build_fixture
from tests.helpers.tmux import PROFTUI, Terminal
from tests.helpers.tui import quit_live, run_live, screen_text, wait_for

TEXT = (FIXTURES / "src_deep.c").read_text().splitlines()
HOT = next(i + 1 for i, t in enumerate(TEXT) if "/* HOT */" in t)


def visible(view: SourceView) -> range:
    top = view.scroll_offset.y
    return range(top, top + view.scrollable_content_region.height)


def test_live_source_follows_the_hot_line_until_the_user_moves() -> None:
    binary = build_fixture("src_deep.c", ["-O2", "-g", "-fno-omit-frame-pointer"])
    collector = SamplerCollector([str(binary), "4000"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = app.query_one(FlatPane)
        await wait_for(pilot, lambda: bool(flat.shown)
                       and flat.shown[0].frame.function == "work",
                       timeout=30, what="work on top of the flat profile")
        app.query_one(FlatTable).move_cursor(row=0)
        await pilot.press("3")
        pane = app.query_one(SourcePane)
        view = app.query_one(SourceView)
        await wait_for(pilot, lambda: pane.listing is not None
                       and pane.listing.kind == "source"
                       and pane.listing.function_cost[0] > 0,
                       what="a listing of work with costs")
        await pilot.pause()
        assert not app.ended, "the target ended too soon"
        listing = pane.listing
        assert listing is not None
        assert 0 < view.scrollable_content_region.height < HOT  # below the first screen
        assert listing.lines[view.cursor].number == HOT
        assert view.cursor in visible(view), (view.scroll_offset, view.cursor)
        assert "/* HOT */" in screen_text(app)
        # the user moves: later snapshots keep the cursor and the scroll position
        await pilot.press("up", "up", "up")
        place = (view.cursor, view.scroll_offset.y)
        assert listing.lines[view.cursor].number == HOT - 3
        for _ in range(2):
            seen = app.profile
            await wait_for(pilot, lambda seen=seen: app.profile is not seen,
                           what="a new snapshot")
            await pilot.pause(0.2)
            assert (view.cursor, view.scroll_offset.y) == place
        assert pane.listing is not listing, "the listing was not refreshed"
        await quit_live(pilot)

    run_live(collector, body)


def _drawn_whole(screen: str) -> bool:
    """Whether the listing on `screen` was drawn whole: tmux may show a frame while its
    rows are still arriving (on a loaded machine the listing once stopped at line 84,
    blank rows below it), and the HOT line is judged on whole frames only."""
    rows = screen.splitlines()
    numbered = [(i, int(m[1])) for i, row in enumerate(rows)
                if (m := re.search(r"(\d+) │", row))]
    if not numbered:
        return False
    at, last = numbered[-1]
    below = rows[at + 1:at + 2]
    return last == len(TEXT) or not below or bool(below[0].strip())


def test_live_source_first_screen_shows_the_hot_line(terminal: list[Terminal],
                                                     tmp_path: Path) -> None:
    """In a real terminal the listing's first screen already shows the HOT line, not
    line 1 until the next snapshot re-centres it."""
    binary = build_fixture("src_deep.c", ["-O2", "-g", "-fno-omit-frame-pointer"])
    term = Terminal([str(PROFTUI), str(binary), "4000"], tmp_path)
    terminal.append(term)
    deadline = time.monotonic() + 30
    while True:  # work on the flat profile's top row (the cursor's)
        rows = term.screen().splitlines()
        if len(rows) > 3 and " work " in f"{rows[3]} " and "running" in rows[0]:
            break
        assert time.monotonic() < deadline, "\n".join(rows)
        time.sleep(0.1)
    term.key("3", settle=0)
    screens: list[str] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(screens) < 10:
        screen = term.screen()
        if "source: src_deep.c" in screen and "self samples in listing 0 " not in screen \
                and _drawn_whole(screen):
            screens.append(screen)  # a listing of work with costs is on screen
        time.sleep(0.03)
    assert screens, f"the source of work never showed:\n{term.screen()}"
    for screen in screens:
        assert "/* HOT */" in screen, f"the HOT line (line {HOT}) is off screen:\n{screen}"
    term.key("q")
    term.key("y")
