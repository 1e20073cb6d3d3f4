"""The annotated listing of the source pane: a Line API view with a cursor and search.

Renders only the visible rows.  The source file is lexed once by pygments
(per listing); colours come from the app's Textual theme (its CSS variables:
heat from `$error`, cursor from `$primary`, syntax from `$text-*`), so a theme
change re-colours the listing.  Rows of an interleaved listing (source lines
each followed by their instructions) are drawn as perf annotate draws them.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import ClassVar

from proftui.collectors.model.source import Listing, ListingLine
from proftui.collectors.model.textsafe import display
from proftui.tui.format import format_cost, percent
from proftui.tui.widgets.cursor_keys import cursor_bindings
from proftui.tui.widgets.source_search import Search
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers import _fn_matches, get_lexer_by_name  # type: ignore[import-untyped]
from pygments.lexers._mapping import LEXERS  # type: ignore[import-untyped]
from pygments.token import Token, _TokenType  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

TAB_SIZE = 8
HEAT_STEPS = 24  # heat colours per theme (shares are rounded to these)
COST_WIDTH = 17  # "   1,234  12.3% "

# pygments token -> theme variable of its colour (the most specific token wins)
SYNTAX: dict[_TokenType, str] = {
    Token.Comment: "muted",
    Token.Comment.Preproc: "text-secondary",
    Token.Comment.PreprocFile: "text-success",
    Token.Keyword: "text-accent",
    Token.Keyword.Type: "text-primary",
    Token.Name.Builtin: "text-accent",
    Token.Name.Function: "text-warning",
    Token.Literal.String: "text-success",
    Token.Literal.Number: "text-warning",
}


class SourceView(ScrollView, can_focus=True):
    """Scrollable listing with a cursor row, heat colours and search highlights."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *cursor_bindings("move(-20)", "move(20)"),
        Binding("g", "hottest", "Hottest"),
        Binding("tab", "next_hot(1)", "Next hot", show=False),
        Binding("shift+tab", "next_hot(-1)", "Prev hot", show=False),
    ]

    cursor: reactive[int] = reactive(0)

    class Moved(Message):
        """The user moved the cursor or the scroll position (the pane keeps it from now)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.listing: Listing | None = None
        self.metric = 0
        self.unit = "count"
        self.search: Search | None = None
        self._tokens: list[list[tuple[_TokenType, str]]] = []
        self._texts: list[str] = []
        self._number_width = 5
        self._palette_of: str | None = None  # the theme the cached styles were made for
        self._styles: dict[str, Style] = {}
        self._heat: list[Style] = []
        self._code_cache: dict[int, Text] = {}
        self._center_on: int | None = None  # a centring asked for before the size was known

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _theme_changed(self, _theme: object) -> None:
        self._palette_of = None
        self.refresh()

    # -- content -----------------------------------------------------------------

    def set_listing(self, listing: Listing, metric: int, unit: str,
                    position: tuple[int, int] | None = None) -> None:
        """Show `listing`; `position` (cursor row, scroll row) keeps the user's place,
        else the cursor goes to the hottest row, centred."""
        same_text = self.listing is not None and self._same_text(self.listing, listing)
        self.listing = listing
        self.metric, self.unit = metric, unit
        if not same_text:
            # tabs expanded and controls escaped (a source file must not drive the terminal)
            self._texts = [display(row.text.expandtabs(TAB_SIZE)) for row in listing.lines]
            self._tokens = _lex(listing, self._texts)
            self._code_cache = {}
        if self.search is not None:
            self.search = self.search.again(self._texts)
        width = 4
        for i, row in enumerate(listing.lines):
            if row.number is not None:
                width = max(width, len(str(row.number)) if listing.row_is_line(i)
                            else len(f"{row.number:x}"))
        self._number_width = width
        longest = max((len(t) for t in self._texts), default=0)
        self.virtual_size = Size(longest + 8 + width + COST_WIDTH + 3, len(listing.lines))
        last = max(0, len(listing.lines) - 1)
        if position is not None:
            self.cursor = min(max(0, position[0]), last)
            self.scroll_to(y=position[1], animate=False, immediate=True, force=True)
        else:
            start = listing.opens_at if listing.opens_at is not None else listing.hottest(metric)
            self.cursor = min(max(0, start or 0), last)
            self.center(self.cursor)
        self.refresh()

    def clear(self) -> None:
        """Show nothing (another function's listing is on its way)."""
        self.listing = None
        self.search = None
        self.virtual_size = Size(0, 0)
        self.refresh()

    @staticmethod
    def _same_text(old: Listing, new: Listing) -> bool:
        return (old.kind == new.kind and old.path == new.path and len(old.lines) == len(new.lines)
                and all(a.text == b.text for a, b in zip(old.lines, new.lines, strict=True)))

    @property
    def position(self) -> tuple[int, int]:
        """(cursor row, first visible row): what `set_listing` keeps."""
        return self.cursor, self.scroll_offset.y

    def center(self, row: int) -> None:
        """Scroll so that `row` is in the middle (again once the size is known)."""
        height = self.scrollable_content_region.height
        if height <= 0:
            self._center_on = row  # not laid out yet: on_resize does it
            height = 20
        self.scroll_to(y=max(0, row - height // 2), animate=False, immediate=True, force=True)

    def on_resize(self) -> None:
        if self._center_on is not None and self.scrollable_content_region.height > 0:
            row, self._center_on = self._center_on, None
            self.center(row)

    def watch_cursor(self, old: int, new: int) -> None:
        height = self.scrollable_content_region.height or 1
        top = self.scroll_offset.y
        if new < top or new >= top + height:
            self.scroll_to(y=max(0, new - height // 3), animate=False, immediate=True,
                           force=True)
        self.refresh()

    # -- colours (from the theme) ------------------------------------------------

    def _palette(self) -> None:
        theme = self.app.theme
        if self._palette_of == theme:
            return
        variables = self.app.get_css_variables()

        def colour(name: str, fallback: str) -> Color:
            try:
                return Color.parse(variables.get(name, fallback))
            except Exception:  # e.g. "auto 60%": not a colour on its own
                return Color.parse(fallback)

        background = colour("background", "#000000")
        foreground = colour("foreground", "#e0e0e0")
        muted = foreground.blend(background, 0.45)
        heat = colour("error", "#b93c5b")
        styles = {"muted": Style(color=muted.rich_color),
                  "gutter": Style(color=muted.rich_color),
                  "cursor": Style(bgcolor=background.blend(colour("primary", "#0178d4"),
                                                           0.5).rich_color),
                  "match": Style(bgcolor=colour("warning", "#fea62b").rich_color,
                                 color=background.rich_color, bold=True),
                  "file": Style(color=colour("text-accent", "#ffc473").rich_color, bold=True),
                  "insn": Style(color=foreground.blend(background, 0.2).rich_color)}
        for name in SYNTAX.values():
            if name not in styles:
                styles[name] = Style(color=colour(name, variables.get("foreground", "#e0e0e0")
                                                  ).rich_color)
        self._styles = styles
        self._heat = [Style(bgcolor=background.blend(heat, 0.25 + 0.75 * step / HEAT_STEPS
                                                     ).rich_color,
                            color=foreground.rich_color)
                      for step in range(HEAT_STEPS + 1)]
        self._code_cache = {}
        self._palette_of = theme

    def heat_style(self, share: float) -> Style:
        """Background of a row costing `share` (0..1) of the function (sqrt scale, so that
        lines of a few percent still show)."""
        self._palette()
        if share <= 0:
            return Style()
        return self._heat[max(1, round(min(1.0, share) ** 0.5 * HEAT_STEPS))]

    def _code(self, index: int, row: ListingLine) -> Text:
        found = self._code_cache.get(index)
        if found is not None:
            return found
        text = Text(no_wrap=True, end="")
        shown = self._texts[index]
        if row.kind == "file":
            text.append(shown, style=self._styles["file"])
        elif row.kind == "insn":
            mnemonic, _, rest = shown.partition(" ")
            text.append("    " if self.listing and self.listing.kind == "interleaved" else "")
            text.append(mnemonic, style=self._styles["insn"])
            if rest:
                text.append(" " + rest, style=self._styles["muted"])
        else:
            tokens = self._tokens[index] if index < len(self._tokens) else []
            for token, value in tokens or [(Token.Text, shown)]:
                text.append(value, style=self._token_style(token))
        self._code_cache[index] = text
        return text

    def _token_style(self, token: _TokenType) -> Style | str:
        while token is not Token and token not in SYNTAX:
            token = token.parent
        name = SYNTAX.get(token)
        return self._styles.get(name, "") if name else ""

    # -- drawing -----------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        self._palette()
        index = self.scroll_offset.y + y
        listing = self.listing
        width = self.scrollable_content_region.width
        if listing is None or index >= len(listing.lines):
            return Strip.blank(width)
        row = listing.lines[index]
        m = self.metric
        cost = row.cost[m] if row.cost is not None and m < len(row.cost) else 0.0
        fn_total = listing.function_cost[m] if m < len(listing.function_cost) else 0.0
        share = cost / fn_total if fn_total > 0 else 0.0
        line = Text(no_wrap=True, end="")
        if cost > 0:
            # a head's cost is its instructions' sum: shown, not heat-coloured twice
            heat = self.heat_style(share) if row.ranks else self._styles["muted"]
            line.append(f"{format_cost(cost, self.unit):>9} ", style=heat)
            line.append(f"{percent(cost, fn_total):5.1f}% ", style=heat)
        else:
            line.append(" " * COST_WIDTH)
        if row.number is None:
            label = ""
        elif listing.row_is_line(index):
            label = str(row.number)
        else:
            label = f"{row.number:x}"
        line.append(f"{label:>{self._number_width}} │ ", style=self._styles["gutter"])
        code = self._code(index, row)
        if self.search is not None and self.search.rank(index) is not None:
            code = code.copy()
            for start, end in self.search.spans(self._texts[index]):
                offset = 4 if row.kind == "insn" and listing.kind == "interleaved" else 0
                code.stylize(self._styles["match"], start + offset, end + offset)
        line.append_text(code)
        cursor = self._styles["cursor"] if index == self.cursor else None
        if cursor is not None:
            line.stylize_before(cursor)
        segments = list(line.render(self.app.console))
        strip = Strip(segments).crop(self.scroll_offset.x, self.scroll_offset.x + width)
        return strip.extend_cell_length(width, cursor or Style())

    # -- moving ------------------------------------------------------------------

    def _user_moved(self) -> None:
        self.post_message(self.Moved())

    def action_move(self, delta: int) -> None:
        if self.listing is not None and self.listing.lines:
            self.cursor = min(max(0, self.cursor + delta), len(self.listing.lines) - 1)
            self._user_moved()

    def on_mouse_scroll_down(self) -> None:
        self._user_moved()

    def on_mouse_scroll_up(self) -> None:
        self._user_moved()

    def go_to(self, row: int) -> None:
        """Put the cursor on `row`, centred when it was off screen."""
        height = self.scrollable_content_region.height or 1
        if not self.scroll_offset.y <= row < self.scroll_offset.y + height:
            self.center(row)
        self.cursor = row
        self._user_moved()

    def action_hottest(self) -> None:
        if self.listing is not None:
            hottest = self.listing.hottest(self.metric)
            if hottest is not None:
                self.go_to(hottest)

    def action_next_hot(self, step: int) -> None:
        """The next (previous) row with cost of its own."""
        if self.listing is None:
            return
        lines = self.listing.lines
        i = self.cursor + step
        while 0 <= i < len(lines):
            row = lines[i]
            if row.ranks and row.cost is not None and self.metric < len(row.cost) \
                    and row.cost[self.metric] > 0:
                self.go_to(i)
                return
            i += step

    # -- search ------------------------------------------------------------------

    def find(self, pattern: str, step: int = 1, include: bool = True) -> str:
        """Search `pattern` from the cursor; returns the status line ("match k of n",
        "no match", or why the pattern is not a regex).  An empty pattern clears."""
        if not pattern:
            self.search = None
            self.refresh()
            return ""
        try:
            self.search = Search.over(pattern, self._texts)
        except re.error as exc:
            self.search = None
            self.refresh()
            return f"/{pattern}: not a regex ({exc})"
        self.refresh()
        return self.find_next(step, include)

    def find_next(self, step: int, include: bool = False) -> str:
        """Go to the next (step 1) or previous (-1) match of the current search."""
        search = self.search
        if search is None:
            return "no search: / to search"
        found = search.next_row(self.cursor, step, include)
        if found is None:
            return search.status(self.cursor)
        row, wrapped = found
        self.go_to(row)
        status = search.status(row)
        return status + (" (wrapped)" if wrapped else "")


def _name_matches(name: str, pattern: str) -> bool:
    """pygments' file pattern match (fnmatch, case-sensitive); the common "*.ext" and
    plain names without compiling a regex each (some 1,500 patterns)."""
    rest = pattern[1:] if pattern.startswith("*") else pattern
    if not any(c in rest for c in "*?["):
        return name.endswith(rest) if rest is not pattern else name == pattern
    return bool(_fn_matches(name, pattern))


def _guess_lexer(path: str, code: str) -> Lexer:
    """pygments' guess_lexer_for_filename, loading only the lexers whose file patterns
    match: it chooses among them as pygments does (analyse_text, then priority, then
    name), but pygments imports every lexer module first (~250 of them, 0.3 s that the
    first source view waited for).  Only primary patterns count: the alias patterns
    pygments also tries are template languages' (*.html, *.xml, *.php, *.inc...)."""
    name = os.path.basename(path)
    matching = []
    for class_name, (module, _title, _aliases, patterns, _mime) in LEXERS.items():
        if any(_name_matches(name, pattern) for pattern in patterns):
            matching.append(getattr(importlib.import_module(module), class_name))
    if not matching:
        raise ClassNotFound(f"no lexer for filename {name!r} found")
    if len(matching) == 1:
        return matching[0](stripnl=False, ensurenl=False)
    rated = []
    for lexer in matching:
        rating = lexer.analyse_text(code)
        if rating == 1.0:
            return lexer(stripnl=False, ensurenl=False)
        rated.append((rating, lexer.priority, lexer.__name__, lexer))
    rated.sort(key=lambda r: r[:3])
    return rated[-1][3](stripnl=False, ensurenl=False)


def _lexer(path: str | None, code: str) -> Lexer | None:
    try:
        if path:
            return _guess_lexer(path, code)
        return None
    except ClassNotFound:
        try:
            return get_lexer_by_name("c", stripnl=False, ensurenl=False) if path else None
        except ClassNotFound:
            return None


def _split(lexer: Lexer | None, code: str) -> list[list[tuple[_TokenType, str]]]:
    """Per line, the (token, text) pairs of `code` (one list per line)."""
    lines: list[list[tuple[_TokenType, str]]] = [[]]
    tokens = lexer.get_tokens(code) if lexer is not None else [(Token.Text, code)]
    for token, value in tokens:
        parts = value.split("\n")
        for j, part in enumerate(parts):
            if j:
                lines.append([])
            if part:
                lines[-1].append((token, part))
    return lines


def _lex(listing: Listing, texts: list[str]) -> list[list[tuple[_TokenType, str]]]:
    """Tokens per row of `texts` (the rows' shown text): the source file lexed once;
    heads of an interleaved listing lexed per file; instructions need no lexer."""
    rows = listing.lines
    if listing.kind == "source":
        code = "\n".join(texts)
        return _split(_lexer(listing.path, code), code)
    if listing.kind != "interleaved":
        return []
    out: list[list[tuple[_TokenType, str]]] = [[] for _ in rows]
    by_file: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row.kind == "head" and row.file:
            by_file.setdefault(row.file, []).append(i)
    for file, indexes in by_file.items():
        code = "\n".join(texts[i] for i in indexes)
        for i, tokens in zip(indexes, _split(_lexer(file, code), code), strict=False):
            out[i] = tokens
    return out
