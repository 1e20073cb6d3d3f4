"""What a pane declares so the app can host it: the pane protocol.

A pane is a widget class that also inherits `Pane` and sets its class
attributes (key, id, titles); the app lists the classes in `ProfTuiApp.PANES`
and derives from that list the content switcher, the pane keys, the
breadcrumb tabs and the palette entries.  The hooks below have do-nothing
defaults, so a pane overrides only those it needs.

Adding a pane: write tui/panes/NAME.py with `class MyPane(Pane, Vertical)`
setting KEY, PANE_ID, TITLE, TAB and HINT, and add `MyPane` to `PANES` in
tui/app.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.views import FlatEntry
from proftui.collectors.runtime.process_status import ProcStat
from textual.message import Message
from textual.widget import Widget

View = Literal["top-down", "bottom-up", "focus"]
Command = tuple[str, str, Callable[[], object]]  # palette title, help text, callback


@dataclass(frozen=True)
class NavState:
    """One step of the drill-down trail; Escape returns to the previous one.

    Besides the pane shown, a step carries the selections that panes share
    (the tree's view and focused function, the function whose source is shown),
    so that switching panes with the number keys keeps them.
    """

    pane: str
    label: str
    tree_view: View = "top-down"
    focus: Frame | None = None
    source: Frame | None = None


@dataclass
class Drill(Message):
    """Posted by a pane: push a step to pane `pane` with `changes` applied to the current
    step (e.g. Enter on a function: `Drill("tree", {"tree_view": "focus", "focus": f})`)."""

    pane: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass
class SelectPart(Message):
    """Posted by a pane: show only process/thread `part` (a `Profile.parts` label, or
    None for all), as the thread picker does (e.g. Enter on a thread row of the tree)."""

    part: str | None


class Pane:
    """Mixin for a pane widget: its registry declaration and the app's hooks into it."""

    # The process or thread shown (a `Profile.parts` label; None: all of them).  Like the
    # metric it is the app's choice: the app sets it on every pane before calling
    # show_profile / show_step; panes that cannot narrow to it say so.
    part: str | None = None

    KEY: ClassVar[str]  # the key that shows the pane ("1")
    PANE_ID: ClassVar[str]  # widget id and `NavState.pane` ("flat")
    TITLE: ClassVar[str]  # trail label and palette title ("Flat profile")
    TAB: ClassVar[str]  # breadcrumb tab and key bar word ("Flat")
    HINT: ClassVar[str] = ""  # palette help text (Textual uses HELP)
    @classmethod
    def enter(cls, state: NavState, under_cursor: Frame | None) -> NavState:
        """The step that pressing KEY makes from `state` (already switched to this pane);
        `under_cursor` is the function selected in the pane being left, if any."""
        return state

    @classmethod
    def label(cls, state: NavState) -> str:
        """The trail label of a step showing this pane."""
        return cls.TITLE

    def begin(self, live: bool, has_profile: bool) -> None:
        """Once at mount: a live collector, or a saved profile (`has_profile`) or nothing."""

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        """A new profile (snapshot or metric change); `state` is None when the pane is hidden."""

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        """The pane becomes current for `state` (number key, drill-down or Escape)."""

    def show_process(self, stat: ProcStat, note: str) -> None:
        """A new sample of the target process; `note` says how it ended, if it has."""

    def focus_widget(self) -> Widget | None:
        """The widget to focus when the pane is shown (None: leave the focus alone)."""
        return None

    def selected_frame(self) -> Frame | None:
        """The function under the cursor (what `3` opens the source of)."""
        return None

    def commands(self) -> list[Command]:
        """Palette entries that act in this pane (the app switches to it first)."""
        return []


def drill(pane: str, **changes: Any) -> Drill:
    """A `Drill` message: `drill("source", source=frame)`."""
    return Drill(pane, changes)


def step_to(pane: type[Pane], state: NavState, **changes: Any) -> NavState:
    """`state` switched to `pane` with `changes`, labelled by the pane."""
    new = replace(state, pane=pane.PANE_ID, **changes)
    return replace(new, label=pane.label(new))
