"""The `/` prompt of the call tree's and the flame graph's search: one input line
docked at the bottom of the main screen, over the panes.

It is a widget of the main screen, not a screen of its own: Enter closes it and
runs the search in the same handler, so the closed prompt, the revealed match
and the status line's "match 1 of N" are drawn in one frame.  A modal screen
drew twice (once as it closed, once under it after Textual's next update tick),
which cost 40-60 ms on a 200,000-node tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input

Answer = Callable[[str | None], None]


class SearchPrompt(Input):
    """`ask(pattern, what, answer)` opens the prompt; Enter calls `answer(typed)`,
    Esc (or the focus leaving it) `answer(None)`, once, after the prompt closed."""

    DEFAULT_CSS = """
    SearchPrompt { display: none; dock: bottom; layer: prompt; margin-bottom: 1;
                   border: tall $accent; }
    SearchPrompt.open { display: block; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, **kwargs: str | None) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._answer: Answer | None = None

    def ask(self, pattern: str, what: str, answer: Answer) -> None:
        """Open with `pattern` typed in, for a search of `what`."""
        self._answer = answer
        self.placeholder = (f"search {what} (regex; case-insensitive if lowercase; "
                            "n/N next/previous)")
        self.value = pattern
        self.cursor_position = len(pattern)
        self.add_class("open")
        self.focus()

    def _close(self, typed: str | None) -> None:
        answer, self._answer = self._answer, None
        if answer is None:
            return  # closed already (Enter, then the blur of the focus moving on)
        self.remove_class("open")
        answer(typed)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._close(event.value)

    def action_cancel(self) -> None:
        self._close(None)

    def on_blur(self) -> None:
        # The focus went elsewhere (a click, a pane key from the palette): no prompt is
        # left open without it.
        self._close(None)
