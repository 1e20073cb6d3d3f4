"""The `/` prompt of a pane's search: one input line at the bottom of the screen."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Input


class SearchScreen(ModalScreen[str | None]):
    """Returns the pattern typed (Enter), or None (Escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, pattern: str = "", what: str = "functions") -> None:
        super().__init__()
        self.pattern = pattern
        self.what = what

    def compose(self) -> ComposeResult:
        yield Input(self.pattern, placeholder=f"search {self.what} (regex; case-insensitive "
                    "if lowercase; n/N next/previous)", id="search-input")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
