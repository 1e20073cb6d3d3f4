"""Keys typed right after `/` go to the prompt it opens, not to the pane behind it.

Textual forwards each key to the widget focused when the app reads it, and runs
a pane's `/` binding only when that key has bubbled back up to the app. A user
who types "/lua" or "/fn_" in one burst had "lua" sent to the table (lost) or
"f" and "n" run as the tree's focus and next-match keys before the prompt
existed. `TypeAhead` holds the keys that follow a `/` whose binding opens a
prompt until an `Input` has focus, then replays them in order; a deadline
replays them anyway if no prompt comes.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import App
from textual.timer import Timer
from textual.widgets import Input

PROMPT_ACTIONS = frozenset({"filter", "search"})  # `/` bindings that open an Input
HOLD_S = 0.5  # no Input focused by then: the held keys go where they would have


class TypeAhead(App[Any]):
    """An App mixin: the type-ahead after a prompt-opening `/` (module docstring)."""

    _held: list[events.Key] | None = None
    _held_timer: Timer | None = None

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            if self._held is not None:
                self._held.append(event)
                return
            if event.key == "slash" and not isinstance(self.focused, Input) \
                    and self._opens_prompt(event.key):
                self._held = []
                self._held_timer = self.set_timer(HOLD_S, self.release_keys)
        await super().on_event(event)

    def _opens_prompt(self, key: str) -> bool:
        active = self.screen.active_bindings.get(key)
        return active is not None and active.enabled and active.binding.action in PROMPT_ACTIONS

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if self._held is not None and isinstance(event.widget, Input):
            self.release_keys()

    def release_keys(self) -> None:
        """Replay the held keys (to the widget focused now) and stop holding."""
        held, self._held = self._held, None
        if self._held_timer is not None:
            self._held_timer.stop()
            self._held_timer = None
        for key in held or ():
            self.post_message(events.Key(key.key, key.character))
