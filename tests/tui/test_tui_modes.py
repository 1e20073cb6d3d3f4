"""The app on the two preloaded collectors, live to the target's exit: the sampler on
a 60/30/10 fixture and the hook library on exact call counts; and the notes key."""

from __future__ import annotations

from proftui.collectors.base import CollectorOptions
from proftui.collectors.instrument.collector import InstrumentCollector
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.screens.notes import NotesScreen
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.tui import run_live, screen_ready, screen_text, wait_for


def test_sampler_live_to_exit() -> None:
    binary = build_fixture("smp_work.c", ["-O2", "-g", "-fno-omit-frame-pointer"])
    collector = SamplerCollector([str(binary), "800"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.ended, timeout=60, what="sampler target exit")
        await pilot.pause()
        header = screen_text(app).splitlines()[0]
        assert "sampler" in header and "exited with status 7" in header  # the fixture's
        names = [e.frame.function for e in app.query_one(FlatPane).shown[:3]]
        assert names == ["work_a", "work_b", "work_c"], names
        await pilot.press("2")
        await pilot.press("h")  # hot path: _start ... main -> work_a
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: "work_a" in screen_text(app), what="hot path")
        assert tree is not None and "main" in screen_text(app)

    run_live(collector, body)


def test_live_instrument_run_to_its_exit() -> None:
    binary = build_fixture("ins_basic.c", ["-O1", "-g", "-finstrument-functions"])
    collector = InstrumentCollector([str(binary), "500", "4"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.ended, timeout=60, what="instrument exit")
        await pilot.pause()
        assert "exited with status 4" in screen_text(app).splitlines()[0]
        calls = {e.frame.function: e.calls for e in app.query_one(FlatPane).shown}
        assert calls["leaf_a"] == 1500 and calls["leaf_b"] == 1500
        assert calls["mid"] == 500
        await pilot.press("w")
        await wait_for(pilot, lambda: screen_ready(app, NotesScreen),
                       what="notes screen")
        assert "Notes on this profile" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NotesScreen),
                       what="notes closed")

    app = run_live(collector, body)
    final = app.final_profile()
    assert final is not None and final.meta.exit_status == 4
