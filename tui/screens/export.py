"""The save/export dialog: pick a format and a path; the app writes the file.

The first format, selected by default, is proftui's own (`NATIVE`): the whole
profile with its sources, which `proftui open` and `report` read back; the
others are the exporters of collectors/formats/export.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from proftui.collectors.formats.export import DESCRIPTIONS, EXPORTERS, default_output
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet

NATIVE = "proftui"  # the format name the app saves with collectors.model.storage
FORMATS = {NATIVE: "proftui profile, sources included (proftui open, report)",
           **{name: DESCRIPTIONS.get(name, "") for name in EXPORTERS}}


def output_path(base: Path, fmt: str) -> Path:
    """The default file for `fmt`: `base` itself (a .proftui name) for the native format."""
    return base if fmt == NATIVE else default_output(base, fmt)


class FormatList(RadioSet):
    """The formats; arrows move, space picks, Enter picks the highlighted one and saves."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "choose", "Save", show=False)]

    @dataclass
    class Chosen(Message):
        """Enter on a format: save in it."""

        name: str

    def action_choose(self) -> None:
        index = self._selected if self._selected is not None else self.pressed_index
        buttons = list(self.query(RadioButton))
        if 0 <= index < len(buttons):
            buttons[index].value = True
            self.post_message(self.Chosen(buttons[index].name or NATIVE))


class ExportScreen(ModalScreen[tuple[str, Path] | None]):
    """Returns (format, path) or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, base: Path) -> None:
        """`base`: the .proftui file to offer; the exports are named after its stem."""
        super().__init__()
        self.base = base
        self.fmt = NATIVE

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="export-dialog"):
            yield Label("Save / Export the profile shown  "
                        "[dim](↑↓ format · Space pick · Enter save · Tab path · Esc cancel)[/]",
                        id="export-title")
            with FormatList(id="export-format"):
                for name, description in FORMATS.items():
                    yield RadioButton(f"{name:<10} {description}",
                                      value=name == self.fmt, name=name)
            yield Label("Path:")
            yield Input(str(output_path(self.base, self.fmt)), id="export-path")
            with Horizontal(id="export-buttons"):
                yield Button("Save", variant="primary", id="export-ok")
                yield Button("Cancel", id="export-cancel")

    def on_mount(self) -> None:
        self.query_one(RadioSet).focus()

    @on(RadioSet.Changed)
    def _format_changed(self, event: RadioSet.Changed) -> None:
        self._set_format(event.pressed.name or self.fmt)

    @on(FormatList.Chosen)
    def _format_chosen(self, event: FormatList.Chosen) -> None:
        self._set_format(event.name)
        self._ok()

    def _set_format(self, fmt: str) -> None:
        old_default = str(output_path(self.base, self.fmt))
        self.fmt = fmt
        box = self.query_one("#export-path", Input)
        if box.value == old_default:  # the user has not typed a path of their own
            box.value = str(output_path(self.base, self.fmt))
        self.query_one("#export-ok", Button).label = "Save" if self.fmt == NATIVE \
            else "Export"

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#export-ok")
    def _ok(self) -> None:
        path = self.query_one("#export-path", Input).value.strip()
        if path:
            self.dismiss((self.fmt, Path(path).expanduser()))

    @on(Button.Pressed, "#export-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
