"""The app's diff views: what the Δ columns compare with, and the keys that choose it.

A baseline is either a profile given at start (`proftui open NEW --base BASE`),
a live mark (`b`: a snapshot of the run so far), a range of the timeline (`b`
with a range shown) or a part (`b` in the thread picker: a thread, a process, or
a host or build of a fleet profile, which any part shown next compares with).  `B` shows the whole
profile or the phase since the mark (`diff.subtract`), `x` forgets the mark, `a`
switches the Δ columns between shares and absolute units.  Whatever is
compared, `baseline` is it aligned onto the shown profile (`diff.align`), so
panes line rows up by frame id; `normalise` says how to compare.  Both are
read by panes with getattr (the flat profile, the tree, the flame graph).

The alignment walks both trees: it runs in the app's workers (the live poll
and `_prepare`), never on the UI thread, and the last one is kept so that a
thread or metric change does not redo it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from proftui.collectors.base import Collector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.diff import align, subtract
from proftui.collectors.model.parts import part_profile
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.slices import range_note, range_profile, span_text
from proftui.collectors.model.views import FlatEntry, flat_profile
from proftui.tui.widgets.header_bar import since
from proftui.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object

# (the baseline profile, since the mark?, the time range shown: seconds of the run)
ViewKey = tuple[Profile | None, bool, tuple[float, float] | None]


def _same(a: ViewKey, b: ViewKey) -> bool:
    """One key: the same baseline object (profiles compare by identity), phase and range."""
    return a[0] is b[0] and a[1] == b[1] and a[2] == b[2]


@dataclass(frozen=True)
class Views:
    """What the panes show of one whole profile: the profile shown (the whole, or the
    phase since a live mark), its flat profile, and the baseline aligned onto it."""

    shown: Profile
    entries: list[FlatEntry]
    baseline: Profile | None
    base_entries: list[FlatEntry] | None
    key: ViewKey


class DiffViews(_Base):
    """Mixin of ProfTuiApp: the baseline state, its header text and its keys."""

    collector: Collector | None
    profile: Profile | None
    ended: bool
    part: str | None
    _whole: Profile | None
    _entries: list[FlatEntry]

    if TYPE_CHECKING:  # ProfTuiApp's, which this mixin calls
        nav: list[Any]

        def pane(self, pane_id: str) -> Any: ...
        def _apply(self, profile: Profile, entries: list[FlatEntry]) -> None: ...
        def _update_header(self) -> None: ...
        def _prepare(self, profile: Profile, part: str | None) -> object: ...
        def wake_poll(self) -> None: ...

    def init_diff(self, base: Profile | None, base_name: str) -> None:
        """No baseline yet; `base` (named `base_name`) is the profile to compare with."""
        self.base_profile = base
        self.base_name = base_name
        self.show_base = True  # `B` with --base: Δ columns on or off
        self.baseline: Profile | None = None
        self.base_entries: list[FlatEntry] | None = None  # flat profile of `baseline`
        self.normalise = "shares"  # or "absolute"
        self._mark: Profile | None = None  # the whole profile when `b` was pressed
        self._mark_at = ""  # "12.3 s" into the run
        # Unix time `b` was pressed, until the poll worker takes the mark's snapshot
        # (read and cleared by that worker: a plain attribute swap is atomic enough)
        self.mark_request: float | None = None
        self.since_mark = False  # `B`: show the phase since the mark
        # The time range shown (seconds of the run: the timeline's selection), a range
        # marked as the baseline (`b` with a range shown) and what the header calls it.
        self.time_range: tuple[float, float] | None = None
        self._range_mark: Profile | None = None
        self._range_mark_text = ""
        self._views_cache: tuple[Profile, ViewKey, Profile, Profile | None] | None = None
        # the last range asked of a fleet profile's source: (whole, span, its profile)
        self._queried_range: tuple[Profile, tuple[float, float], Profile] | None = None
        # A part marked as the baseline (`b` in the picker): the profile it was in, its
        # label (None: all), what the header calls it, and its profile per part shown.
        self._part_mark: Profile | None = None
        self._part_mark_label: str | None = None
        self._part_mark_text = ""
        self._part_bases: dict[str | None, Profile] = {}

    # -- the views (in workers) ------------------------------------------------------

    def _view_key(self) -> ViewKey:
        """What the views derive from besides the whole profile."""
        if self._mark is not None and self.since_mark:
            return self._mark, True, self.time_range
        if self._part_mark is not None:
            return self._part_mark, False, self.time_range
        if self._range_mark is not None:
            return self._range_mark, False, self.time_range
        if self.base_profile is not None and self.show_base:
            return self.base_profile, False, self.time_range
        return None, False, self.time_range

    def current_views(self, views: Views) -> bool:
        """`views` were derived for the baseline and phase chosen now."""
        key = self._view_key()
        if key[0] is not None and key[0] is self._part_mark:
            bases = self._part_bases.values()
            return any(b is views.key[0] for b in bases) and views.key[1:] == key[1:]
        return _same(views.key, key)

    def _views(self, whole: Profile, part: str | None, key: ViewKey) -> Views:
        """The shown profile, baseline and flat profiles of `whole` (a worker calls it)."""
        base, since_mark, span = key
        if base is not None and base is self._part_mark:
            base = self._part_base(base, part)
            key = (base, since_mark, span)  # a part's baseline is made per part shown
        cached = self._views_cache
        if cached is not None and cached[0] is whole and _same(cached[1], key):
            shown, baseline = cached[2], cached[3]
        else:
            shown = self._range_of(whole, span) if span is not None and \
                whole.slices is not None else whole
            shown = subtract(shown, base) if since_mark and base is not None else shown
            baseline = align(base, shown) if base is not None else None
            self._views_cache = (whole, key, shown, baseline)
        return Views(shown, flat_profile(shown, part), baseline,
                     flat_profile(baseline, part) if baseline is not None else None, key)

    def _part_base(self, marked: Profile, part: str | None) -> Profile:
        """The marked part as the baseline of `part` shown (made once per part)."""
        found = self._part_bases.get(part)
        if found is None:
            found = self._part_bases[part] = part_profile(marked, self._part_mark_label, part)
        return found

    def _range_of(self, whole: Profile, span: tuple[float, float]) -> Profile:
        """`span` seconds of `whole`: from its slices, or, for a fleet profile (its
        parts' totals only), a query of that window (`load_range`; a worker calls
        this).  A failed query drops the range, saying why."""
        slices = whole.slices
        assert slices is not None
        if not slices.totals_only:
            return range_profile(whole, *span)
        cached = self._queried(whole, span)
        if cached is not None:
            return cached  # the same range with another baseline: not asked again
        first, last = slices.used_span(*span)
        loader = getattr(self, "_load_range", None)
        try:
            if loader is None:
                raise ProftuiError("this profile's source cannot be asked for a time range")
            shown = loader(slices.start + first, slices.start + last)
        except ProftuiError as exc:
            self.call_from_thread(self._range_failed, str(exc))
            return whole
        note = range_note(slices, *span)
        shown = replace(shown, meta=replace(shown.meta, warnings=[*shown.meta.warnings, note]))
        self._queried_range = (whole, span, shown)
        return shown

    def _queried(self, whole: Profile, span: tuple[float, float] | None) -> Profile | None:
        """The profile a query gave for `span` of fleet profile `whole`, if it answered."""
        queried = self._queried_range
        if queried is None or queried[0] is not whole or queried[1] != span:
            return None
        return queried[2]

    def _range_failed(self, why: str) -> None:
        self.notify(f"time range not shown: {why}", severity="error")
        self.set_time_range(None)

    def _apply_views(self, whole: Profile, views: Views) -> None:
        self._whole = whole
        self.baseline, self.base_entries = views.baseline, views.base_entries
        self._apply(views.shown, views.entries)

    def _delta_text(self) -> str:
        """The header's word on the diff views: the range shown, what Δ compares with."""
        words = []
        if self.time_range is not None:
            words.append(f"range {span_text(self.time_range)}")
        if self._part_mark is not None:
            words.append(f"Δ vs {self._part_mark_text} ({self.normalise})")
        elif self._range_mark is not None:
            words.append(f"Δ vs {self._range_mark_text} ({self.normalise})")
        compared = self._compared_text()
        return " · ".join([*words, compared] if compared else words)

    def _compared_text(self) -> str:
        if self._range_mark is not None or self._part_mark is not None:
            return ""
        if self._mark is not None:
            if self.since_mark:
                return f"since mark at {self._mark_at} · Δ vs before it ({self.normalise})"
            return f"mark at {self._mark_at} (B: since the mark)"
        if self.base_profile is not None:
            if self.show_base:
                return f"Δ vs {self.base_name} ({self.normalise})"
            return f"base {self.base_name} hidden (B)"
        return ""

    # -- keys ------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        """Why a key did nothing (or what it did), in the status line and a notification."""
        pane = self.pane(self.nav[-1].pane)
        self.query_one(StatusLine).show(pane.selected_frame(), text)
        self.notify(text)

    def _views_changed(self) -> None:
        """The baseline or the shown phase changed: derive the views again (a worker)."""
        self._update_header()
        if self._whole is not None:
            self._prepare(self._whole, self.part)

    def set_time_range(self, span: tuple[float, float] | None) -> None:
        """Show only `span` (seconds of the run; None: the whole run) in every pane."""
        self.time_range = span
        self._views_changed()

    def action_mark(self) -> None:
        """`b`: snapshot the live profile as the baseline (again: re-mark); with a time
        range shown, that range becomes the baseline (two phases of one run compare)."""
        if self.time_range is not None and self._whole is not None:
            if self._whole.slices is None:
                self._say("this profile has no timeline: no range to mark")
                return
            if self._whole.slices.totals_only:  # the range's profile came from a query
                queried = self._queried(self._whole, self.time_range)
                if queried is None:
                    self._say("the range's query has not answered yet: b again once it shows")
                    return
                self._range_mark = queried
            else:
                self._range_mark = range_profile(self._whole, *self.time_range)
            self._range_mark_text = f"range {span_text(self.time_range)}"
            self.notify(f"baseline: {self._range_mark_text}; choose another range in the "
                        "timeline (6) to compare it with, x forgets it")
            self._views_changed()
            return
        if self.collector is None:
            self._say("b marks a baseline during a live run; to compare this saved "
                      "profile, open it with --base OTHER")
            return
        whole = self._whole
        if whole is None:
            self._say("no profile yet: nothing to mark")
            return
        if self.ended:
            self._say("the target has ended: nothing can happen after a mark now")
            return
        # The last snapshot shown may be seconds old (snapshots are paced by their cost):
        # the poll worker takes a fresh one now and `take_mark` keeps it.
        self.mark_request = time.time()
        self.wake_poll()

    def take_mark(self, whole: Profile, when: float) -> None:
        """Keep `whole`, snapshotted at Unix time `when` for a `b`, as the mark."""
        start = whole.meta.start_time
        self._mark_at = since(start, when) if start is not None else "?"
        # Snapshots are immutable: keep this one, stamped with the mark's time (the
        # since-mark profile starts there).
        self._mark = replace(whole, meta=replace(whole.meta, end_time=when))
        self.notify(f"baseline marked at {self._mark_at}"
                    + ("" if self.since_mark else ": B shows the change since"))
        self._views_changed()

    def action_since_mark(self) -> None:
        """`B`: the whole profile or the phase since the mark (with --base: Δ on or off)."""
        if self._mark is not None:
            self.since_mark = not self.since_mark
            self.notify("showing the phase since the mark" if self.since_mark
                        else "showing the whole profile")
        elif self.base_profile is not None:
            self.show_base = not self.show_base
            self.notify(f"Δ vs {self.base_name} " + ("shown" if self.show_base else "hidden"))
        elif self.collector is None:
            self._say("B shows the change since a live mark (b); a saved profile compares "
                      "with another through --base OTHER")
            return
        else:
            self._say("no mark yet: b marks a baseline, then B shows the change since")
            return
        self._views_changed()

    def mark_part(self, label: str | None, title: str) -> None:
        """Make part `label` (None: all) of the profile shown, called `title`, the
        baseline: the part shown next is compared with it (`b` in the picker)."""
        shown = self.profile
        if shown is None:
            self._say("no profile yet: nothing to mark")
            return
        self._part_mark, self._part_mark_label, self._part_bases = shown, label, {}
        when = f", range {span_text(self.time_range)}" if self.time_range is not None else ""
        self._part_mark_text = f"{title}{when}"
        self.notify(f"baseline: {self._part_mark_text}; t and Enter on another part compares "
                    "it, x forgets it")
        self._views_changed()

    def action_clear_mark(self) -> None:
        """`x`: forget the live mark (or the range or part marked as the baseline)."""
        if self._part_mark is not None:
            self._part_mark, self._part_mark_text, self._part_bases = None, "", {}
            self.notify("part baseline cleared")
            self._views_changed()
            return
        if self._range_mark is not None:
            self._range_mark, self._range_mark_text = None, ""
            self.notify("range baseline cleared")
            self._views_changed()
            return
        if self._mark is None:
            self._say("no baseline mark to clear (b marks one during a live run)")
            return
        self.clear_mark()
        self.notify("baseline mark cleared")
        self._views_changed()

    def clear_mark(self) -> None:
        """Forget the mark (the caller derives the views again)."""
        self._mark, self.since_mark, self._mark_at = None, False, ""
        self.mark_request = None

    def action_normalise(self) -> None:
        """`a`: Δ in points of each profile's total, or in the metric's units."""
        self.normalise = "absolute" if self.normalise == "shares" else "shares"
        if self.baseline is None:
            self._say(f"Δ columns in {self.normalise} (no baseline yet: b marks one live, "
                      "open --base compares two files)")
        else:
            self.notify(f"Δ in {self.normalise}")
        if self.profile is not None and self._entries:
            self._apply(self.profile, self._entries)
        self._update_header()

