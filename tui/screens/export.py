"""The export dialog: pick a format and a path; the app writes the file."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from proftui.collectors.formats.export import DESCRIPTIONS, EXPORTERS, default_output
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet


class ExportScreen(ModalScreen[tuple[str, Path] | None]):
    """Returns (format, path) or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, base: Path) -> None:
        super().__init__()
        self.base = base  # a file name whose stem names the outputs
        self.fmt = "pprof"

    def compose(self) -> ComposeResult:
        with Vertical(id="export-dialog"):
            yield Label("Export the profile shown", id="export-title")
            with RadioSet(id="export-format"):
                for name in EXPORTERS:
                    yield RadioButton(f"{name:<11} {DESCRIPTIONS.get(name, '')}",
                                      value=name == self.fmt, name=name)
            yield Label("Path:")
            yield Input(str(default_output(self.base, self.fmt)), id="export-path")
            with Horizontal(id="export-buttons"):
                yield Button("Export", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one(RadioSet).focus()

    @on(RadioSet.Changed)
    def _format_changed(self, event: RadioSet.Changed) -> None:
        old_default = str(default_output(self.base, self.fmt))
        self.fmt = event.pressed.name or self.fmt
        box = self.query_one("#export-path", Input)
        if box.value == old_default:  # the user has not typed a path of their own
            box.value = str(default_output(self.base, self.fmt))

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-ok")
    def _ok(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if path:
            self.dismiss((self.fmt, Path(path).expanduser()))

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
