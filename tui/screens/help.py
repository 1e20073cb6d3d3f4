"""The help screen (`?`, F1): every key of the current pane and of the app, grouped.

The lists are read from the live bindings (`pane_keys`, `app_keys`), never
written by hand, so help cannot drift from what the keys do; the command
palette's entries are built from the same lists (`palette_entries`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.dom import DOMNode
from textual.keys import key_to_character
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Label, Static


@dataclass(frozen=True)
class KeyEntry:
    """One action and the keys bound to it, on the node that runs it."""

    keys: tuple[str, ...]  # as displayed: ("n", "esc")
    names: tuple[str, ...]  # Textual's key names: ("n", "escape")
    description: str  # the key bar's word
    tooltip: str  # a longer explanation, if the binding gives one
    node: DOMNode  # runs `action` (its namespace)
    action: str
    shown: bool  # in the key bar

    @property
    def key_text(self) -> str:
        return ", ".join(self.keys)

    @property
    def printable(self) -> bool:
        """A character key among the keys ("s", "/", "?"; not space, arrows, Enter)."""
        return any(_char(k) for k in self.names)

    @property
    def spelled(self) -> str:
        """The keys as the palette spells them: "/", "Escape", "Ctrl+C", "Enter"."""
        def one(name: str) -> str:
            char = _char(name)
            if char:
                return char
            return "+".join(part.capitalize() for part in name.split("+"))
        return ", ".join(one(k) for k in self.names)


def _char(key: str) -> str | None:
    """The visible character a key types ("slash": "/"), None for Escape, space, arrows."""
    char = key_to_character(key)
    return char if char and char.isprintable() and not char.isspace() else None


def _own_bindings(node: DOMNode) -> Iterable[Binding]:
    """What a user can press on `node`: every binding of a proftui class, and those
    Textual gives it, except a text box's editing keys (cursor, delete, copy...)."""
    mine = [cls for cls in type(node).__mro__ if cls.__module__.startswith("proftui.")]
    if isinstance(node, Input):
        for cls in reversed(mine):  # base classes first, as Textual merges them
            for item in cls.__dict__.get("BINDINGS", []):
                yield from Binding.make_bindings([item])
        return
    for _key, binding in node._bindings:
        if not binding.system:
            yield binding


def collect(app: App[Any], nodes: Iterable[DOMNode]) -> list[KeyEntry]:
    """The bindings of `nodes` (earlier nodes win a key), one entry per action: the
    key-bar ones first, in declaration order, then the others."""
    taken: set[str] = set()
    by_action: dict[tuple[int, str], list[Binding]] = {}
    owner: dict[tuple[int, str], DOMNode] = {}
    for node in nodes:
        for binding in _own_bindings(node):
            if binding.key in taken:
                continue
            taken.add(binding.key)
            ident = (id(node), binding.action)
            by_action.setdefault(ident, []).append(binding)
            owner[ident] = node
    entries = []
    for ident, bindings in by_action.items():
        # A subclass's binding (declared last) explains best; character keys first ("q, ^q").
        tooltip = next((b.tooltip for b in reversed(bindings) if b.tooltip), "")
        bindings.sort(key=lambda b: _char(b.key) is None)
        first = bindings[0]
        entries.append(KeyEntry(
            keys=tuple(dict.fromkeys(app.get_key_display(b) for b in bindings)),
            names=tuple(dict.fromkeys(b.key for b in bindings)),
            description=first.description or first.action,
            tooltip=tooltip,
            node=owner[ident], action=first.action, shown=any(b.show for b in bindings)))
    entries.sort(key=lambda e: not e.shown)  # stable: declaration order within each half
    return entries


def pane_keys(app: App[Any], pane: Widget) -> list[KeyEntry]:
    """Every key of a pane, as Textual looks them up: its focus widget's first (they
    win a key the pane also binds), then the pane's, then its other widgets'."""
    focus = getattr(pane, "focus_widget", lambda: None)()
    first = [focus] if focus is not None and focus is not pane else []
    inner = [w for w in pane.walk_children(Widget) if w is not focus]
    return collect(app, [*first, pane, *inner])


def app_keys(app: App[Any]) -> list[KeyEntry]:
    """The keys that work everywhere (pane keys, back, metric, export, quit, palette...),
    less those the app hides here (pause and reset for a saved profile)."""
    return [e for e in collect(app, [app]) if app.check_action(e.action, ()) is not False]


def explain(entry: KeyEntry) -> str:
    """The help text of an entry: its word, and its tooltip when that says more."""
    what, more = entry.description, entry.tooltip
    if not more or more == what:
        return what
    return more if more.lower().startswith(what.lower()) else f"{what}: {more}"


Command = tuple[str, str, Callable[[], object]]  # palette title, help text, callback


@dataclass(frozen=True)
class PaneEntry:
    """What the palette needs to know of a pane (screens do not import the panes)."""

    pane_id: str
    title: str  # "Flat profile"
    key: str  # "1"
    hint: str  # the palette's help text
    widget: Widget
    commands: list[Command]  # the pane's own palette entries (Pane.commands)


def palette_entries(app: App[Any], panes: Sequence[PaneEntry],
                    show: Callable[[str], None]) -> list[Command]:
    """Every key as a palette entry "Title (key)", from the same bindings as the help
    screen: the panes, the app's keys (those it hides or greys out here are left out,
    Back excepted), then each pane's own commands and every key of the pane that is in
    the key bar or is a character key.  `show(pane_id)` shows a pane first."""
    def on_pane(pane_id: str, action: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            show(pane_id)
            return action()
        return run

    commands: list[Command] = [(f"{p.title} ({p.key})", p.hint, partial(show, p.pane_id))
                               for p in panes]
    for entry in app_keys(app):
        state = app.check_action(entry.action, ())
        if entry.action.startswith("pane(") or entry.action == "command_palette" or \
                state is False or (state is None and entry.action != "back"):
            continue  # the pane entries above, or greyed out (pause once the target ended)
        commands.append((f"{entry.description} ({entry.spelled})", entry.tooltip,
                         partial(app.run_action, entry.action)))
    for pane in panes:
        commands += [(title, help_text, on_pane(pane.pane_id, action))
                     for title, help_text, action in pane.commands]
        titled = " ".join(title for title, _, _ in pane.commands)
        for entry in pane_keys(app, pane.widget):
            if not (entry.shown or entry.printable) or \
                    any(f"({k})" in titled for k in entry.keys):
                continue  # a movement key, or already one of the pane's own commands
            commands.append((f"{entry.description} ({entry.spelled})", entry.tooltip,
                             on_pane(pane.pane_id,
                                     partial(app.run_action, entry.action, entry.node))))
    return commands


class HelpScreen(ModalScreen[None]):
    """Keys grouped by where they work; Escape, `q`, `?` or F1 close it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "close", "Close"),
    ]

    def __init__(self, groups: list[tuple[str, list[KeyEntry]]]) -> None:
        """`groups`: (title, entries), e.g. ("Call tree (this pane)", pane_keys(...))."""
        super().__init__()
        self.groups = groups

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-dialog"):
            yield Label("Keys   (Esc closes; every action is also in the palette: ctrl+p)",
                        id="help-title")
            for title, entries in self.groups:
                yield Label(title, classes="help-group")
                for entry in entries:
                    what = explain(entry)
                    with Horizontal(classes="help-row"):
                        yield Static(entry.key_text, classes="help-key", markup=False)
                        yield Static(what, classes="help-what", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
