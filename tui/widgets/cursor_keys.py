"""The keys that move a cursor row: one set for every widget that has one (the flat
table, the source listing), so they move alike everywhere."""

from __future__ import annotations

from textual.binding import Binding


def cursor_bindings(page_up: str, page_down: str) -> list[Binding]:
    """Up, Down, Page up, Page down, Home and End, for a widget whose action `move(rows)`
    moves its cursor; `page_up` and `page_down` are the actions of the page keys."""
    return [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", page_up, "Page up", show=False),
        Binding("pagedown", page_down, "Page down", show=False),
        Binding("home", "move(-1000000000)", "Top", show=False),
        Binding("end", "move(1000000000)", "End", show=False),
    ]
