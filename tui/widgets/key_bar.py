"""The key bar: every active binding with its key, on one line.

Textual's Footer rebuilds one widget per key on each focus change (30-100 ms
per pane switch here); this bar redraws a single line of text instead.
Clicking a key presses it.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.screen import Screen
from textual.widgets import Static

KEY_STYLE = Style(bold=True, color="rgb(255,175,0)")
DISABLED_STYLE = Style(dim=True)


class KeyBar(Static):
    """Active bindings of the focused widget chain, screen and app (those with show=True)."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self._redraw)

    def _bindings_changed(self, screen: Screen) -> None:
        if self.is_attached and screen is self.screen:
            self._redraw()

    def _redraw(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        seen: set[str] = set()
        palette = None
        for key, (_node, binding, enabled, _tip) in self.screen.active_bindings.items():
            if key == self.app.COMMAND_PALETTE_BINDING:
                palette = binding
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            click = Style(meta={"@click": f"app.simulate_key({binding.key.split(',')[0]!r})"})
            text.append(f" {self.app.get_key_display(binding)} ",
                        style=(KEY_STYLE if enabled else DISABLED_STYLE) + click)
            text.append(f"{binding.description} ", style=(Style() if enabled
                                                          else DISABLED_STYLE) + click)
        if palette is not None:
            text.append(f"  {self.app.get_key_display(palette)} ", style=KEY_STYLE)
            text.append("palette ")
        self.update(text)
