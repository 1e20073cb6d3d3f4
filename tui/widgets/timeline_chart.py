"""The timeline chart: one row per thread, its activity per column of time, a cursor
and a selected range (hotspot's timeline, in text).

It is given each part's cost per time slice (`collectors.model.slices.Slices.
part_activity`) and draws them resampled to its width: a column sums the slices it
covers, shaded by eight block heights against the busiest cell.  The cursor and the
selection are columns; `time_of` turns a column into seconds of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from proftui.collectors.model.textsafe import display
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

BLOCKS = " ▁▂▃▄▅▆▇█"
# The label column at least; longer labels widen it, up to a third of the chart (a
# fleet's "part web1 clickhouse-server pid 29061" keeps its program's name).
LABEL_WIDTH = 22


def fit_label(text: str, width: int) -> str:
    """`text` in `width` columns: a longer one keeps its start and its end (a thread's
    or a process's number) around "…" in the middle."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


CURSOR = Style(reverse=True)
SELECTED = Style(bgcolor="grey30")
LABEL = Style(dim=True)


@dataclass(frozen=True)
class Rows:
    """What the chart draws: row labels, each row's cost per slice, seconds per slice."""

    labels: list[str]
    values: list[list[float]]
    slice_s: float

    @property
    def slices(self) -> int:
        return len(self.values[0]) if self.values else 0


class TimelineChart(Widget, can_focus=True):
    """Rows of shaded cells; `cursor` and `mark_start` (a selection's start) are columns."""

    DEFAULT_CSS = "TimelineChart { height: 1fr; }"

    @dataclass
    class Picked(Message):
        """A range dragged with the mouse: columns `first` to `last`, both included."""

        first: int
        last: int

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows: Rows | None = None
        self.cursor = 0
        self.mark_start: int | None = None  # a selection being made: from here to the cursor
        self.applied: tuple[int, int] | None = None  # the range shown, in columns
        self._cells: list[list[float]] = []
        self._cells_width = -1  # the width `_cells` were resampled for
        self._longest = 0  # the longest row label, in columns

    @property
    def label_width(self) -> int:
        """Columns before the cells: LABEL_WIDTH, or the longest label and a space, at
        most a third of the widget."""
        return max(LABEL_WIDTH, min(self._longest + 1, self.size.width // 3))

    @property
    def columns(self) -> int:
        return max(1, self.size.width - self.label_width)

    def set_rows(self, rows: Rows | None) -> None:
        self.rows = rows
        self._longest = max((len(display(label)) for label in rows.labels), default=0) \
            if rows is not None else 0
        self._cells_width = -1
        self.cursor = min(self.cursor, self.columns - 1)
        self.refresh()

    def _resample(self) -> None:
        """Each row summed into the columns the widget has now (done when drawn)."""
        rows = self.rows
        self._cells = []
        self._cells_width = self.size.width
        if rows is None or not rows.slices:
            return
        cols, n = self.columns, rows.slices
        for values in rows.values:
            if n <= cols:  # a slice spans whole columns
                cells = [values[x * n // cols] for x in range(cols)]
            else:  # a column sums its slices
                cells = [0.0] * cols
                for k, value in enumerate(values):
                    cells[k * cols // n] += value
            self._cells.append(cells)

    def seconds(self) -> float:
        """The run's length the chart spans."""
        return self.rows.slices * self.rows.slice_s if self.rows is not None else 0.0

    def time_of(self, column: int) -> float:
        """Seconds of the run at the start of `column`."""
        return self.seconds() * column / self.columns

    def selection(self) -> tuple[int, int] | None:
        """The columns being selected (mark_start to cursor, in order), if any."""
        if self.mark_start is None:
            return None
        return min(self.mark_start, self.cursor), max(self.mark_start, self.cursor)

    def _column_at(self, x: int) -> int | None:
        column = x - self.label_width
        return column if 0 <= column < self.columns else None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        column = self._column_at(event.x)
        if column is not None:
            self.cursor = self.mark_start = column
            self.refresh()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        column = self._column_at(event.x)
        if column is None or self.mark_start is None:
            return
        first, last = sorted((self.mark_start, column))
        self.cursor, self.mark_start = column, None
        self.refresh()
        if last > first:
            self.post_message(self.Picked(first, last))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, (len(self.rows.values) if self.rows is not None else 0) + 1)

    def render_line(self, y: int) -> Strip:
        if self._cells_width != self.size.width:
            self._resample()
        if y > len(self._cells):
            return Strip.blank(self.size.width)
        chosen = self.selection() or self.applied
        if y == len(self._cells):  # the cursor's marker under the rows
            line = " " * (self.label_width + self.cursor) + "▲"
            return Strip([Segment(line.ljust(self.size.width))])
        cells = self._cells[y]
        top = max((max(row) for row in self._cells), default=0.0) or 1.0
        label = display(self.rows.labels[y]) if self.rows is not None else ""
        width = self.label_width
        segments = [Segment(fit_label(label, width - 1).ljust(width), LABEL)]
        for x, value in enumerate(cells):
            char = BLOCKS[0] if value <= 0 else BLOCKS[max(1, round(8 * value / top))]
            style = Style()
            if chosen is not None and chosen[0] <= x <= chosen[1]:
                style = SELECTED
            if x == self.cursor and self.has_focus:
                style = CURSOR
            segments.append(Segment(char, style))
        return Strip(segments).extend_cell_length(self.size.width)
