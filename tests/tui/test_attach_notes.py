"""The notes of an attach profile name each dropped sample once, with its true cause
(issue 32, item 6): the TUI's notes screen said "1,225 records dropped by the runtime
(its tables were full; --buffer raises the budget)" beside the collector's own "1,225
samples were lost in the kernel's perf ring buffers" for the same samples."""

from __future__ import annotations

import os
import re

from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import CollectorOptions
from proftui.collectors.runtime.wire_attach import LOST_RING, LOST_TABLE, Buffers, Lost
from proftui.tui.app import ProfTuiApp
from proftui.tui.screens.notes import NotesScreen
from textual.pilot import Pilot

from tests.helpers.tui import run_app, screen_ready, wait_for


def drop_notes(ring: int, table: int) -> tuple[int, list[str]]:
    """The attach profile made of those drops (the collector's own path from the
    helper's records), opened in the TUI: (its meta.dropped, the notes screen's lines)."""
    collector = AttachCollector([], CollectorOptions(pid=os.getpid()))
    records = [Buffers(512 << 10, 2, 1 << 20, 0)]
    records += [Lost(ring, LOST_RING)] if ring else []
    records += [Lost(table, LOST_TABLE)] if table else []
    for record in records:
        collector._handle(record)
    profile = collector.collect()
    shown: list[str] = []

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("w")
        await wait_for(pilot, lambda: screen_ready(app, NotesScreen), what="notes")
        screen = app.screen
        assert isinstance(screen, NotesScreen)
        shown.extend(screen.notes)

    run_app(ProfTuiApp(profile=profile), body)
    return profile.meta.dropped, shown


def named_drops(notes: list[str]) -> list[tuple[int, str]]:
    """(count, note) of every note that gives a number of dropped or lost samples."""
    out = []
    for note in notes:
        match = re.match(r"([0-9,]+) (?:samples|records) (?:were |)(?:dropped|lost)", note)
        if match:
            out.append((int(match[1].replace(",", "")), note))
    return out


def test_ring_drops_are_named_once_as_lost_in_the_perf_rings() -> None:
    dropped, notes = drop_notes(1225, 0)
    assert dropped == 1225
    named = named_drops(notes)
    assert [count for count, _ in named] == [1225], notes
    assert "lost in the kernel's perf ring buffers (512 KiB per CPU)" in named[0][1]
    assert not any("tables were full" in n for n in notes), notes


def test_drops_of_two_causes_add_up_to_the_count() -> None:
    dropped, notes = drop_notes(40, 9)
    named = named_drops(notes)
    assert sorted(count for count, _ in named) == [9, 40], notes
    assert sum(count for count, _ in named) == dropped == 49
    causes = {count: note for count, note in named}
    assert "perf ring buffers" in causes[40] and "stack table was full" in causes[9]
