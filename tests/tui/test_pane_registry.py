"""The pane registry: a pane is its module plus one line in a `PANES` list."""

from __future__ import annotations

from typing import ClassVar

from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.views import FlatEntry
from proftui.tui.app import PANES, ProfTuiApp
from proftui.tui.panes.base import NavState, Pane
from proftui.tui.panes.flat import FlatPane
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from tests.helpers.collect import attach_profile
from tests.helpers.tui import run_app, screen_text, wait_for


class CountPane(Pane, Static):
    """A pane no app code knows about: shows the number of functions of the profile."""

    KEY, PANE_ID, TITLE, TAB = "7", "count", "Function count", "Count"
    HINT = "How many functions the profile has"

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        self.update(f"{len(entries)} functions in view")

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        self.seen = state.source  # the shared selection reaches every pane

    def focus_widget(self) -> Widget | None:
        return None


class CountApp(ProfTuiApp):
    PANES: ClassVar[list[type[Pane]]] = [*PANES, CountPane]  # the registration: one line


def test_registry_declares_every_pane_once() -> None:
    assert [p.KEY for p in PANES] == ["1", "2", "3", "4", "5", "6"]
    assert len({p.PANE_ID for p in PANES}) == len(PANES)
    assert all(p.TITLE and p.TAB and p.HINT for p in PANES)


def test_a_registered_pane_is_wired_into_the_app() -> None:
    profile = attach_profile()

    async def body(pilot: Pilot, app: CountApp) -> None:
        await wait_for(pilot, lambda: bool(app._entries), what="flat profile")
        text = screen_text(app)
        assert "7 Count" in text.splitlines()[1]  # its breadcrumb tab
        assert " 7 Count " in text.rstrip("\n").splitlines()[-1]  # its key in the key bar
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Function count (7)" in titles
        flat_row = app.pane("flat").selected_frame()
        assert isinstance(flat_row, Frame)
        await pilot.press("7")
        assert app.nav[-1].pane == "count" and app.nav[-1].label == "Function count"
        pane = app.query_one(CountPane)
        assert pane.display and not app.query_one(FlatPane).display
        assert f"{len(app._entries)} functions in view" in screen_text(app)
        await pilot.press("3")  # on to the source of nothing: the count pane has no cursor
        assert app.nav[-1].pane == "source" and app.nav[-1].source is None
        await pilot.press("escape", "escape")
        assert app.nav[-1].pane == "flat" and len(app.nav) == 1

    run_app(CountApp(profile=profile), body)
