"""Mixin of ProfTuiApp: the choices that change what every pane shows and that the app
remembers: the thread or process shown (`t`), how names read (`c`), and the settings
file (tui/settings.py) they and the theme, sort and `%` choice are kept in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet.query import FleetQuery, breakdown_name
from proftui.collectors.model.parts import describe_part, list_parts
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.textsafe import display
from proftui.tui import settings as settings_file
from proftui.tui.names import MODE_TITLES, next_mode
from proftui.tui.panes.base import Pane
from proftui.tui.panes.flat import SORTS, FlatPane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.screens.threads import ALL, MARK, REGROUP, SHOW, Picked, ThreadsScreen
from textual import work

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class ViewChoices(_Base):
    """Threads, names and remembered settings (ProfTuiApp's `t` and `c`)."""

    profile: Profile | None
    part: str | None
    metric: int
    name_mode: str
    settings: settings_file.Settings
    _settings_error: str
    _metric_restored: bool
    _whole: Profile | None
    _fleet: FleetQuery | None
    _part_mark_text: str
    after_shown: list[Callable[[], None]]

    if TYPE_CHECKING:  # ProfTuiApp's, which this mixin calls
        def panes(self) -> list[Pane]: ...
        def _update_header(self) -> None: ...
        def _prepare(self, profile: Profile, part: str | None) -> object: ...
        def _requeried(self, profile: Profile, what: str = ...) -> None: ...
        def mark_part(self, label: str | None, title: str) -> None: ...

    def action_threads(self) -> None:
        """The thread picker: all threads, one process or one thread, by share."""
        profile = self.profile
        if profile is None:
            self.notify("no profile yet", severity="warning")
            return
        choices = list_parts(profile, self.metric, keep=(self.part,))
        fleet = self._fleet
        if len(choices) < 2 and self.part is None and fleet is None:
            self.notify("this profile has no per-thread data (one thread, or a collector "
                        "that does not record threads)")
            return
        breakdown = next_breakdown = ""
        if fleet is not None:
            breakdown = breakdown_name(fleet.url.by)
            next_breakdown = breakdown_name(fleet.next_breakdown())
        self.push_screen(ThreadsScreen(choices, self.metric, profile.metrics, self.part,
                                       breakdown, next_breakdown, self._part_mark_text),
                         self._threads_chosen)

    def _threads_chosen(self, choice: Picked | None) -> None:
        if choice is None:
            return
        action, label = choice
        part = None if label == ALL else label
        if action == SHOW:
            self.select_part(part)
        elif action == MARK and self.profile is not None:
            self.mark_part(part, describe_part(self.profile, part).title())
        elif action == REGROUP and self._fleet is not None:
            by = self._fleet.next_breakdown()
            self.notify(f"breaking the profile down by {breakdown_name(by)}…")
            self._regroup(self._fleet, by)

    @work(thread=True, exclusive=True, group="requery")
    def _regroup(self, shown: FleetQuery, by: tuple[str, ...]) -> None:
        """The fleet profile broken down by `by`, off the UI thread (the answer shown
        regrouped, or a query when it lacks the rows); the picker opens on its parts."""
        try:
            fleet, profile = shown.broken_down(by)
        except ProftuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self._regrouped, fleet, profile)

    def _regrouped(self, fleet: FleetQuery, profile: Profile) -> None:
        self._fleet = fleet
        self.after_shown.append(self.action_threads)  # the picker on the new parts
        self._requeried(profile, f"parts by {breakdown_name(fleet.url.by)}")

    def select_part(self, part: str | None) -> None:
        """Show only thread or process `part` (None: all) in every pane and the header."""
        if part == self.part:
            return
        self.part = part
        for pane in self.panes():
            pane.part = part
        self._update_header()
        self.refresh_bindings()  # Esc may now zoom out
        if self._whole is not None:
            self._prepare(self._whole, part)  # the part's flat profile, then every pane
        self.notify(f"showing {display(self._part_title())}")

    def _part_title(self) -> str:
        if self.part is None or self.profile is None:
            return "all threads"
        return describe_part(self.profile, self.part).title()

    def action_names(self) -> None:
        """Cycle the names: full, templates shortened, templates and parameters shortened."""
        self._set_name_mode(next_mode(self.name_mode))
        self.notify(f"names: {MODE_TITLES[self.name_mode]}")
        self._save_settings()

    def _set_name_mode(self, mode: str) -> None:
        self.name_mode = mode
        for pane in self.panes():
            setter = getattr(pane, "set_name_mode", None)  # panes that show names
            if setter is not None:
                setter(mode)

    def _restore_settings(self) -> None:
        """Apply the remembered choices at mount; later changes save them."""
        s = self.settings
        if self._settings_error:
            self.notify(self._settings_error, severity="warning", timeout=8)
        if s.theme is not None and s.theme in self.available_themes:
            self.theme = s.theme
        for pane in self.panes():
            if isinstance(pane, FlatPane) and s.sort is not None:
                pane.sort_key = s.sort
                pane.descending = s.descending if s.descending is not None else s.sort != "name"
            if isinstance(pane, CallTreeView):
                pane.percent_of_parent = s.percent_of_parent
        self._set_name_mode(self.name_mode)
        self.theme_changed_signal.subscribe(self, lambda _theme: self._save_settings())

    def _save_settings(self) -> None:
        """Write the current choices (one warning if the file cannot be written)."""
        s = self.settings
        s.theme, s.names = self.theme, self.name_mode
        if self._metric_restored and self.profile is not None \
                and self.metric < len(self.profile.metrics):
            s.metric = self.profile.metrics[self.metric].name
        for pane in self.panes():
            if isinstance(pane, FlatPane) and pane.sort_key in SORTS:  # not a Δ sort
                s.sort, s.descending = pane.sort_key, pane.descending
            if isinstance(pane, CallTreeView):
                s.percent_of_parent = pane.percent_of_parent
        error = settings_file.save(s)
        if error and error != self._settings_error:
            self._settings_error = error
            self.notify(error, severity="warning", timeout=8)

