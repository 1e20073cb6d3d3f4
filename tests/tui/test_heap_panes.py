"""Pilot test: the flat, tree and source panes and `m` on an imported gperftools heap
profile of tests/fixtures/hv_sites.c (bytes shown as KiB/MiB, counts as counts)."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.formats.importers import load_any
from proftui.tui.app import ProfTuiApp
from proftui.tui.format import format_bytes, format_cost, metric_label
from textual.pilot import Pilot

from tests.helpers.heap_records import record_gperftools_heap
from tests.helpers.tui import flat_ready, run_app, screen_text, wait_for


def row(text: str, function: str) -> str:
    return next(line for line in text.splitlines() if f" {function} " in line)


def test_heap_metrics_in_every_pane(tmp_path: Path) -> None:
    _, heap = record_gperftools_heap(tmp_path)
    profile = load_any(heap)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        text = screen_text(app)
        # live bytes first: 500000 B in site_half (70.9% of 704800 B), 204800 in site_leak
        assert row(text, "site_half").split()[:2] == ["70.9", "488.3KiB"]
        assert row(text, "site_leak").split()[:2] == ["29.1", "200.0KiB"]
        assert "688.3KiB live" in text  # the header's total
        labels = []
        for _ in profile.metrics:  # `m` goes round every metric and back
            await pilot.press("m")
            await pilot.pause()
            labels.append(metric_label(profile.metrics[app.metric]))
            text = screen_text(app)
            if labels[-1] == "live blocks":
                assert row(text, "site_leak").split()[:2] == ["90.9", "50"]
            if labels[-1] == "allocated":
                assert row(text, "site_half").split()[:2] == ["76.6", "976.6KiB"]
                assert row(text, "site_freed").split()[:2] == ["7.7", "97.7KiB"]
            if labels[-1] == "leaked blocks":
                assert row(text, "site_half").split()[:2] == ["9.1", "5"]
        assert labels == ["live blocks", "allocated", "allocations", "leaked",
                          "leaked blocks", "live"]
        await pilot.press("2")  # the call tree, in live bytes
        await pilot.pause(0.3)
        assert "100.0% 688.3KiB" in screen_text(app)
        await pilot.press("1", "slash", *"site_leak", "enter", "3")
        await wait_for(pilot, lambda: "void *p = malloc(n);" in screen_text(app),
                       what="site_leak's source")
        lines = [t.split() for t in screen_text(app).splitlines() if "malloc(n)" in t]
        # site_freed's malloc (line 19) shows no live bytes; site_leak's (25) all of them
        assert [t[:3] for t in lines] == [["19", "│", "void"], ["200.0KiB", "100.0%", "25"]]

    run_app(ProfTuiApp(profile=profile), body)


def test_byte_formatting() -> None:
    assert format_bytes(0) == "0B" and format_bytes(1023) == "1023B"
    assert format_bytes(1024) == "1.0KiB" and format_bytes(500_000) == "488.3KiB"
    assert format_bytes(3 * 1024**3) == "3.0GiB" and format_bytes(5 * 1024**4) == "5120.0GiB"
    assert format_cost(204_800, "bytes") == "200.0KiB" and format_cost(50, "count") == "50"
