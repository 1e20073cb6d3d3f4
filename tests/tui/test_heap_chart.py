"""Pilot tests of the heap-over-time chart (tui/widgets/heap_chart.py) in a tiny App."""

from __future__ import annotations

from proftui.collectors.model.profile import Timeline
from proftui.tui.widgets.heap_chart import HeapChart, byte_unit, thin
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from tests.helpers.tui import run, run_app, screen_text

MiB = 1024 * 1024


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield HeapChart(id="heap")


def ramp(peak_at: float = 6.0, end: float = 10.0, rss: bool = True) -> Timeline:
    """Live bytes rise linearly to 4 MiB at `peak_at`, then fall to 1 MiB at `end`;
    RSS is live + 8 MiB."""
    timeline = Timeline(names=["live_bytes", "rss_bytes"] if rss else ["live_bytes"])
    for i in range(101):
        t = end * i / 100
        live = t / peak_at * 4 * MiB if t <= peak_at else \
            4 * MiB - (t - peak_at) / (end - peak_at) * 3 * MiB
        timeline.append(t, [live, live + 8 * MiB] if rss else [live])
    return timeline


def test_chart_marks_and_labels_the_peak() -> None:
    async def body(pilot: Pilot, app: ChartApp) -> None:
        chart = app.query_one(HeapChart)
        chart.show(ramp())
        await pilot.pause()
        assert chart.peak == (6.0, 4 * MiB)
        assert chart.summary == "live 1.0MiB at 10.0s; peak 4.0MiB at 6.0s; RSS 9.0MiB"
        lines = screen_text(app).splitlines()
        text = "\n".join(lines)
        assert chart.summary in lines[0]
        assert "live heap" in text and "RSS" in text and "MiB" in text
        label = [line for line in lines[1:] if "peak 4.0MiB at 6.0s" in line]
        assert len(label) == 1
        # The x axis: ticks at 0.0 and 10.0 are the first and last "┬"; the peak's
        # vertical line crosses the axis 60% of the way along it.
        axis = next(line for line in lines if line.lstrip().startswith("└"))
        ticks = [i for i, ch in enumerate(axis) if ch == "┬"]
        crossing = axis.index("┴")
        expected = ticks[0] + 0.6 * (ticks[-1] - ticks[0])
        assert abs(crossing - expected) <= 1.5, axis
        # the label ends at the peak (right-aligned: the peak is in the right half)
        assert abs(label[0].index("peak") + len("peak 4.0MiB at 6.0s") - crossing) <= 2

    run_app(ChartApp(), body, (100, 16))


def test_chart_follows_each_snapshot() -> None:
    async def body(pilot: Pilot, app: ChartApp) -> None:
        chart = app.query_one(HeapChart)
        chart.show(None)  # a profile without a timeline: nothing to show
        await pilot.pause()
        assert chart.peak is None and not chart.display
        assert screen_text(app).strip() == ""
        chart.show(Timeline(names=["live_bytes", "rss_bytes"]))  # recorded, no rows yet
        await pilot.pause()
        assert chart.peak is None and chart.display
        assert "waiting for the first sample" in screen_text(app)
        chart.show(ramp(peak_at=2.0, rss=False))
        await pilot.pause()
        assert chart.peak == (2.0, 4 * MiB)
        text = screen_text(app)
        assert "peak 4.0MiB at 2.0s" in text and "RSS" not in text
        chart.show(ramp(peak_at=8.0, end=20.0))  # a later snapshot: the peak moved
        await pilot.pause()
        assert chart.peak == (8.0, 4 * MiB)
        assert "peak 4.0MiB at 8.0s" in screen_text(app)
        await pilot.resize_terminal(40, 9)  # tiny terminal: still draws, no error
        await pilot.pause()
        assert "peak" in screen_text(app)

    run_app(ChartApp(), body, (80, 14))


def test_long_timelines_are_thinned_keeping_the_peak() -> None:
    times = [i * 0.001 for i in range(100_000)]
    values = [float(i % 1000) for i in range(100_000)]
    values[71_234] = 5e6
    xs, ys = thin(times, values, 200)
    assert len(xs) == 200 and max(ys) == 5e6 and xs[ys.index(5e6)] == times[71_234]
    assert thin(times[:10], values[:10], 200) == (times[:10], values[:10])
    assert byte_unit(10) == ("B", 1.0) and byte_unit(3 * MiB)[0] == "MiB"

    async def body(pilot: Pilot, app: ChartApp) -> None:
        chart = app.query_one(HeapChart)
        chart.show(Timeline(["live_bytes"], times, [[v] for v in values]))
        await pilot.pause()
        assert chart.peak == (times[71_234], 5e6)
        assert "peak 4.8MiB at 71.2s" in screen_text(app)

    run_app(ChartApp(), body, (100, 16))


def test_process_pane_shows_the_chart_of_a_heap_profile_only() -> None:
    """The app's Process pane draws a profile's timeline; without one the chart hides."""
    from proftui.collectors.model.profile import HEAP_METRICS, Frame, Profile, ProfileMeta
    from proftui.tui.app import ProfTuiApp

    def heap_profile(timeline: Timeline | None) -> Profile:
        profile = Profile(ProfileMeta(mode="heap", argv=["prog"], pids=[1]), HEAP_METRICS)
        main = profile.frames.intern(Frame("main", module="/bin/prog"))
        profile.tree.add_stack([main], [4 * MiB, 1, 0, 4 * MiB, 0, 0, 0])
        profile.timeline = timeline
        return profile.finalize()

    async def body(timeline: Timeline | None) -> None:
        app = ProfTuiApp(profile=heap_profile(timeline))
        async with app.run_test(size=(100, 40)) as pilot:
            await pilot.pause(0.3)
            await pilot.press("4")
            await pilot.pause(0.3)
            chart = app.query_one(HeapChart)
            if timeline is None:
                assert not chart.display
            else:
                assert chart.display and chart.peak == (6.0, 4 * MiB)
                assert "peak 4.0MiB at 6.0s" in screen_text(app)

    run(lambda: body(ramp()))
    run(lambda: body(None))
