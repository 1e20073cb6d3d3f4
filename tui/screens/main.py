"""The app's own screen (header, breadcrumb, panes, key bar), with focus kept on the
visible pane."""

from __future__ import annotations

from collections.abc import Callable

from textual.screen import Screen


class MainScreen(Screen[None]):
    """Calls `on_resume` whenever it is active again (a modal or the palette closed).

    Textual's auto-focus would focus the first "focusable" widget in DOM order
    when nothing has focus (the Process pane has no focusable widget), and
    `Widget.focusable` ignores `display: none`: it picked the hidden flat
    filter box, which then swallowed every key (`q`, `1`...).  Auto-focus is
    off here; `on_resume` (the app's `focus_pane`) focuses the visible pane.
    """

    AUTO_FOCUS = ""

    def __init__(self, on_resume: Callable[[], None], id: str | None = None) -> None:
        super().__init__(id=id)
        self._on_resume = on_resume

    def on_screen_resume(self) -> None:
        self._on_resume()
