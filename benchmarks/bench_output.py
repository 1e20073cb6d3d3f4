"""What the Process pane's output panel costs the TUI's event loop.

A real launched target (tests/fixtures/out_flood.c, sampler mode) floods its
stdout while the app shows the Process pane; every call of the panel's poll
(read what is new, split and escape lines, redraw the log) is timed.  Anchor:
the poll interval of the same run (OUTPUT_POLL_S), so the figure printed is
the share of one CPU the panel takes on the UI thread, during the flood and
once the output is quiet.  Goal: under 5% during a flood, ~0 when quiet.

usage: python benchmarks/bench_output.py [--lines N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.base import CollectorOptions  # noqa: E402
from proftui.collectors.registry import COLLECTORS  # noqa: E402
from proftui.tui.app import ProfTuiApp  # noqa: E402
from proftui.tui.panes.process import OUTPUT_POLL_S, ProcPane  # noqa: E402
from proftui.tui.widgets.output_panel import OutputLog  # noqa: E402


def build() -> Path:
    out = ROOT / "build" / "bench" / "out_flood"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-g", "-o", str(out),
                    str(ROOT / "tests" / "fixtures" / "out_flood.c")], check=True)
    return out


async def measure(lines: int) -> tuple[list[float], list[float], int]:
    collector = COLLECTORS["sampler"]([str(build()), str(lines)], CollectorOptions(output="log"))
    collector.start()
    app = ProfTuiApp(collector=collector)
    busy: list[float] = []
    quiet: list[float] = []
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("4")
            pane = app.query_one(ProcPane)
            log = app.query_one(OutputLog)
            original = pane._poll_output

            def timed() -> None:
                started = time.perf_counter()
                finished = log.finished
                original()
                (quiet if finished else busy).append(time.perf_counter() - started)

            pane._poll_output = timed  # type: ignore[method-assign]
            if pane._output_timer is not None:  # the interval calls the timed version
                pane._output_timer.stop()
                pane._output_timer = pane.set_interval(OUTPUT_POLL_S, timed)
            deadline = time.monotonic() + 120
            while not log.finished and time.monotonic() < deadline:
                await pilot.pause(0.05)
            for _ in range(10):  # quiet polls: nothing new (the timer has stopped by now)
                timed()
            await pilot.press("q")
        output = collector.output()
        total = output.total_bytes if output is not None else 0
    finally:
        collector.stop()
    return busy, quiet, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000_000)  # ~2 GB: many polls
    args = parser.parse_args()
    if "sampler" not in COLLECTORS:
        sys.exit("the sampler runtime is not built")
    busy, quiet, total = asyncio.run(measure(args.lines))
    print(f"target wrote {total:,} bytes; {len(busy)} polls during the flood")
    for name, times in (("flood", busy), ("quiet", quiet)):
        if not times:
            print(f"{name}: no polls")
            continue
        mean = statistics.mean(times)
        print(f"{name}: mean {mean * 1e3:.2f} ms, max {max(times) * 1e3:.2f} ms per poll; "
              f"{mean / OUTPUT_POLL_S * 100:.2f}% of one CPU at one poll per "
              f"{OUTPUT_POLL_S} s (the anchor)")


if __name__ == "__main__":
    main()
