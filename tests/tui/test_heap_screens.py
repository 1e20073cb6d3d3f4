"""Heap mode as a user sees it (issue 27), on the heap demo (`proftui demo --heap`): the
metric shown is named in the header and the column titles whatever `m` picked, and the
Process pane gives one RSS figure."""

from __future__ import annotations

import re

from proftui.collectors.base import CollectorOptions
from proftui.collectors.heap.collector import HeapCollector
from proftui.tui import demo
from proftui.tui.app import ProfTuiApp
from proftui.tui.format import format_cost, metric_label, metric_word
from textual.pilot import Pilot

from tests.tui.tui_profiles import flat_ready, run_live, screen_text, wait_for

SIZE = (150, 50)
RSS_FIGURE = re.compile(r"(?<!peak )RSS[ :]+(?:now )?([\d.]+(?:[KMG]i)?B)\b")


def rss_figures(text: str) -> set[str]:
    """Every resident-set size the screen states (not the peaks: another quantity)."""
    return set(RSS_FIGURE.findall(text))


async def every_metric_named(pilot: Pilot, app: ProfTuiApp) -> None:
    """`m` through every metric: the header gives its total and name, the flat profile's
    cost columns name it."""
    assert app.profile is not None
    for _ in app.profile.metrics:
        await pilot.pause(0.2)
        profile, m = app.profile, app.metric
        metric = profile.metrics[m]
        lines = screen_text(app).splitlines()
        total = f"{format_cost(profile.total(m), metric.unit)} {metric_label(metric)}"
        assert total in lines[0], (total, lines[0])
        word = metric_word(metric)
        assert f"Self {word}" in lines[2] and f"Total {word}" in lines[2], (word, lines[2])
        await pilot.press("m")


def test_heap_screens_name_the_metric_and_one_rss() -> None:
    binary = demo.build_demo("heap")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        await pilot.press("4")
        await wait_for(pilot, lambda: "live heap" in screen_text(app)
                       and "RSS  now" in screen_text(app), timeout=20,
                       what="the heap chart and the process status")
        figures = rss_figures(screen_text(app))
        assert len(figures) == 1, (figures, screen_text(app))
        await wait_for(pilot, lambda: app.ended, timeout=60, what="the end")
        await pilot.pause(1.0)
        figures = rss_figures(screen_text(app))
        assert len(figures) == 1, (figures, screen_text(app))
        await pilot.press("1")
        await every_metric_named(pilot, app)

    run_live(HeapCollector([str(binary), "25"], CollectorOptions(output="log")), body, SIZE)
