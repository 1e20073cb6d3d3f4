"""Heap mode as a user sees it (issue 27), on the heap demo (`proftui demo --heap`): the
metric shown is named in the header and the column titles whatever `m` picked, and the
Process pane gives one RSS figure."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from proftui.collectors.base import CollectorOptions
from proftui.collectors.heap.collector import HeapCollector
from proftui.tui import demo
from proftui.tui.app import ProfTuiApp
from proftui.tui.format import format_cost, metric_label, metric_word
from proftui.tui.panes.flat import FlatPane
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.heap_records import record_heaptrack
from tests.helpers.tui import flat_ready, run_live, screen_text, wait_for

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


def test_heap_screens_say_what_they_show() -> None:
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


def heaptrack_temporaries(data: Path) -> dict[str, int]:
    """Temporary allocations per allocating function, from heaptrack_print."""
    text = subprocess.run(["heaptrack_print", "-f", str(data), "-a", "0", "-p", "0", "-l", "0",
                           "-T", "1", "-n", "100", "-s", "0"], capture_output=True, text=True,
                          timeout=300).stdout
    out: dict[str, int] = {}
    for count, name in re.findall(r"^(\d+) temporary allocations of \d+ allocations in total "
                                  r".* from\n(\S+)$", text, re.M):
        out[name] = out.get(name, 0) + int(count)
    return out


def test_temporary_allocations_as_heaptrack_counts_them(tmp_path: Path) -> None:
    """malloc, realloc, free: two temporaries a round, as heaptrack counts them (the
    realloc frees the malloc'd block right after its allocation); proftui counted one.
    Read from the flat profile a user switches to `temporary allocs` with `m`."""
    binary = build_fixture("heap_realloc.c", ["-O1", "-g"])
    _binary, data = record_heaptrack(tmp_path, binary)
    theirs = heaptrack_temporaries(data)
    assert theirs.get("grow_and_drop") == 2000 and theirs.get("overlap") == 1000, theirs

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.ended, timeout=60, what="the end")
        await flat_ready(pilot, app)
        while app.profile is not None and \
                app.profile.metrics[app.metric].name != "temporary":
            await pilot.press("m")
        await pilot.pause(0.3)
        rows = {e.frame.function: e.self_cost[app.metric]
                for e in app.query_one(FlatPane).shown}
        for name in ("grow_and_drop", "overlap"):
            assert rows.get(name) == theirs[name], (name, rows.get(name), theirs[name])
            line = next(line for line in screen_text(app).splitlines() if f" {name} " in line)
            assert f"{theirs[name]:,}" in line, line
        total = sum(theirs[n] for n in ("grow_and_drop", "overlap"))
        assert f"{total:,} temporary allocs" in screen_text(app).splitlines()[0]

    run_live(HeapCollector([str(binary)], CollectorOptions(output="log")), body, SIZE)
