"""Timeline pane (`6`): each thread's activity over the run, and a time range that every
pane then shows (hotspot's timeline).

Left/Right move the cursor; Enter starts a selection at it, moving extends it, Enter
again shows that range everywhere (flat profile, tree, source, flame): the app's
views become `collectors.model.slices.range_profile` of the range (a fleet
profile's: its query over that window), and the header names it.  A mouse drag
selects too.  Esc drops a selection being made, then the range shown, then goes
back as everywhere.  `b` with a range shown makes it the
baseline, so another range is compared with it (two phases of one run).
"""

from __future__ import annotations

from typing import ClassVar

from proftui.collectors.model.parts import describe_part
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.slices import Slices
from proftui.collectors.model.views import FlatEntry
from proftui.tui.format import format_cost
from proftui.tui.panes.base import NavState, Pane
from proftui.tui.widgets.timeline_chart import Rows, TimelineChart
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static


class TimelinePane(Pane, Vertical):
    """The chart, a title line and the line under it (cursor time, selection, range)."""

    KEY, PANE_ID, TITLE, TAB = "6", "timeline", "Timeline", "Time"
    HINT = "Each thread's activity over time; select a range every pane then shows"

    DEFAULT_CSS = """
    TimelinePane { height: 1fr; }
    TimelinePane #timeline-title { height: 1; text-style: bold; }
    TimelinePane #timeline-info { height: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1)", "Earlier", show=False,
                tooltip="Move the timeline's cursor one column earlier"),
        Binding("right", "move(1)", "Later", show=False,
                tooltip="Move the timeline's cursor one column later"),
        Binding("shift+left", "move(-10)", "Earlier x10", show=False,
                tooltip="Move the cursor ten columns earlier"),
        Binding("shift+right", "move(10)", "Later x10", show=False,
                tooltip="Move the cursor ten columns later"),
        Binding("home", "move(-100000)", "Start", show=False,
                tooltip="Move the cursor to the start of the run"),
        Binding("end", "move(100000)", "End", show=False,
                tooltip="Move the cursor to the end of the run"),
        Binding("enter", "select", "Select range",
                tooltip="Start a selection at the cursor; again: show that range everywhere"),
        Binding("escape", "clear", "Clear range", show=False,
                tooltip="Drop the selection, then the range shown (then back)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.metric = 0
        self._drawn: tuple[int, int, int, str | None] | None = None  # what the rows show

    def compose(self) -> ComposeResult:
        yield Static("", id="timeline-title")
        yield TimelineChart(id="timeline-chart")
        yield Static("", id="timeline-info")

    @property
    def chart(self) -> TimelineChart:
        return self.query_one(TimelineChart)

    def focus_widget(self) -> Widget | None:
        return self.chart

    # -- pane hooks ------------------------------------------------------------------

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        self.metric = metric
        if state is not None:
            self._redraw()

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        self.metric = metric
        self._redraw()

    def _whole(self) -> Profile | None:
        """The whole profile (the panes are given a range's when one is shown)."""
        return getattr(self.app, "_whole", None) or getattr(self.app, "profile", None)

    def _redraw(self) -> None:
        whole = self._whole()
        slices = whole.slices if whole is not None else None
        title = self.query_one("#timeline-title", Static)
        if whole is None or slices is None or not len(slices):
            self.chart.set_rows(None)
            mode = whole.meta.mode if whole is not None else "this"
            title.update(f"No timeline: a {mode} profile keeps no costs over time (sampler, "
                         "attach and heap profiles do)")
            self._info("")
            return
        key = (id(slices), len(slices), self.metric, self.part)
        if key != self._drawn:
            self._drawn = key
            self.chart.set_rows(self._rows(whole, slices))
        metric = whole.metrics[self.metric] if self.metric < len(whole.metrics) else None
        name = metric.name if metric else ""
        rows = self.chart.rows
        if rows is not None and not any(any(row) for row in rows.values):
            title.update(f"No {name} over time: it is a state, not counted per slice "
                         "(m picks another metric)")
        else:
            threads = {" tid " in label for label in slices.index.labels}
            # --heap: the sampler's rows are threads, the heap profiler's processes; a
            # fleet profile's are its parts (push sessions, or by= label values)
            per = "part" if slices.totals_only else "thread or process" \
                if len(threads) > 1 else "thread" if True in threads else "process"
            title.update(f"Activity over {slices.width * len(slices):.1f} s ({name} per "
                         f"{per}; slices of {slices.width:g} s)")
        span = getattr(self.app, "time_range", None)
        chart = self.chart
        chart.applied = None if span is None else (
            int(span[0] / max(chart.seconds(), 1e-9) * chart.columns),
            max(0, int(span[1] / max(chart.seconds(), 1e-9) * chart.columns) - 1))
        chart.refresh()
        self._info_line()

    def _rows(self, whole: Profile, slices: Slices) -> Rows:
        """One row per part, busiest first (the chosen thread alone when one is)."""
        activity = slices.part_activity(self.metric)
        order = sorted(range(len(slices.index.labels)), key=lambda i: -sum(activity[i]))
        labels, values = [], []
        for i in order:
            label = slices.index.labels[i]
            if self.part is not None and label != self.part and \
                    not label.startswith(self.part + " "):
                continue
            labels.append(describe_part(whole, label).title())
            values.append(activity[i])
        return Rows(labels, values, slices.width)

    def _info(self, text: str) -> None:
        self.query_one("#timeline-info", Static).update(text)

    def _info_line(self) -> None:
        chart = self.chart
        at = chart.time_of(chart.cursor)
        parts = [f"cursor {at:.2f} s"]
        chosen = chart.selection()
        if chosen is not None:
            parts.append(f"selecting {chart.time_of(chosen[0]):.2f}-"
                         f"{chart.time_of(chosen[1] + 1):.2f} s (Enter: show it)")
        span = getattr(self.app, "time_range", None)
        if span is not None:
            whole = self._whole()
            unit = whole.metrics[self.metric].unit if whole is not None else "count"
            shown = getattr(self.app, "profile", None)
            cost = shown.total(self.metric) if shown is not None else 0.0
            parts.append(f"shown: {span[0]:.2f}-{span[1]:.2f} s, "
                         f"{format_cost(cost, unit)} (Esc: whole run; b: make it the baseline)")
        self._info(" · ".join(parts))

    # -- actions ---------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        chart = self.chart
        chart.cursor = max(0, min(chart.columns - 1, chart.cursor + step))
        chart.refresh()
        self._info_line()

    def action_select(self) -> None:
        chart = self.chart
        if chart.rows is None:
            self.notify("no timeline in this profile")
            return
        chosen = chart.selection()
        if chosen is None:
            chart.mark_start = chart.cursor
            chart.refresh()
            self._info_line()
            return
        chart.mark_start = None
        self._apply(chart.time_of(chosen[0]), chart.time_of(chosen[1] + 1))

    def _apply(self, start: float, end: float) -> None:
        """Show `start`-`end` seconds everywhere, widened to whole slices (what a
        range holds, and so what the header says)."""
        whole = self._whole()
        if whole is not None and whole.slices is not None:
            width = whole.slices.width
            start, end = width * int(start // width), width * -int(-end // width)
        setter = getattr(self.app, "set_time_range", None)
        if setter is not None:
            setter((start, end))
        self._redraw()

    async def action_clear(self) -> None:
        chart = self.chart
        if chart.mark_start is not None:
            chart.mark_start = None
            chart.refresh()
            self._info_line()
        elif getattr(self.app, "time_range", None) is not None:
            self.app.set_time_range(None)  # type: ignore[attr-defined]
            self._redraw()
        else:
            await self.app.run_action("back")

    def on_timeline_chart_picked(self, message: TimelineChart.Picked) -> None:
        chart = self.chart
        self._apply(chart.time_of(message.first), chart.time_of(message.last + 1))
