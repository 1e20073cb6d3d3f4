"""Annotated source pane: per-line (or per-instruction) self cost with heat colours.

The listing comes from the model (collectors/model/source.py: the line and
address costs recorded at collection time, the embedded or on-disk source);
it is computed in a thread worker because disassembly runs objdump
(collectors/symbols/disasm.py).  The view renders only visible lines (Line
API), with the file lexed once by pygments and cached per line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Listing
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry
from proftui.collectors.symbols.disasm import annotate
from proftui.tui.format import format_cost, heat_background, percent
from proftui.tui.names import fit, shorten
from proftui.tui.panes.base import Command, NavState, Pane
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

CURSOR_STYLE = Style(bgcolor="rgb(40,60,110)")


class SourceView(ScrollView, can_focus=True):
    """Scrollable listing with a cursor line; renders visible lines only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home", "move(-1000000000)", "Top", show=False),
        Binding("end", "move(1000000000)", "End", show=False),
        Binding("g", "hottest", "Hottest line"),
        Binding("n", "next_hot(1)", "Next costly"),
        Binding("N", "next_hot(-1)", "Prev costly", show=False),
    ]

    cursor: reactive[int] = reactive(0)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.listing: Listing | None = None
        self.metric = 0
        self.unit = "count"
        self.whole = 0.0
        self._code: list[Text] = []
        self._number_width = 5

    def set_listing(self, listing: Listing, metric: int, unit: str, whole: float,
                    cursor: int | None = None) -> None:
        self.listing = listing
        self.metric, self.unit, self.whole = metric, unit, whole
        if listing.kind == "source" and listing.path:
            code = "\n".join(line.text for line in listing.lines)
            try:
                lexer = Syntax.guess_lexer(listing.path, code)
            except Exception:
                lexer = "text"
            highlighted = Syntax(code, lexer, theme="monokai").highlight(code)
            highlighted.remove_suffix("\n")
            self._code = list(highlighted.split("\n", allow_blank=True))
        else:
            self._code = [Text(line.text) for line in listing.lines]
        numbers = [line.number or 0 for line in listing.lines]
        if listing.numbers_are_lines:
            self._number_width = max(4, len(str(max(numbers, default=0))))
        else:
            self._number_width = max(6, len(f"{max(numbers, default=0):x}"))
        width = max((t.cell_len for t in self._code), default=0) + self._number_width + 22
        self.virtual_size = Size(width, len(listing.lines))
        target = cursor if cursor is not None else listing.hottest(metric)
        self.cursor = min(max(0, target or 0), max(0, len(listing.lines) - 1))
        self._center(self.cursor)
        self.call_after_refresh(self._center, self.cursor)  # again, once the size is known
        self.refresh()

    def _center(self, line: int) -> None:
        height = self.scrollable_content_region.height or self.size.height or 20
        self.scroll_to(y=max(0, line - height // 2), animate=False, immediate=True)

    def watch_cursor(self, old: int, new: int) -> None:
        height = self.scrollable_content_region.height or 1
        top = self.scroll_offset.y
        if new < top or new >= top + height:
            self.scroll_to(y=max(0, new - height // 3), animate=False, immediate=True)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        listing = self.listing
        width = self.scrollable_content_region.width
        if listing is None or index >= len(listing.lines):
            return Strip.blank(width)
        line = listing.lines[index]
        m = self.metric
        cost = line.cost[m] if line.cost is not None and m < len(line.cost) else 0.0
        fn_total = listing.function_cost[m] if m < len(listing.function_cost) else 0.0
        share = cost / fn_total if fn_total > 0 else 0.0
        row = Text(no_wrap=True, end="")
        heat = heat_background(share)
        if cost > 0:
            row.append(f"{format_cost(cost, self.unit):>9} ", style=heat)
            row.append(f"{percent(cost, fn_total):5.1f}% ", style=heat)
        else:
            row.append(" " * 17, style="dim")
        number = line.number
        if number is None:
            label = ""
        elif listing.numbers_are_lines:
            label = str(number)
        else:
            label = f"{number:x}"
        row.append(f"{label:>{self._number_width}} │ ", style="dim")
        row.append_text(self._code[index] if index < len(self._code) else Text(line.text))
        if index == self.cursor:
            row.stylize(CURSOR_STYLE)
        segments = list(row.render(self.app.console))
        strip = Strip(segments).crop(self.scroll_offset.x, self.scroll_offset.x + width)
        return strip.extend_cell_length(width, CURSOR_STYLE if index == self.cursor else Style())

    def action_move(self, delta: int) -> None:
        if self.listing is not None and self.listing.lines:
            self.cursor = min(max(0, self.cursor + delta), len(self.listing.lines) - 1)

    def action_hottest(self) -> None:
        if self.listing is not None:
            hottest = self.listing.hottest(self.metric)
            if hottest is not None:
                self.cursor = hottest
                self._center(hottest)

    def action_next_hot(self, step: int) -> None:
        if self.listing is None:
            return
        lines = self.listing.lines
        i = self.cursor + step
        while 0 <= i < len(lines):
            if lines[i].cost is not None and lines[i].cost[self.metric] > 0:  # type: ignore[index]
                self.cursor = i
                return
            i += step


class SourcePane(Pane, Vertical):
    """Title line plus the listing; `show(frame)` loads in a worker."""

    KEY, PANE_ID, TITLE, TAB = "3", "source", "Source", "Source"
    HINT = "Annotated source of the selected function"

    BINDINGS: ClassVar[list[BindingType]] = [Binding("d", "toggle_disassembly", "Source/asm")]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.profile: Profile | None = None
        self.frame: Frame | None = None
        self.metric = 0
        self.prefer: str = "source"
        self.loading_frame: Frame | None = None
        # the frame whose listing is on screen, and whether it had costs: only then is
        # the cursor the user's (or the hottest line's) and worth keeping on refresh
        self._shown: tuple[Frame, bool] | None = None

    def compose(self) -> ComposeResult:
        yield Static("Select a function (Enter in the flat profile or tree) to see its source.",
                     id="source-title")
        yield SourceView(id="source-view")

    @property
    def listing(self) -> Listing | None:
        return self.query_one(SourceView).listing

    def show(self, profile: Profile, frame: Frame, metric: int = 0,
             keep_cursor: bool = False) -> None:
        """Load `frame`'s listing from `profile` (asynchronously)."""
        if frame != self.frame:
            self.prefer = "source"
            keep_cursor = False
        self.profile, self.frame, self.metric = profile, frame, metric
        self.loading_frame = frame
        view = self.query_one(SourceView)
        # Live: until a listing of this frame with costs is on screen, open at the
        # hottest line rather than keep a cursor that only sits at the first row.
        keep_cursor = keep_cursor and self._shown == (frame, True)
        cursor = view.cursor if keep_cursor else None
        self._load(profile, frame, self.prefer, metric, cursor)

    @work(thread=True, exclusive=True, group="annotate")
    def _load(self, profile: Profile, frame: Frame, prefer: str, metric: int,
              cursor: int | None) -> None:
        listing = annotate(profile, frame, prefer)  # type: ignore[arg-type]
        self.app.call_from_thread(self._loaded, profile, frame, listing, metric, cursor)

    def _loaded(self, profile: Profile, frame: Frame, listing: Listing, metric: int,
                cursor: int | None) -> None:
        if frame != self.frame:
            return  # the user moved on meanwhile
        unit = profile.metrics[metric].unit if profile.metrics else "count"
        fn = listing.function_cost[metric] if metric < len(listing.function_cost) else 0.0
        title = Text()
        # Shortened and cut to half the width; the status line has the whole name.
        name = fit(shorten(display(frame.function), "templates"), max(24, self.size.width // 2))
        title.append(f" {name} ", style="bold reverse")
        title.append(f"  {listing.kind}: {listing.title}", style="bold")
        title.append(f"  · self in listing {format_cost(fn, unit)}"
                     f" ({percent(fn, profile.total(metric) if profile.metrics else 0):.1f}%"
                     " of all)")
        if listing.note:
            title.append(f"  · {listing.note}", style="italic dim")
        if not listing.lines:
            title.append("\n nothing to show", style="italic")
        self.query_one("#source-title", Static).update(title)
        self.query_one(SourceView).set_listing(listing, metric, unit,
                                               profile.total(metric) if profile.metrics else 0,
                                               cursor)
        self.loading_frame = None
        self._shown = (frame, fn > 0)

    def action_toggle_disassembly(self) -> None:
        if self.profile is None or self.frame is None:
            return
        self.prefer = "disassembly" if self.prefer == "source" else "source"
        self._load(self.profile, self.frame, self.prefer, self.metric, None)

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
            self.show(profile, state.source, metric, keep_cursor=True)

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        if profile is not None and state.source is not None and (
                self.frame != state.source or self.profile is not profile):
            self.show(profile, state.source, metric)

    def focus_widget(self) -> Widget | None:
        return self.query_one(SourceView)

    def commands(self) -> list[Command]:
        return [("Hottest line (g)", "Jump to the costliest source line",
                 lambda: self.query_one(SourceView).action_hottest()),
                ("Source / disassembly (d)", "Toggle source and disassembly",
                 self.action_toggle_disassembly)]
