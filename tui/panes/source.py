"""Annotated source pane: per-line (or per-instruction) self cost with heat colours.

The listing comes from the model (collectors/model/source.py: the line and
address costs recorded at collection time, the embedded or on-disk source);
it is computed in a thread worker because disassembly runs objdump
(collectors/annotate.py).  Three modes: the source file (`f` steps
through the files of the function's cost: headers it inlined), the
disassembly (`d`), and both interleaved (`i`: each source line followed by
its instructions, inline-aware).  `/`, `n`, `N` search the listing.  The
view itself is tui/widgets/source_view.py.

Live, the listing is refreshed with every snapshot: it opens at the hottest
line of the first snapshot that has costs for the function, and from then on
(or once the user moved) keeps the cursor and scroll position.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from proftui.collectors.annotate import annotate
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Listing, Prefer
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry
from proftui.tui.format import format_cost, metric_label, percent
from proftui.tui.names import fit, shorten
from proftui.tui.panes.base import Command, NavState, Pane
from proftui.tui.widgets.source_view import SourceView
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

__all__ = ["SearchInput", "SourcePane", "SourceView"]

MODE_NAMES: dict[str, str] = {"source": "source", "disassembly": "disassembly",
                              "interleaved": "source + disassembly"}


class SearchInput(Input):
    """The `/` prompt: Enter or Esc closes it (the search stays) and focus returns
    to the listing."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    class Closed(Message):
        """The prompt was closed (Esc)."""

    def action_close(self) -> None:
        self.post_message(self.Closed())

    def on_blur(self) -> None:
        # focus went elsewhere (a pane key through the palette, a click): no prompt is
        # left open without the focus
        self.post_message(self.Closed())


class SourcePane(Pane, Vertical):
    """Title line, the listing, the search prompt and its status; `show(frame)` loads in
    a worker."""

    KEY, PANE_ID, TITLE, TAB = "3", "source", "Source", "Source"
    HINT = "Annotated source of the selected function"

    DEFAULT_CSS = """
    SourcePane #source-view { height: 1fr; }
    SourcePane #source-search { display: none; height: 3; }
    SourcePane #source-search.open { display: block; }
    SourcePane #source-status { height: 1; color: $text-muted; display: none; }
    SourcePane #source-status.shown { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("n", "find(1)", "Next match", show=False),
        Binding("N", "find(-1)", "Prev match", show=False),
        Binding("d", "mode('disassembly')", "Asm"),
        Binding("i", "mode('interleaved')", "Src+asm"),
        Binding("f", "next_file", "Next file", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.profile: Profile | None = None
        self.frame: Frame | None = None
        self.metric = 0
        self.prefer: Prefer = "source"
        self.path: str | None = None  # the file shown in source mode (None: the function's own)
        self.loading_frame: Frame | None = None
        # the (frame, mode, file) whose cursor and scroll position are settled: the
        # hottest row of a listing with costs, or wherever the user moved; kept on refresh
        self._settled: tuple[Frame, str, str | None] | None = None
        self._search_origin = 0
        self._titled_part: str | None = None  # the thread the title was written for

    def compose(self) -> ComposeResult:
        yield Static("Select a function (Enter in the flat profile or tree) to see its source.",
                     id="source-title")
        yield SourceView(id="source-view")
        yield Static("", id="source-status")
        yield SearchInput(placeholder="search (regex; case-insensitive when all lower case)",
                          id="source-search")

    @property
    def listing(self) -> Listing | None:
        return self.query_one(SourceView).listing

    @property
    def _key(self) -> tuple[Frame, str, str | None] | None:
        return (self.frame, self.prefer, self.path) if self.frame is not None else None

    def show(self, profile: Profile, frame: Frame, metric: int = 0,
             keep_cursor: bool = False) -> None:
        """Load `frame`'s listing from `profile` (asynchronously); `keep_cursor`: a
        refresh of the same function (keeps a settled position)."""
        if frame != self.frame:
            self.prefer, self.path = "source", None
            keep_cursor = False
        loading = frame != self.frame or self.listing is None
        self.profile, self.frame, self.metric = profile, frame, metric
        self.loading_frame = frame
        if loading:  # the first listing of a function can take seconds (DWARF, objdump)
            self._show_loading(frame)
        self._load(profile, frame, self.prefer, self.path, metric, keep_cursor)

    def _show_loading(self, frame: Frame) -> None:
        """Until the worker is done: say what is coming, not a stale listing or the hint."""
        title = self._badge(frame)
        title.append(f"  loading its {MODE_NAMES[self.prefer]}…", style="italic")
        self.query_one("#source-title", Static).update(title)
        self.query_one(SourceView).clear()

    def _badge(self, frame: Frame) -> Text:
        """The title's start: the function's name, shortened and cut to half the width
        (the status line has the whole name)."""
        name = fit(shorten(display(frame.function), "templates"), max(24, self.size.width // 2))
        return Text().append(f" {name} ", style="bold reverse")

    @work(thread=True, exclusive=True, group="annotate")
    def _load(self, profile: Profile, frame: Frame, prefer: Prefer, path: str | None,
              metric: int, keep: bool) -> None:
        listing = annotate(profile, frame, prefer, path)
        self.app.call_from_thread(self._loaded, profile, frame, prefer, path, listing, metric,
                                  keep)

    def _loaded(self, profile: Profile, frame: Frame, prefer: Prefer, path: str | None,
                listing: Listing, metric: int, keep: bool) -> None:
        if (frame, prefer, path) != self._key:
            return  # the user moved on meanwhile
        unit = profile.metrics[metric].unit if profile.metrics else "count"
        fn = listing.function_cost[metric] if metric < len(listing.function_cost) else 0.0
        self.query_one("#source-title", Static).update(self._title(profile, frame, listing,
                                                                   metric, unit, fn))
        view = self.query_one(SourceView)
        # Live: until a listing of this function with costs is on screen (or the user
        # moved), open at the hottest row rather than keep a cursor at the first row.
        position = view.position if keep and self._settled == self._key else None
        view.set_listing(listing, metric, unit, position)
        self.loading_frame = None
        if position is None:
            self._settled = self._key if fn > 0 else None
        if view.search is not None:
            self._status(view.search.status(view.cursor))

    def _title(self, profile: Profile, frame: Frame, listing: Listing, metric: int, unit: str,
               fn: float) -> Text:
        title = self._badge(frame)
        title.append(f"  {listing.kind}: {listing.title}", style="bold")
        named = metric_label(profile.metrics[metric]) if metric < len(profile.metrics) else ""
        title.append(f"  · self {named} in listing {format_cost(fn, unit)}"
                     f" ({percent(fn, profile.total(metric) if profile.metrics else 0):.1f}%"
                     " of all)")
        if listing.kind in ("source", "lines") and len(listing.files) > 1:
            shown = listing.files.index(listing.path) + 1 if listing.path in listing.files else 1
            title.append(f"  · file {shown} of {len(listing.files)} (f: next)", style="bold")
        if listing.note:
            title.append(f"  · {listing.note}", style="italic dim")
        self._titled_part = self.part
        if self.part is not None:  # line costs are recorded per profile, not per thread
            title.append("  · line costs of all threads", style="italic bold")
        if not listing.lines:
            title.append("\n nothing to show", style="italic")
        return title

    @on(SourceView.Moved)
    def _user_moved(self) -> None:
        if self.listing is not None:
            self._settled = self._key

    # -- modes -------------------------------------------------------------------

    def _reload(self) -> None:
        if self.profile is not None and self.frame is not None:
            self.loading_frame = self.frame
            self._show_loading(self.frame)
            self._load(self.profile, self.frame, self.prefer, self.path, self.metric, False)

    def action_mode(self, mode: Prefer) -> None:
        """Switch to `mode`, or back to the source when it is the current one."""
        self.prefer = "source" if self.prefer == mode else mode
        self._reload()

    def action_toggle_disassembly(self) -> None:
        self.action_mode("disassembly")

    def action_next_file(self) -> None:
        """Source mode: the next file of the function's cost (a header it inlined)."""
        listing = self.listing
        if listing is None or self.frame is None:
            return
        if listing.kind not in ("source", "lines") or len(listing.files) < 2:
            self.app.notify("the function's cost is all in one file"
                            if listing.kind in ("source", "lines")
                            else "f steps through source files: d or i returns to the source")
            return
        at = listing.files.index(listing.path) if listing.path in listing.files else 0
        self.path = listing.files[(at + 1) % len(listing.files)]
        self._reload()

    # -- search ------------------------------------------------------------------

    def _status(self, text: str) -> None:
        status = self.query_one("#source-status", Static)
        status.update(text)
        status.set_class(bool(text), "shown")

    def action_search(self) -> None:
        box = self.query_one(SearchInput)
        self._search_origin = self.query_one(SourceView).cursor
        box.value = ""
        box.add_class("open")
        box.focus()

    def action_find(self, step: int) -> None:
        self._status(self.query_one(SourceView).find_next(step))

    @on(Input.Changed, "#source-search")
    def _typed(self, event: Input.Changed) -> None:
        view = self.query_one(SourceView)
        view.cursor = self._search_origin  # incremental: each pattern from where `/` began
        self._status(view.find(event.value, 1, include=True))

    @on(Input.Submitted, "#source-search")
    @on(SearchInput.Closed)
    def _close_search(self) -> None:
        box = self.query_one(SearchInput)
        was_focused = box.has_focus
        box.remove_class("open")
        if was_focused:
            self.query_one(SourceView).focus()

    # -- pane hooks (tui.panes.base.Pane) --------------------------------------------

    @classmethod
    def enter(cls, state: NavState, under_cursor: Frame | None) -> NavState:
        return state if state.source is not None else replace(state, source=under_cursor)

    @classmethod
    def label(cls, state: NavState) -> str:
        if state.source is None:
            return cls.TITLE
        return f"source: {shorten(display(state.source.function), 'params')}"

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        if state is not None and state.source is not None:
            self.show(profile, state.source, metric, keep_cursor=metric == self.metric)

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        if profile is not None and state.source is not None and (
                self.frame != state.source or self.profile is not profile
                or self._titled_part != self.part):
            self.show(profile, state.source, metric)

    def focus_widget(self) -> Widget | None:
        return self.query_one(SourceView)

    def commands(self) -> list[Command]:
        view = self.query_one(SourceView)
        return [("Hottest line (g)", "Jump to the costliest source line", view.action_hottest),
                ("Next hot line (tab)", "The next line with cost",
                 lambda: view.action_next_hot(1)),
                ("Previous hot line (shift+tab)", "The previous line with cost",
                 lambda: view.action_next_hot(-1)),
                ("Search the listing (/)", "Regex; n and N: next and previous match",
                 self.action_search),
                ("Source / disassembly (d)", "Toggle source and disassembly",
                 self.action_toggle_disassembly),
                ("Source + disassembly (i)",
                 "Each source line followed by its instructions (inline-aware)",
                 lambda: self.action_mode("interleaved")),
                ("Next source file (f)", "Headers inlined into the function (C++ templates)",
                 self.action_next_file)]
