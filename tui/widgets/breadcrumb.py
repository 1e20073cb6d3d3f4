"""Where the user is: the pane tabs and the drill-down trail, fitted to the width."""

from __future__ import annotations

from rich.text import Text
from textual.events import Resize
from textual.widgets import Static

SEPARATOR = " › "


def _tabs(tabs: list[tuple[str, str]], current: str, compact: bool) -> Text:
    """The tab strip; `compact`: only the current tab keeps its name ("1  2  3 Source  4")."""
    text = Text()
    for pane, label in tabs:
        if pane == current:
            text.append(f" {label} ", style="bold reverse")
        else:
            text.append(f" {label.split(' ')[0] if compact else label} ", style="dim")
        text.append(" ")
    return text


def _trail(trail: list[str], width: int) -> Text:
    """The trail in at most `width` cells: earlier steps give way to "…" first, the
    current (last) step stays whole if it fits at all, else keeps its end."""
    steps = list(trail)
    dropped = False

    def joined() -> str:
        return SEPARATOR.join((["…"] if dropped else []) + steps)

    while len(steps) > 1 and len(joined()) > width:
        steps.pop(0)
        dropped = True
    text = Text()
    shown = (["…"] if dropped else []) + steps
    for i, step in enumerate(shown):
        if i:
            text.append(SEPARATOR, style="dim")
        text.append(step, style="bold" if i == len(shown) - 1 else "")
    if text.cell_len > width:  # the current step alone is too long: keep its end
        plain = text.plain
        cut = plain[len(plain) - max(0, width - 1):] if width > 1 else ""
        text = Text("…" + cut, style="bold")
    return text


class Breadcrumb(Static):
    """Pane tabs on the left, then the trail of drill-down steps (Escape walks back)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._shown: tuple[list[tuple[str, str]], str, list[str]] = ([], "", [])

    def show(self, tabs: list[tuple[str, str]], current: str, trail: list[str]) -> None:
        """`tabs`: (pane id, label) of every pane; `current`: the id of the one shown."""
        self._shown = (tabs, current, trail)
        self._redraw()

    def on_resize(self, _event: Resize) -> None:
        self._redraw()

    def _redraw(self) -> None:
        tabs, current, trail = self._shown
        width = self.size.width or self.app.size.width
        text = _tabs(tabs, current, compact=False)
        if trail:
            need = min(len(trail[-1]), 32)  # the current step, or a readable part of it
            if text.cell_len + 2 + need > width:
                text = _tabs(tabs, current, compact=True)
            text.append("  ")
            text.append_text(_trail(trail, width - text.cell_len))
        self.update(text)
