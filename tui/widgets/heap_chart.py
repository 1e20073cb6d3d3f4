"""Heap over time: total live heap bytes and RSS from `Profile.timeline`, peak marked.

Drawn by plotext through textual-plotext's `PlotextPlot` (axes, two series, a
legend and a text label), not by hand.  Usage: mount a `HeapChart` and call
`show(profile.timeline)` whenever a new snapshot arrives.  None (a profile
without a timeline: CPU modes, imports) hides the widget; a timeline without
rows yet shows a one-line explanation instead of a plot.
"""

from __future__ import annotations

from collections.abc import Sequence

from proftui.collectors.model.profile import Timeline
from proftui.tui.format import format_bytes
from textual_plotext import PlotextPlot

LIVE, RSS = "live_bytes", "rss_bytes"  # the timeline columns drawn
POINTS_PER_COLUMN = 2  # plotext resolves 2 points per cell with its default marker
_UNITS = (("B", 1.0), ("KiB", 1024.0), ("MiB", 1024.0**2), ("GiB", 1024.0**3))


def thin(times: Sequence[float], values: Sequence[float],
         limit: int) -> tuple[list[float], list[float]]:
    """At most `limit` points, each the largest of its run of neighbours (so the peak
    survives); the time of that largest point is kept."""
    if limit <= 0 or len(times) <= limit:
        return list(times), list(values)
    out_t: list[float] = []
    out_v: list[float] = []
    step = len(times) / limit
    for bucket in range(limit):
        lo, hi = int(bucket * step), max(int((bucket + 1) * step), int(bucket * step) + 1)
        best = max(range(lo, min(hi, len(times))), key=lambda i: values[i])
        out_t.append(times[best])
        out_v.append(values[best])
    return out_t, out_v


def byte_unit(largest: float) -> tuple[str, float]:
    """The unit the y axis is labelled in, and its size in bytes."""
    chosen = _UNITS[0]
    for unit in _UNITS:
        if largest >= unit[1]:
            chosen = unit
    return chosen


class HeapChart(PlotextPlot):
    """Total live heap bytes and RSS over time; the heap's peak marked and labelled."""

    DEFAULT_CSS = """
    HeapChart {
        height: 14;
        min-height: 8;
        width: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.peak: tuple[float, float] | None = None  # (seconds, live bytes) at the peak
        self.summary = "no heap timeline"  # one line: now, peak, RSS (also the plot title)
        self._timeline: Timeline | None = None
        self._rss_figure = True

    def show(self, timeline: Timeline | None, rss_figure: bool = True) -> None:
        """Draw `timeline` (its live_bytes and, when present, rss_bytes columns);
        `rss_figure`: say the last RSS in the title (not when the process status above
        says the RSS: one figure, from one look at the process)."""
        self._timeline = timeline
        self._rss_figure = rss_figure
        self.display = timeline is not None
        self._draw()

    def on_resize(self) -> None:
        self._draw()  # thinning depends on the width

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        timeline = self._timeline
        if timeline is None or not timeline.times or LIVE not in timeline.names:
            self.peak = None
            self.summary = ("no heap timeline" if timeline is None else
                            "heap over time: waiting for the first sample")
            plt.title(self.summary)
            self.refresh()
            return
        times = timeline.times
        live = timeline.column(LIVE)
        rss = timeline.column(RSS) if RSS in timeline.names else None
        at = max(range(len(live)), key=lambda i: live[i])
        self.peak = (times[at], live[at])
        largest = max(max(live), max(rss) if rss else 0.0)
        unit, size = byte_unit(largest)
        limit = max(2, self.size.width * POINTS_PER_COLUMN)
        xs, ys = thin(times, [v / size for v in live], limit)
        plt.plot(xs, ys, label="live heap", color="cyan")
        if rss is not None:
            rx, ry = thin(times, [v / size for v in rss], limit)
            plt.plot(rx, ry, label="RSS", color="magenta")
        peak_t, peak_v = self.peak[0], self.peak[1] / size
        plt.vline(peak_t, "red")
        plt.scatter([peak_t], [peak_v], marker="x", color="red")
        label = f"peak {format_bytes(self.peak[1])} at {peak_t:.1f}s"
        span = times[-1] - times[0]
        right = span > 0 and peak_t - times[0] > span / 2
        plt.text(label, peak_t, peak_v, color="red", alignment="right" if right else "left")
        now = f"live {format_bytes(live[-1])} at {times[-1]:.1f}s"
        self.summary = f"{now}; {label}" + (f"; RSS {format_bytes(rss[-1])}"
                                            if rss and self._rss_figure else "")
        plt.title(self.summary)
        plt.xlabel("seconds")
        plt.ylabel(unit)
        plt.ylim(0, None)
        self.refresh()
