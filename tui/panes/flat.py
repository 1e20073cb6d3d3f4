"""Flat profile pane: every function with self/total cost, sortable and filterable.

All functions are listed (the table draws only visible rows); `s` cycles the
sort column, `S` reverses it, `/` filters by name (a regular expression,
case-insensitive unless it has a capital letter; an invalid one matches as a
substring and says so).

With a baseline (the app's `baseline`: `open --base`, a live mark) the table
gains ΔSelf and ΔTotal, sorted by the largest change first; the baseline's
functions this profile lacks are listed too, marked "gone".
"""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import attrgetter, eq, is_, is_not, itemgetter
from typing import Any, ClassVar

from proftui.collectors.model.diffviews import FunctionChange, function_changes, gone_entries
from proftui.collectors.model.parts import describe_part, part_total
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry, flat_profile, function_of
from proftui.tui.panes.base import Command, NavState, Pane, drill
from proftui.tui.search import NameMatcher, narrows
from proftui.tui.widgets.flat_table import FlatTable
from proftui.tui.widgets.status_line import NameSelected, SettingChanged, tell_selection
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input, Static

SORTS = ("self", "total", "calls", "name")
DELTA_SORTS = ("dself", "dtotal")  # by the size of the change, grown or shrunk
# Per-row fields, read by C-level maps (50,000 rows: a Python loop per key costs tens of ms).
_FRAME, _FRAME_ID, _CALLS = attrgetter("frame"), attrgetter("frame_id"), attrgetter("calls")
_SELF_COST, _TOTAL_COST = attrgetter("self_cost"), attrgetter("total_cost")
_SELF_DELTA, _TOTAL_DELTA = attrgetter("self_delta"), attrgetter("total_delta")
SORT_NAMES = {"self": "self", "total": "total", "calls": "calls", "name": "function name",
              "dself": "|Δself|", "dtotal": "|Δtotal|"}


class FilterInput(Input):
    """The `/` filter box; Enter or Escape return to the table, keeping the filter (Escape
    on the table then clears it)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "done", "Close filter", show=True)]

    def action_done(self) -> None:
        pane = self.parent
        if isinstance(pane, FlatPane):
            pane.close_filter()


class FlatPane(Pane, Vertical):
    """Flat profile; Enter on a function drills into its callers and callees."""

    KEY, PANE_ID, TITLE, TAB = "1", "flat", "Flat profile", "Flat"
    HINT = "Every function, sortable"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort column"),
        Binding("S", "reverse", "Reverse sort", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="Clear the name filter (without one: back, as everywhere)"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.profile: Profile | None = None
        self.entries: list[FlatEntry] = []
        self.shown: list[FlatEntry] = []
        self.metric = 0
        self.sort_key = "self"
        self.descending = True
        self.filter_text = ""
        self._dirty = False
        self.changes: dict[int, FunctionChange] | None = None  # Δ by frame id (a baseline)
        self._plain_sort: tuple[str, bool] | None = None  # the sort before Δ sorts took over
        # ((entries, base entries, metric, normalise), rows, changes) last computed
        self._diff_cache: tuple[tuple[object, ...], list[FlatEntry],
                                dict[int, FunctionChange]] | None = None
        # ((entries, changes, sort key, descending, metric), every row in that order,
        # their function names)
        self._sort_cache: tuple[tuple[object, ...], list[FlatEntry], list[str]] | None = None
        # (pattern, the sorted rows it filtered, the rows that matched, their names)
        self._filter_cache: tuple[str, list[FlatEntry], list[FlatEntry], list[str]] | None \
            = None

    def compose(self) -> ComposeResult:
        yield FilterInput(placeholder="filter functions (regex; case-insensitive if lowercase)",
                          id="flat-filter")
        yield FlatTable(id="flat-table")
        yield Static(" loading the profile…", id="flat-status")

    def on_mount(self) -> None:
        self.query_one(FilterInput).display = False

    # -- data ----------------------------------------------------------------------

    def set_profile(self, profile: Profile, entries: list[FlatEntry] | None = None,
                    metric: int = 0) -> None:
        """Show `profile` (entries precomputed by a worker, or computed here)."""
        self.profile = profile
        self.metric = metric
        self.entries = entries if entries is not None else flat_profile(profile, self.part)
        self.refresh_rows()

    # -- pane hooks (tui.panes.base.Pane) --------------------------------------------

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        self.set_profile(profile, entries, metric)  # hidden: redrawn when shown

    def focus_widget(self) -> Widget | None:
        return self.query_one(FlatTable)

    def commands(self) -> list[Command]:
        return [("Filter functions (/)", "Filter the flat profile by name", self.action_filter),
                ("Sort column (s)", "Sort the flat profile by the next column",
                 self.action_sort)]

    def selected_frame(self) -> Frame | None:
        row = self.query_one(FlatTable).cursor_row
        return self.shown[row].frame if 0 <= row < len(self.shown) else None

    def _diff_rows(self) -> list[FlatEntry]:
        """The rows with the baseline's gone functions; sets `changes` (None: no baseline)
        and switches to the Δ sort when a baseline appears (back when it goes)."""
        app = self.app
        baseline = getattr(app, "baseline", None)
        base_entries = getattr(app, "base_entries", None)
        if baseline is None or base_entries is None or self.profile is None:
            self.changes = None
            if self._plain_sort is not None:
                self.sort_key, self.descending = self._plain_sort
                self._plain_sort = None
            return list(self.entries)
        if self._plain_sort is None:
            self._plain_sort = (self.sort_key, self.descending)
            if self.sort_key not in DELTA_SORTS:
                self.sort_key, self.descending = "dself", True
        normalise = getattr(app, "normalise", "shares")
        key = (self.entries, base_entries, self.metric, normalise)
        cached = self._diff_cache
        if cached is not None and cached[0][0] is key[0] and cached[0][1] is key[1] \
                and cached[0][2:] == key[2:]:
            self.changes = cached[2]
            return list(cached[1])
        # O(functions): once per profile, metric or normalisation, not per key (filter, sort).
        if cached is not None and cached[0][0] is key[0] and cached[0][1] is key[1]:
            rows = cached[1]  # the same rows (function_changes remembers them: `a` back)
        else:
            rows = list(self.entries) + gone_entries(self.entries, base_entries,
                                                     len(self.profile.metrics))
        self.changes = function_changes(
            rows, base_entries, self.metric, part_total(self.profile, self.part, self.metric),
            part_total(baseline, self.part, self.metric), normalise)
        self._diff_cache = (key, rows, self.changes)
        return list(rows)

    def _ordered(self) -> list[FlatEntry]:
        """The rows shown: every function sorted (once per rows, sort and metric), then
        filtered (a keystroke that lengthens a literal pattern looks at the last matches
        only: each one matches the shorter pattern too)."""
        every = self._diff_rows()
        if self.changes is None and self.sort_key in DELTA_SORTS:
            self.sort_key = "self"  # no baseline any more
        key = (self.entries, self.changes, self.sort_key, self.descending, self.metric)
        cached = self._sort_cache
        if cached is None or cached[0][0] is not key[0] or cached[0][1] is not key[1] \
                or cached[0][2:] != key[2:]:
            rows = self._sorted(every)
            self._sort_cache = cached = (key, rows, list(map(function_of, rows)))
        ordered = cached[1]
        if not self.filter_text:
            return list(ordered)
        pool, names = ordered, cached[2]
        last = self._filter_cache
        if last is not None and last[1] is ordered and narrows(last[0], self.filter_text):
            pool, names = last[2], last[3]
        found = NameMatcher(self.filter_text).each(names)
        rows = list(compress(pool, found))
        self._filter_cache = (self.filter_text, ordered, rows, list(compress(names, found)))
        return list(rows)

    def _sorted(self, rows: list[FlatEntry]) -> list[FlatEntry]:
        """`rows` in the pane's sort order (a stable sort: ties keep the model's order)."""
        # The keys are gathered by C-level maps and the rows' indexes sorted by them: a
        # Python key function per row cost ~20 ms a sort at 50,000 functions.
        at = itemgetter(self.metric)
        keys: list[Any]
        changes = self.changes
        if changes is not None and self.sort_key in DELTA_SORTS:
            zero = FunctionChange(0.0, 0.0, "")
            found = list(map(changes.get, map(_FRAME_ID, rows), repeat(zero)))
            total = list(map(abs, map(_TOTAL_DELTA, found)))
            keys = (list(zip(map(abs, map(_SELF_DELTA, found)), total, strict=True))
                    if self.sort_key == "dself" else total)
        elif self.sort_key == "name":
            keys = list(map(function_of, rows))
        elif self.sort_key == "calls":
            keys = [calls or 0 for calls in map(_CALLS, rows)]
        elif self.sort_key == "total":
            keys = list(map(at, map(_TOTAL_COST, rows)))
        else:  # by self, then total: two stable sorts, no key tuple per row
            totals = list(map(at, map(_TOTAL_COST, rows)))
            order = sorted(range(len(rows)), key=totals.__getitem__, reverse=self.descending)
            keys = list(map(at, map(_SELF_COST, rows)))
            order.sort(key=keys.__getitem__, reverse=self.descending)
            return list(map(rows.__getitem__, order))
        order = sorted(range(len(rows)), key=keys.__getitem__, reverse=self.descending)
        return list(map(rows.__getitem__, order))

    def refresh_rows(self) -> None:
        """Re-sort and redraw, keeping the cursor on the same function."""
        if self.profile is None:
            return
        if not self.display or not self.is_mounted:
            self._dirty = True
            return
        self._dirty = False
        keep = self.selected_frame()
        self.shown = self._ordered()
        cursor = 0
        if keep is not None:  # the same Frame object, else an equal one (a new snapshot)
            frames = list(map(_FRAME, self.shown))
            same = next(compress(count(), map(is_, frames, repeat(keep))), None)
            cursor = same if same is not None else \
                next(compress(count(), map(eq, frames, repeat(keep))), 0)
        profile = self.profile
        whole = part_total(profile, self.part, self.metric)  # percents of the thread shown
        # Every row a sort or filter can show, the same object until the rows change.
        diffed = self._diff_cache
        universe = diffed[1] if self.changes is not None and diffed is not None else self.entries
        self.query_one(FlatTable).set_rows(self.shown, self.metric, profile.metrics, whole,
                                           self.sort_key, self.descending, cursor, self.changes,
                                           getattr(self.app, "normalise", "shares"), universe)
        status = f" {len(self.shown):,} of {len(self.entries):,} functions"
        if self.changes is not None:
            gone = sum(1 for c in self.changes.values() if c.status == "gone")
            status = f" {len(self.shown):,} of {len(self.entries) + gone:,} functions"
        if self.filter_text:
            matcher = NameMatcher(self.filter_text)
            status += f" matching '{self.filter_text}'"
            if matcher.error:
                status += f" (invalid regex: {matcher.error}; substring match)"
        if self.part is not None:
            status += f" in {display(describe_part(profile, self.part).title())}"
        status += f" · sorted by {SORT_NAMES[self.sort_key]}"
        if profile.meta.warnings:
            notes = len(profile.meta.warnings)
            status += f" · {notes} note{'s' if notes > 1 else ''} (w): {profile.meta.warnings[0]}"
        width = max(20, (self.size.width or self.app.size.width) - 1)
        if len(status) > width:
            status = status[: width - 1] + "…"
        self.query_one("#flat-status", Static).update(status)

    def on_show(self) -> None:
        if self._dirty:
            self.refresh_rows()

    # -- actions -------------------------------------------------------------------

    def set_name_mode(self, mode: str) -> None:
        """Show function names in `mode` (tui.names.MODES)."""
        self.query_one(FlatTable).set_name_mode(mode)

    @on(FlatTable.Highlighted)
    def _highlighted(self) -> None:
        tell_selection(self, NameSelected(self.PANE_ID, self.selected_frame()))

    @on(FlatTable.Drill)
    def drill(self) -> None:
        frame = self.selected_frame()
        if frame is not None:
            self.post_message(drill("tree", tree_view="focus", focus=frame))

    def action_sort(self) -> None:
        # No Calls column (sampler, attach: no row has a call count): skip sorting by it.
        has_calls = any(map(is_not, map(_CALLS, self.entries), repeat(None)))
        sorts = [key for key in SORTS if key != "calls" or has_calls]
        if self.changes is not None:
            sorts = [*DELTA_SORTS, *sorts]
        at = sorts.index(self.sort_key) if self.sort_key in sorts else -1
        self.sort_key = sorts[(at + 1) % len(sorts)]
        self.descending = self.sort_key != "name"
        self.refresh_rows()
        self.post_message(SettingChanged())

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.refresh_rows()
        self.post_message(SettingChanged())

    @on(FlatTable.SortClicked)
    def _sort_clicked(self, event: FlatTable.SortClicked) -> None:
        if event.key == self.sort_key:
            self.descending = not self.descending
        else:
            self.sort_key, self.descending = event.key, event.key != "name"
        self.refresh_rows()
        self.post_message(SettingChanged())

    def action_filter(self) -> None:
        box = self.query_one(FilterInput)
        box.display = True
        box.focus()

    def close_filter(self) -> None:
        box = self.query_one(FilterInput)
        if not box.value:
            box.display = False
        self.query_one(FlatTable).focus()

    def clear_filter(self) -> None:
        """Drop the name filter and go back to the table."""
        box = self.query_one(FilterInput)
        box.value = ""
        self.filter_text = ""
        box.display = False
        self.refresh_rows()
        self.query_one(FlatTable).focus()

    async def action_clear_filter(self) -> None:
        if self.filter_text:
            self.clear_filter()
        else:
            await self.app.run_action("back")

    @on(Input.Changed, "#flat-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if event.value == self.filter_text:
            return  # already shown: clear_filter set it (the rows were refreshed once)
        self.filter_text = event.value
        self.refresh_rows()

    @on(Input.Submitted, "#flat-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.close_filter()
