"""The one-line status under the panes: the whole name of the selected function.

Columns show shortened, cut names (tui/names.py); this line shows the
demangled name in full with its module, cut in the middle only when it is
longer than the screen.  A pane may prefix a note (its search's "match 3 of 12",
"% of parent").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from proftui.collectors.model.profile import Frame
from proftui.collectors.model.textsafe import display
from rich.text import Text
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static


@dataclass
class NameSelected(Message):
    """Posted by a pane when its selection (or its note) changes."""

    pane: str  # the pane's PANE_ID: only the shown pane's selection is displayed
    frame: Frame | None
    note: str = ""


@runtime_checkable
class ShowsSelections(Protocol):
    """An app that takes a NameSelected at once (proftui's app: its status line)."""

    def name_selected(self, message: NameSelected) -> None: ...


def tell_selection(pane: Widget, message: NameSelected) -> None:
    """Hand `message` to the app in this handler, not as a posted message: posted,
    it bubbles through the pane's containers and reaches the app after the frame
    that shows the pane's change, and the status line follows one Textual update
    tick later (17-33 ms).  An app without `name_selected` gets it posted."""
    app = pane.app
    if isinstance(app, ShowsSelections):
        app.name_selected(message)
    else:
        pane.post_message(message)


class SettingChanged(Message):
    """Posted by a pane when a choice worth remembering changed (sort, % of parent):
    the app saves the settings (tui/settings.py)."""


def middle_cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, its middle replaced by "…"."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:max(0, width)]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


class StatusLine(Static):
    """One line: an optional note, then the selected function's full name and module."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", markup=False, **kwargs)  # type: ignore[arg-type]
        self.frame: Frame | None = None
        self.note = ""

    def show(self, frame: Frame | None, note: str = "") -> None:
        """Show `frame`'s whole name (None: only the note)."""
        if frame is self.frame and note == self.note and self.frame is not None:
            return
        self.frame, self.note = frame, note
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        width = max(10, (self.size.width or self.app.size.width) - 1)
        note = display(self.note)
        name = display(self.frame.function) if self.frame is not None else ""
        module = display(self.frame.module_name) if self.frame is not None else ""
        if self.frame is not None and self.frame.inlined:
            module = f"{module} [inlined]".strip()
        # The name gets what the note and module leave; it is cut only when it must be.
        lead = f" {note} · " if note and name else (f" {note}" if note else " ")
        tail = f"  {module}" if module else ""
        room = width - len(lead) - len(tail)
        if room < 20 and tail:  # a narrow screen: the name matters more than the module
            tail = ""
            room = width - len(lead)
        text = Text(no_wrap=True, end="")
        text.append(lead, style="bold")
        text.append(middle_cut(name, max(1, room)))
        text.append(tail, style="dim")
        text.truncate(width + 1)
        self.update(text)
