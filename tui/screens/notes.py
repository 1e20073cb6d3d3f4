"""The profile's notes: every warning the collector gave, in full."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

if TYPE_CHECKING:
    from proftui.collectors.model.profile import Profile


def profile_notes(profile: Profile | None, incomplete_note: str | None = None) -> list[str]:
    """What the notes screen lists: `incomplete_note` first when given, then the
    profile's warnings.  Dropped records are named there by the collector that
    counted them, each with its cause (the header shows their count): a cause
    guessed here would be a second one for the same records."""
    notes = list(profile.meta.warnings) if profile is not None else []
    if incomplete_note is not None:
        notes.insert(0, incomplete_note)
    return notes


class NotesScreen(ModalScreen[None]):
    """Lists `notes` (profile_notes); Escape, `w` or `q` close it."""

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
