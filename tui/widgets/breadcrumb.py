"""Where the user is: the pane tabs and the drill-down trail."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class Breadcrumb(Static):
    """Pane tabs on the left, then the trail of drill-down steps (Escape walks back)."""

    def show(self, tabs: list[tuple[str, str]], current: str, trail: list[str]) -> None:
        """`tabs`: (pane id, label) of every pane; `current`: the id of the one shown."""
        text = Text()
        for pane, label in tabs:
            style = "bold reverse" if pane == current else "dim"
            text.append(f" {label} ", style=style)
            text.append(" ")
        if trail:
            text.append("  ")
            for i, step in enumerate(trail):
                if i:
                    text.append(" › ", style="dim")
                text.append(step, style="bold" if i == len(trail) - 1 else "")
        self.update(text)
