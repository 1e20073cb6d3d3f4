"""The profile's notes: every warning the collector gave, in full."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class NotesScreen(ModalScreen[None]):
    """Lists `notes` (meta.warnings and the dropped count); Escape, `w` or `q` close it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,w,q", "close", "Close"),
    ]

    def __init__(self, notes: list[str]) -> None:
        super().__init__()
        self.notes = notes

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notes-dialog"):
            yield Label("Notes on this profile", id="notes-title")
            if not self.notes:
                yield Static("none: the collector reported nothing unusual")
            for note in self.notes:
                yield Static(f"• {note}", classes="note")

    def action_close(self) -> None:
        self.dismiss(None)
