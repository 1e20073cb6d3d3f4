"""Screen text that must not mislead (issue 27), driven as a user would with the Pilot:
Enter in the save dialog's format list saves, a paused attach is not "incomplete", the
README's 80-column key bar is the one on screen."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.storage import load
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from proftui.tui.screens.export import ExportScreen
from proftui.tui.screens.notes import NotesScreen
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.collect import attach
from tests.helpers.profiles import sample_profile
from tests.helpers.targets import ATT_FLAGS, SpinTarget
from tests.helpers.tui import (
    flat_ready,
    run_app,
    run_live,
    screen_ready,
    screen_text,
    wait_for,
)

SMALL = (80, 24)
README = Path(__file__).resolve().parents[2] / "README.md"


def test_enter_on_the_format_list_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """`e` then Enter saves in the highlighted format (it did nothing: Enter toggled the
    radio button already pressed); down, Enter exports the next format."""
    monkeypatch.chdir(tmp_path)
    app = ProfTuiApp(profile=sample_profile())
    steps = ((("enter",), "proftui-sampler.proftui"),
             (("down", "enter"), "proftui-sampler-1.pb.gz"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        for keys, name in steps:
            await pilot.press("e")
            await wait_for(pilot, lambda: screen_ready(app, ExportScreen), what="dialog")
            assert "Enter save" in screen_text(app)  # the dialog says what Enter does
            await pilot.press(*keys)
            await wait_for(pilot, (tmp_path / name).exists, what=f"{name} written by Enter")
            await wait_for(pilot, lambda: app.screen is app.screen_stack[0], what="closed")

    run_app(app, body, SMALL)
    assert load(tmp_path / "proftui-sampler.proftui").total(0) == 105
    assert (tmp_path / "proftui-sampler-1.pb.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_readme_names_the_key_bar_shown_at_80_columns() -> None:
    text = README.read_text()
    claimed = re.search(r"the pane keys \(as `([^`]+)`\)", text)
    assert claimed, "the README no longer says how the pane keys show at 80 columns"

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        bar = screen_text(app).rstrip("\n").splitlines()[-1]
        assert f" {claimed.group(1)} " in bar, (claimed.group(1), bar)

    run_app(ProfTuiApp(profile=sample_profile()), body, SMALL)


def test_a_paused_attach_is_not_called_incomplete() -> None:
    """`p` in attach mode freezes the display: the header says so, and nothing about an
    "incomplete" profile (the target still runs); once it ended, the profile is whole."""
    with SpinTarget(4.0) as target:
        collector = attach(target.pid, frequency_hz=200)
        try:
            app = ProfTuiApp(collector=collector)

            async def body(pilot: Pilot, app: ProfTuiApp) -> None:
                await wait_for(pilot, lambda: app.profile is not None
                               and app.profile.total(0) > 0, timeout=20,
                               what="samples")
                await pilot.press("p")
                await wait_for(pilot, lambda: "display frozen" in screen_text(app),
                               what="the frozen display")
                header = screen_text(app).splitlines()[0]
                assert "incomplete" not in header, header
                await pilot.press("p")
                await wait_for(pilot, lambda: app.ended, timeout=30, what="the end")
                await pilot.pause(0.3)
                header = screen_text(app).splitlines()[0]
                assert "exited" in header and "incomplete" not in header, header
                await pilot.press("w")
                await wait_for(pilot, lambda: screen_ready(app, NotesScreen), what="notes")
                assert "incomplete:" not in screen_text(app)

            run_app(app, body, (150, 40))
        finally:
            collector.stop()


def test_the_end_is_on_screen_before_the_final_profile() -> None:
    """The target exits while its final profile takes long to read (a big run): the
    header says how it ended at once, not "running" until the profile is in; the
    Process pane's CPU and RSS figures are the table's, and none is "now" once it ended."""
    binary = build_fixture("att_spin.c", ATT_FLAGS)
    # 6 s: the Process pane must show the running target first, and the app's start-up
    # takes seconds on a loaded machine.
    collector = SamplerCollector([str(binary), "6"], CollectorOptions(output="log"))
    real_wait = collector.wait

    def slow_wait() -> Profile:
        time.sleep(8.0)  # as reading a huge final profile does
        return real_wait()

    collector.wait = slow_wait  # type: ignore[method-assign]

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        await wait_for(pilot, lambda: "CPU %  now" in screen_text(app), timeout=20,
                       what="the process status")
        table = re.search(r"CPU\s+(\d+)\.\d%", screen_text(app))
        label = re.search(r"CPU %  now (\d+)%", screen_text(app))
        assert table and label and abs(int(table[1]) - int(label[1])) <= 1
        process = collector.process
        assert process is not None
        await wait_for(pilot, lambda: process.poll() is not None, timeout=20,
                       what="the target's exit")
        await wait_for(pilot, lambda: "exited with status 7"
                       in screen_text(app).splitlines()[0], timeout=2.5,
                       what="the exit in the header")
        assert not app.ended, "the final profile came too soon to test this"
        await wait_for(pilot, lambda: "- (ended)" in screen_text(app), timeout=3,
                       what="the ended process's status")
        text = screen_text(app)
        assert "now" not in text.split("CPU %")[1].splitlines()[0], text
        await wait_for(pilot, lambda: app.ended, timeout=20, what="the final profile")
        assert "reading the final profile" not in screen_text(app).splitlines()[0]

    run_live(collector, body, (150, 45))
