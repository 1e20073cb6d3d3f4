"""The source pane on line costs recorded at collection time (issue 12): a saved sampler
profile opened with its binary and source moved away, and a live sampler run, both
open `work` of tests/fixtures/line_hot.c at its HOT line."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.base import CollectorOptions
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.source import SourcePane, SourceView
from proftui.tui.widgets.flat_table import FlatTable
from textual.pilot import Pilot

from tests.helpers.line_hot import HOT, build_copy, record, save_and_move_away
from tests.helpers.tui import quit_live, run_app, run_live, screen_text, wait_for


async def open_work_source(pilot: Pilot, app: ProfTuiApp) -> SourcePane:
    """Enter the source of the top function of the flat profile (work)."""
    flat = app.query_one(FlatPane)
    await wait_for(pilot, lambda: bool(flat.shown) and flat.shown[0].frame.function == "work",
                   timeout=30, what="work on top of the flat profile")
    app.query_one(FlatTable).move_cursor(row=0)
    await pilot.press("3")
    pane = app.query_one(SourcePane)
    await wait_for(pilot, lambda: pane.listing is not None and pane.frame is not None
                   and pane.frame.function == "work", what="source listing")
    return pane


def test_saved_profile_without_binary_or_source(tmp_path: Path) -> None:
    binary, source = build_copy(tmp_path, [])
    loaded = save_and_move_away(record(SamplerCollector, binary, "100"), tmp_path,
                                binary, source)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        pane = await open_work_source(pilot, app)
        await pilot.pause()
        listing = pane.listing
        assert listing is not None and listing.kind == "source"
        view = app.query_one(SourceView)
        assert listing.lines[view.cursor].number == HOT
        assert "/* HOT */" in screen_text(app)

    run_app(ProfTuiApp(profile=loaded), body)


def test_live_source_opens_at_the_hottest_line(tmp_path: Path) -> None:
    binary, _source = build_copy(tmp_path, [])
    collector = SamplerCollector([str(binary), "1500"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.profile is not None
                       and app.profile.total(0) > 100, timeout=30, what="samples")
        pane = await open_work_source(pilot, app)
        view = app.query_one(SourceView)
        assert pane.listing is not None and pane.listing.kind == "source"
        assert not app.profile.meta.complete, "the target ended too soon"
        assert pane.listing.lines[view.cursor].number == HOT
        # later snapshots keep the cursor where it is
        seen = app.profile
        await wait_for(pilot, lambda: app.profile is not seen, what="a new snapshot")
        await pilot.pause()
        assert pane.listing.lines[view.cursor].number == HOT
        await pilot.press("up")
        cursor = view.cursor
        seen = app.profile
        await wait_for(pilot, lambda: app.profile is not seen, what="another snapshot")
        await pilot.pause(0.5)
        assert view.cursor == cursor  # the user's cursor survives refreshes
        await quit_live(pilot)

    run_live(collector, body)
