"""The flat profile's table: a Line API view that renders only the visible rows.

Textual's DataTable costs ~0.3 ms per visible cell and ~0.1 ms per added row;
this table formats a row only when it is drawn, so 50,000 functions scroll,
sort and filter within a frame.  Row data is `FlatEntry`; the pane owns the
order and the filter, the table owns the cursor.

With a baseline (`open --base`, a live mark) two more columns show each
function's change, ΔSelf and ΔTotal (`collectors.model.diffviews`): points of
each profile's total or cost units, red where it grew, blue where it shrank;
functions only one side has are tagged "new" or "gone".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from operator import attrgetter, is_not
from typing import ClassVar

from proftui.collectors.model.diffviews import GONE, NEW, FunctionChange
from proftui.collectors.model.profile import Metric
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry, function_of
from proftui.tui.format import format_cost, heat_style, metric_word, percent
from proftui.tui.names import Fitter, Labeler
from proftui.tui.widgets.cursor_keys import cursor_bindings
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

# Loops over every row (50,000 on a big profile) stay in C: a key filtering or sorting
# the table redoes them, and Python-level loops cost tens of ms each.
_CALLS = attrgetter("calls")
_NOT_NONE = partial(is_not, None)

# (sort key, header, width); the function column takes what is left.
# The Δ columns (sort keys "dself", "dtotal") have width only with a baseline.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("self", "Self%", 7), ("self", "Self", 10), ("total", "Total%", 7), ("total", "Total", 10),
    ("calls", "Calls", 12), ("dself", "ΔSelf", 10), ("dtotal", "ΔTotal", 10),
    ("name", "Function", 0), ("module", "Module", 22),
)
COSTS = (1, 3)  # indexes of the Self and Total columns: their titles name the metric
DSELF, DTOTAL = 5, 6  # indexes of the Δ columns
NAME = 7  # index of the function column
MODULE = 8
NAME_WANTED = 44  # the function column narrows the others until it has this much
# How the other columns give way to the function column on a narrow screen, in order:
# the module first, then a character of padding from each number, then the module again.
SHRINK: tuple[tuple[int, int], ...] = (
    (MODULE, 14), (0, 6), (2, 6), (1, 9), (3, 9), (4, 10), (DSELF, 8), (DTOTAL, 8),
    (MODULE, 10), (MODULE, 0),
)
GROWN, SHRUNK = Style(color="red", bold=True), Style(color="blue", bold=True)
TAGS = {NEW: " new", GONE: " gone"}
HEADER_STYLE = Style(bold=True, reverse=True)


class _Fit:
    """One width's fitted labels: the fitter, the functions it has, and the universe
    (FlatTable.universe) last found to hold no other function."""

    __slots__ = ("checked", "fitter", "names")

    def __init__(self) -> None:
        self.fitter = Fitter()
        self.names: set[str] = set()
        self.checked: object = None


class FlatTable(ScrollView, can_focus=True):
    """Rows of `FlatEntry` under a fixed header; Enter posts `Drill`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "drill", "Callers/callees"),
        *cursor_bindings("page(-1)", "page(1)"),
    ]

    # Cursor and zebra colours come from the theme (proftui.tcss).
    COMPONENT_CLASSES: ClassVar[set[str]] = {"flat-table--cursor", "flat-table--zebra"}

    cursor_row: reactive[int] = reactive(0)

    class Drill(Message):
        """Enter on a row."""

    class Highlighted(Message):
        """The cursor moved to another row (or the rows changed under it)."""

    class SortClicked(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows: Sequence[FlatEntry] = ()
        self.metric = 0
        self.unit = "count"
        self.whole = 0.0
        self.sort_key = "self"
        self.descending = True
        self.name_mode = "full"  # tui.names.MODES
        self.labeler = Labeler("full", display)  # names -> shown labels, distinct
        # Every row a sort or filter of this profile can show (`rows` is part of it): its
        # names are labelled and fitted once, not again on each sort or filter key.
        self.universe: Sequence[FlatEntry] = ()
        self._labelled: object = None  # the universe whose names the labeler has
        # Labels cut to the name column, per width (a filter can change the column's width,
        # and clearing it must not fit 50,000 labels anew: 0.3 s); the last used last.
        self._fits: dict[int, _Fit] = {}
        self._fit = _Fit()
        self._fitted_for: tuple[int, int] | None = None  # (id(rows), width) checked last
        self.has_calls = True  # no row has a call count: the Calls column is left out
        self.changes: dict[int, FunctionChange] | None = None  # by frame id; None: no Δ
        self.word = ""  # the metric shown, as the cost columns' titles name it
        self.normalise = "shares"  # collectors.model.diffviews.NORMALISATIONS

    @property
    def fitter(self) -> Fitter:
        """Labels cut to the name column's width as last drawn."""
        return self._fit.fitter

    def set_rows(self, rows: Sequence[FlatEntry], metric: int, metrics: Sequence[Metric],
                 whole: float, sort_key: str, descending: bool, cursor: int = 0,
                 changes: dict[int, FunctionChange] | None = None,
                 normalise: str = "shares",
                 universe: Sequence[FlatEntry] | None = None) -> None:
        """Show `rows`; `changes` (by frame id) adds the Δ columns, in `normalise` units.

        `universe` holds every row that a sort or filter of the same profile shows
        (default: `rows`); pass the same object each time to skip looking for new names."""
        self.rows = rows
        self.universe = rows if universe is None else universe
        self.changes, self.normalise = changes, normalise
        self.metric = metric
        self.unit = metrics[metric].unit if metrics else "count"
        self.word = metric_word(metrics[metric]) if metrics else ""  # named in the titles
        self.whole = whole
        self.sort_key, self.descending = sort_key, descending
        self.has_calls = any(map(_NOT_NONE, map(_CALLS, rows)))
        self._label_rows()
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        self.set_reactive(FlatTable.cursor_row, min(max(0, cursor), max(0, len(rows) - 1)))
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.Highlighted())

    def set_name_mode(self, mode: str) -> None:
        """Show names in `mode` (tui.names.MODES)."""
        self.name_mode = mode
        self._label_rows()
        self.refresh()

    def _label_rows(self) -> None:
        self._fitted_for = None
        if self.labeler.mode != self.name_mode:
            self.labeler = Labeler(self.name_mode, display)
            self._labelled = None
            self._forget_fits()
        if self.name_mode != "full" and self._labelled is not self.universe:
            # new names only: a live snapshot repeats the others
            known = self.labeler.known
            self.labeler.add(map(function_of, self.universe))
            self._labelled = self.universe
            if self.labeler.known != known:
                self._forget_fits()  # a group that grew shows its names another way

    def _forget_fits(self) -> None:
        self._fits.clear()
        self._fit = _Fit()
        self._fitted_for = None

    def label(self, e: FlatEntry) -> str:
        """The row's name as shown (before fitting it to the column)."""
        if self.name_mode == "full":
            return display(e.frame.function)  # no escape sequences or lone surrogates
        return self.labeler.label(e.frame.function)

    # -- geometry -------------------------------------------------------------------

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_cursor_into_view(self) -> None:
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + self._page:
            self.scroll_to(y=self.cursor_row - self._page + 1, animate=False, immediate=True)

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.Highlighted())

    def move_cursor(self, row: int) -> None:
        if self.rows:
            self.cursor_row = min(max(0, row), len(self.rows) - 1)

    def _widths(self, width: int) -> list[int]:
        """Column widths for `width` cells: numbers and module give way to the name."""
        widths = [w for _, _, w in COLUMNS]
        for column in COSTS:  # room for "Total allocated▼"
            widths[column] = max(widths[column], len(f"{COLUMNS[column][1]} {self.word}") + 2)
        if not self.has_calls:
            widths[4] = 0
        if self.changes is None:
            widths[DSELF] = widths[DTOTAL] = 0
        for column, narrower in SHRINK:
            if width - sum(widths) - 1 >= NAME_WANTED or (narrower == 0 and width >= 72):
                break  # the module column goes only on a screen narrower than 72
            widths[column] = min(widths[column], narrower) if widths[column] else 0
        widths[NAME] = max(12, width - sum(widths) - 1)
        return widths

    # -- drawing --------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        widths = self._widths(width)
        if y == 0:
            text = Text(no_wrap=True, end="")
            arrow = "▼" if self.descending else "▲"
            for (key, label, _), w in zip(COLUMNS, widths, strict=True):
                if not w:
                    continue
                active = key == self.sort_key and label not in ("Self%", "Total%")
                mark = arrow if active else ""
                cell = f"{label}{mark}"
                if label in ("Self", "Total") and self.word:  # the metric, named
                    cell = f"{label} {self.word}{mark}"
                    if len(cell) > w - 1:
                        cell = self.word[:max(0, w - 1 - len(mark))] + mark
                if key in ("dself", "dtotal") and self.normalise == "shares" \
                        and len(cell) + 3 <= w - 1:
                    cell = f"{label} pt{mark}"  # percentage points of each profile's total
                text.append(cell.rjust(w - 1) + " " if w and label not in ("Function", "Module")
                            else " " + cell.ljust(w - 1), style="underline" if active else "")
            return self._strip(text, width, HEADER_STYLE)
        index = self.scroll_offset.y + y - 1
        if index >= len(self.rows):
            return Strip.blank(width)
        room = self._name_room(widths)
        if self._fitted_for != (id(self.rows), room):
            self._fitted_for = (id(self.rows), room)
            self._fit_names(room)
        text = self._row_text(self.rows[index], widths)
        base = self.get_component_rich_style("flat-table--cursor") if index == self.cursor_row \
            else self.get_component_rich_style("flat-table--zebra") if index % 2 \
            else self.rich_style
        return self._strip(text, width, base)

    def _fit_names(self, room: int) -> None:
        """Fit every row's label to `room` characters, not just the visible rows': two
        rows far apart must not read the same either (new labels only: a sort, a filter
        or a live snapshot repeats the rest)."""
        fit = self._fits.pop(room, None) or _Fit()
        self._fits[room] = self._fit = fit  # the last used last
        while len(self._fits) > 4:
            del self._fits[next(iter(self._fits))]
        if fit.checked is self.universe:
            return  # every row a sort or filter can show is fitted at this width
        rows, names = self.rows, fit.names
        if not names.issuperset(map(function_of, rows)):
            new = [e for e in rows if e.frame.function not in names]
            names.update(map(function_of, new))
            if fit.fitter.add((self.label(e) for e in new), room):
                self.refresh()  # a row drawn already is now cut another way
        if len(rows) == len(self.universe):  # rows are part of it: all of it
            fit.checked = self.universe

    def _strip(self, text: Text, width: int, base: Style) -> Strip:
        text.truncate(width, pad=True)
        segments = list(text.render(self.app.console))
        strip = Strip(segments).crop(self.scroll_offset.x, self.scroll_offset.x + width)
        return strip.apply_style(base) if base else strip

    def _row_text(self, e: FlatEntry, widths: list[int]) -> Text:
        m = self.metric
        self_pct = percent(e.self_cost[m], self.whole)
        total_pct = percent(e.total_cost[m], self.whole)
        text = Text(no_wrap=True, end="")
        w_sp, w_s, w_tp, w_t, w_c = (w - 1 for w in widths[:5])
        if e.self_cost[m] > 0:
            text.append(f"{self_pct:{w_sp}.1f} ", style=heat_style(self_pct / 100))
            text.append(f"{format_cost(e.self_cost[m], self.unit):>{w_s}} ")
        else:  # no self cost: a dash reads faster than "0.0  0ns"
            text.append(f"{'-':>{w_sp}} {'-':>{w_s}} ", style="dim")
        text.append(f"{total_pct:{w_tp}.1f} ", style=heat_style(total_pct / 100))
        text.append(f"{format_cost(e.total_cost[m], self.unit):>{w_t}} ")
        if widths[4]:
            text.append(f"{'' if e.calls is None else f'{e.calls:,}':>{w_c}} ", style="cyan")
        tag = ""
        if self.changes is not None:
            change = self.changes.get(e.frame_id)
            for value, w in ((change.self_delta if change else 0.0, widths[DSELF]),
                             (change.total_delta if change else 0.0, widths[DTOTAL])):
                if w:
                    text.append(self.delta_cell(value, w - 1) + " ",
                                style=GROWN if value > 0 else SHRUNK if value < 0 else "dim")
            tag = TAGS.get(change.status, "") if change is not None else ""
        w = widths[NAME]
        # cut in the middle (the method stays visible), distinct from every other row
        name = self.fitter.get(self.label(e), self._name_room(widths))
        text.append(f" {name}", style="bold" if self_pct >= 1 else "")
        text.append(tag, style="italic green" if tag == TAGS[NEW] else "italic dim")
        text.append(" " * max(0, w - 1 - len(name) - len(tag)))
        if widths[MODULE]:
            text.append(f" {display(e.frame.module_name)}"[: widths[MODULE]], style="dim")
        return text

    def _name_room(self, widths: list[int]) -> int:
        """Characters a name may take: its column, less a "new"/"gone" tag's room."""
        return max(1, widths[NAME] - 1 - (max(map(len, TAGS.values())) if self.changes
                                          is not None else 0))

    def delta_cell(self, value: float, width: int) -> str:
        """A change as shown: "+12.3" points, or "+1.20s" in the metric's unit."""
        if abs(value) < 1e-9:
            return f"{'·':>{width}}"
        if self.normalise == "shares":
            return f"{value:>+{width}.1f}"
        sign = "+" if value > 0 else "-"
        return f"{sign}{format_cost(abs(value), self.unit)}".rjust(width)

    # -- input ----------------------------------------------------------------------

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * self._page)

    def action_drill(self) -> None:
        if self.rows:
            self.post_message(self.Drill())

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + self.scroll_offset.x
            for (key, _label, _), w in zip(COLUMNS, self._widths(self.size.width), strict=True):
                if w and x < w:
                    if key != "module":
                        self.post_message(self.SortClicked(key))
                    return
                x -= w
            return
        self.move_cursor(self.scroll_offset.y + offset.y - 1)
