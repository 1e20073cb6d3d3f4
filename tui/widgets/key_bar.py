"""The key bar: the active bindings with their keys, on one line that always fits.

Textual's Footer rebuilds one widget per key on each focus change (30-100 ms
per pane switch here); this bar redraws a single line of text instead.
Clicking a key presses it.

When the line is too long for the terminal (80 columns), the bar gives way in
this order: the palette hint goes, then the app-wide keys from the last, then
the pane keys become one compact item (`1-6 panes`) and the app-wide keys
that now fit come back, then the pane's own keys go from the last.  `?` Help
and `q` Quit always stay: help lists everything that was left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Static

PINNED = ("help", "quit")  # app actions that are never left out


@dataclass(frozen=True)
class Item:
    key: str  # as displayed
    description: str
    enabled: bool
    press: str | None  # the key a click presses, None: not clickable

    def width(self) -> int:
        return len(self.key) + len(self.description) + 3

    def render(self, text: Text, key_style: Style, disabled: Style) -> None:
        click = Style(meta={"@click": f"app.simulate_key({self.press!r})"}) if self.press \
            else Style()
        text.append(f" {self.key} ", style=(key_style if self.enabled else disabled) + click)
        text.append(f"{self.description} ", style=(Style() if self.enabled else disabled)
                    + click)


def compact_keys(keys: list[str]) -> str:
    """`1-4` for consecutive digits, else the keys joined: `1/2/5`."""
    if len(keys) > 2 and all(k.isdigit() and len(k) == 1 for k in keys) and \
            [int(k) for k in keys] == list(range(int(keys[0]), int(keys[0]) + len(keys))):
        return f"{keys[0]}-{keys[-1]}"
    return "/".join(keys)


def fit(local: list[Item], panes: list[Item], app: list[Item], pinned: list[Item],
        palette: Item | None, width: int) -> list[Item]:
    """The richest line that fits `width` columns, in display order (see the module doc)."""
    options = [local + panes + app + pinned + ([palette] if palette else [])]
    options += [local + panes + app[:n] + pinned for n in range(len(app), -1, -1)]
    compact = [Item(compact_keys([p.key for p in panes]), "panes", True, None)] \
        if len(panes) > 1 else panes
    options += [local + compact + app[:n] + pinned for n in range(len(app), -1, -1)]
    options += [local[:n] + compact + pinned for n in range(len(local) - 1, -1, -1)]
    return next((o for o in options if sum(i.width() for i in o) <= width), pinned)


class KeyBar(Static):
    """Active bindings of the focused widget chain, screen and app (those with show=True).

    Colours come from the theme (proftui.tcss: the footer's theme variables)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"key-bar--key", "key-bar--disabled"}

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self._redraw)

    def on_resize(self, _event: Resize) -> None:
        self._redraw()

    def _bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen:
            self._redraw()

    def items(self) -> tuple[list[Item], list[Item], list[Item], list[Item], Item | None]:
        """The shown bindings sorted out: the pane's own (focused chain), pane switches,
        app-wide, pinned (help, quit), and the palette key."""
        local: list[Item] = []
        panes: list[Item] = []
        app: list[Item] = []
        pinned: list[Item] = []
        palette = None
        seen: set[str] = set()
        for key, (node, binding, enabled, _tip) in self.screen.active_bindings.items():
            if key == self.app.COMMAND_PALETTE_BINDING:
                palette = Item(self.app.get_key_display(binding), "palette", True, key)
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            item = Item(self.app.get_key_display(binding), binding.description, enabled,
                        binding.key.split(",")[0])
            if node is not self.app:
                local.append(item)
            elif binding.action.startswith("pane("):
                panes.append(item)
            elif binding.action in PINNED:
                pinned.append(item)
            else:
                app.append(item)
        return local, panes, app, pinned, palette

    def _redraw(self) -> None:
        width = self.size.width or self.app.size.width
        text = Text(no_wrap=True, overflow="ellipsis")
        key_style = self.get_component_rich_style("key-bar--key", partial=True)
        disabled = self.get_component_rich_style("key-bar--disabled", partial=True)
        for item in fit(*self.items(), width=width):
            item.render(text, key_style, disabled)
        self.update(text)
