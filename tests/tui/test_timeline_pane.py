"""The timeline pane (`6`), driven by keys as a user would, on a run whose phases are
known (tests/helpers/phases.py): a range selected there is what every pane then shows,
the header names it, Esc brings the whole run back, and `b` on one range makes it the
baseline another range is compared with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model import storage
from proftui.collectors.model.profile import CPU_NS, SAMPLES, CallTree, Frame, Profile, ProfileMeta
from proftui.collectors.model.slices import part_totals, range_profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.timeline import TimelinePane
from proftui.tui.widgets.header_bar import HeaderBar
from proftui.tui.widgets.timeline_chart import LABEL_WIDTH, Rows, TimelineChart, fit_label
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from tests.helpers.phases import record_heap_phases, record_phases
from tests.helpers.tui import run, run_app, screen_text, wait_for


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, dict[str, int], float]:
    return record_phases(tmp_path_factory.mktemp("tlp"))


def shown_functions(app: ProfTuiApp) -> dict[str, float]:
    return {e.frame.function: e.total_cost[0] for e in app._entries}


async def select(pilot: Pilot, start_s: float, end_s: float) -> None:
    """Move the cursor to `start_s`, Enter, move to `end_s`, Enter."""
    chart = pilot.app.query_one(TimelineChart)
    seconds = chart.seconds()

    async def move_to(at: float) -> None:
        target = min(chart.columns - 1, int(at / seconds * chart.columns))
        while chart.cursor != target:
            await pilot.press("right" if chart.cursor < target else "left")

    await move_to(start_s)
    await pilot.press("enter")
    await move_to(end_s)
    await pilot.press("enter")


def on_the_timeline(profile: Profile, body: Callable[[Pilot, ProfTuiApp], Awaitable[None]],
                    **options: object) -> None:
    """`body(pilot, app)` once the app on `profile` (and ProfTuiApp `options`) has its
    flat profile and, after `6`, shows the timeline's rows."""

    async def opened(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app._entries, what="the flat profile")
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one(TimelineChart).rows is not None,
                       what="the timeline")
        await body(pilot, app)

    run_app(ProfTuiApp(profile=profile, **options), opened)  # type: ignore[arg-type]


def test_a_range_is_what_every_pane_shows(phases: tuple[Profile, dict[str, int], float]
                                          ) -> None:
    profile, _cpu, skew = phases

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        assert {"phase_a", "phase_b"} <= set(shown_functions(app))
        await select(pilot, 0.2, 2.0 + skew - 0.4)
        await wait_for(pilot, lambda: app.time_range is not None
                       and "phase_b" not in shown_functions(app), what="the range")
        assert shown_functions(app).get("phase_a", 0) > 0
        header = str(app.query_one(HeaderBar).render())
        assert "range 0.00-" in header, header
        await pilot.press("5")  # the flame graph shows the range too
        await wait_for(pilot, lambda: "phase_a" in screen_text(app)
                       and "phase_b" not in screen_text(app), what="the flame range")
        await pilot.press("6")
        await pilot.press("escape")  # the range goes: the whole run again
        await wait_for(pilot, lambda: app.time_range is None
                       and "phase_b" in shown_functions(app), what="the whole run")

    on_the_timeline(profile, body)


def test_a_range_as_the_baseline_of_another(phases: tuple[Profile, dict[str, int], float]
                                            ) -> None:
    profile, _cpu, skew = phases

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await select(pilot, 0.2, 2.0 + skew - 0.4)
        await wait_for(pilot, lambda: "phase_b" not in shown_functions(app),
                       what="the first range")
        await pilot.press("b")
        await wait_for(pilot, lambda: "Δ vs range" in str(app.query_one(HeaderBar)
                                                            .render()),
                       what="the range baseline")
        await select(pilot, 2.0 + skew + 0.4, 3.8)
        await wait_for(pilot, lambda: "phase_b" in shown_functions(app)
                       and "phase_a" not in shown_functions(app), what="the second range")
        assert app.baseline is not None  # Δ columns against the first range
        base = {e.frame.function for e in app.base_entries or []}
        assert "phase_a" in base and "phase_b" not in base
        assert isinstance(app.query_one(TimelinePane), TimelinePane)

    on_the_timeline(profile, body)


def test_profiles_without_a_timeline_say_so() -> None:
    profile = Profile(ProfileMeta(mode="gprof"), (CPU_NS,))
    profile.tree.add_stack([profile.frames.intern(Frame("main", "/bin/x"))], [5.0])
    profile.finalize()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app._entries, what="the flat profile")
        await pilot.press("6")
        await wait_for(pilot, lambda: "No timeline" in screen_text(app),
                       what="the note")

    run_app(ProfTuiApp(profile=profile), body)


def test_a_heap_range_shows_that_phase_allocations(tmp_path: Path) -> None:
    """Heap profiles have a timeline too: one row per process, a range holds the
    allocations made in it, and a state metric (peak) says it has no time course."""
    profile, _blocks, edge = record_heap_phases(tmp_path)
    allocs = next(i for i, m in enumerate(profile.metrics) if m.name == "allocs")
    peak = next(i for i, m in enumerate(profile.metrics) if m.name == "peak_bytes")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app._entries, what="the flat profile")
        await pilot.press("6")
        await wait_for(pilot, lambda: app.query_one(TimelineChart).rows is not None,
                       what="the timeline")
        assert "per process" in screen_text(app)
        await select(pilot, edge + 0.3, 10.0)
        await wait_for(pilot, lambda: app.time_range is not None, what="the range")
        shown = {e.frame.function: e.total_cost[allocs] for e in app._entries}
        assert shown.get("alloc_b", 0) > 0 and shown.get("alloc_a", 0) == 0, shown
        while app.metric != peak:
            await pilot.press("m")
        await wait_for(pilot, lambda: "No peak_bytes over time" in screen_text(app),
                       what="the state metric's note")

    run_app(ProfTuiApp(profile=profile), body)


def test_a_long_row_label_keeps_its_number() -> None:
    """A row label wider than the label column keeps its start and its end (the pid or
    tid that tells two rows apart), cut in the middle: "part web1 … pid 29061"."""
    assert fit_label("part web1 lua pid 29061", 21) == "part web1 … pid 29061"
    assert fit_label("thread 7 main", 21) == "thread 7 main"
    labels = {fit_label(f"part host{i} program pid {30000 + i}", 21) for i in range(3)}
    assert len(labels) == 3 and all(len(label) == 21 for label in labels), labels


class _ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TimelineChart()


def test_the_label_column_widens_for_long_labels() -> None:
    """A fleet's row labels ("part HOST PROGRAM pid N") are shown whole where the chart
    has room for them (up to a third of its width); past that they are cut in the
    middle, and the cells start where the labels end."""
    label = "part web1 clickhouse-server pid 29061"
    rows = Rows([label, "part web1 lua pid 2"], [[1.0, 2.0], [2.0, 1.0]], 60.0)

    async def drawn(width: int) -> tuple[int, str, int]:
        app = _ChartApp()
        async with app.run_test(size=(width, 8)) as pilot:
            chart = app.query_one(TimelineChart)
            chart.set_rows(rows)
            await pilot.pause()
            return chart.label_width, chart.render_line(0).text, chart.columns

    async def both() -> None:
        width, line, columns = await drawn(150)
        assert width == len(label) + 1 and line.startswith(label + " "), (width, line)
        assert columns == 150 - width and line[width:].strip(), line
        width, line, columns = await drawn(60)
        assert width == max(LABEL_WIDTH, 60 // 3) and line.startswith("part web1 "), line
        assert "…" in line[:width] and line[:width].rstrip().endswith("pid 29061"), line
        assert columns == 60 - width

    run(both)


def _fleet_like(function: str, start: float) -> Profile:
    """A profile shaped as a fleet query gives it: two parts (sessions) and, as its
    timeline, only each part's totals per minute (10 minutes from `start`)."""
    profile = Profile(ProfileMeta(mode="fleet", start_time=start, end_time=start + 600),
                      (SAMPLES,))
    frames = [profile.frames.intern(Frame("main", "/bin/x")),
              profile.frames.intern(Frame(function, "/bin/x"))]
    profile.tree.add_stack(frames, [30.0])
    for label, cost in (("h1 x pid 1", 20.0), ("h2 x pid 2", 10.0)):
        part = CallTree(1)
        part.add_stack(frames, [cost])
        profile.parts[label] = part
    profile.finalize()
    entries = [(start + 60 * k, k % 2, [2.0]) for k in range(10)]  # h1 even, h2 odd
    entries += [(start + 60 * k, 0, [2.0]) for k in range(1, 10, 2)]  # and h1 odd
    profile.slices = part_totals(start, 60.0, 10, list(profile.parts), entries, 1)
    return profile


def test_a_fleet_range_is_a_query_of_that_window() -> None:
    """A fleet profile's timeline holds each part's totals per minute; a range picked
    there is asked of the server for that window (whole minutes), shown everywhere,
    can be the baseline of another, and a query that fails drops the range, saying so."""
    start = 1_800_000_000.0
    whole = _fleet_like("whole_fn", start)
    asked: list[tuple[float, float]] = []

    def load_range(t0: float, t1: float) -> Profile:
        asked.append((t0, t1))
        if len(asked) == 3:
            raise ProftuiError("the server is down")
        return _fleet_like(f"window_{len(asked)}", start)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        assert "samples per part; slices of 60 s" in screen_text(app)
        assert app.query_one(TimelineChart).rows.values[0] == [2.0] * 10  # h1, the busiest
        await select(pilot, 130, 250)
        await wait_for(pilot, lambda: "window_1" in shown_functions(app), what="the window")
        assert asked == [(start + 120, start + 300)]  # widened to whole minutes
        assert any("time range 120.00-300.00 s" in w for w in app.profile.meta.warnings)
        await pilot.press("b")
        await wait_for(pilot, lambda: "Δ vs range" in str(app.query_one(HeaderBar).render()),
                       what="the range baseline")
        await select(pilot, 400, 500)
        await wait_for(pilot, lambda: "window_2" in shown_functions(app),
                       what=f"window 2 {asked} {app.time_range} {shown_functions(app)}")
        assert {e.frame.function for e in app.base_entries or []} >= {"window_1"}
        await select(pilot, 10, 100)
        await wait_for(pilot, lambda: app.time_range is None
                       and "whole_fn" in shown_functions(app), what="the whole again")

    on_the_timeline(whole, body, load_range=load_range)


def test_fleet_part_totals_do_not_make_range_profiles_or_saved_timelines(
        tmp_path: Path) -> None:
    whole = _fleet_like("whole_fn", 1_800_000_000.0)
    assert [sum(row) for row in whole.slices.part_activity(0)] == [20.0, 10.0]
    with pytest.raises(ValueError, match="asked of its source"):
        range_profile(whole, 0, 120)
    storage.save(whole, tmp_path / "fleet.proftui")
    assert storage.load(tmp_path / "fleet.proftui").slices is None
