"""ProfTuiApp: the panes of `PANES`, keyboard drill-down with a back stack, live polling.

Each pane is one module under tui/panes/ declaring itself through the
`tui.panes.base.Pane` protocol; `PANES` below lists them (one line each, the
order of the breadcrumb tabs), and the app derives from it the pane keys,
tabs and palette entries.

A worker thread runs the live update loop (tui/poller.py): snapshots while the
data changes, the views computed off the UI thread, one `Snapshot` message each;
the app only hands the frozen profile to the panes.  When the target ends, the
final profile (carrying the exit status) stays on screen and is what
`final_profile()` returns.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, cast

from proftui.collectors.base import Collector
from proftui.collectors.fleet.query import FleetQuery
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import FlatEntry
from proftui.collectors.runtime.launch import ExitInfo, StopSignals
from proftui.collectors.runtime.process_status import ProcStat
from proftui.tui import settings as settings_file
from proftui.tui.diffstate import DiffViews, Views
from proftui.tui.format import metric_label, use_theme
from proftui.tui.input_driver import terminal_driver
from proftui.tui.panes.base import Command, Drill, NavState, Pane, SelectPart, step_to
from proftui.tui.panes.flame import FlamePane
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.process import ProcPane
from proftui.tui.panes.source import SourcePane
from proftui.tui.panes.timeline import TimelinePane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.poller import Poller, ProcUpdate, Snapshot, TargetEnded
from proftui.tui.run_controls import RunControls
from proftui.tui.screens.help import HelpScreen, PaneEntry, app_keys, palette_entries, pane_keys
from proftui.tui.screens.main import MainScreen
from proftui.tui.screens.notes import NotesScreen, profile_notes
from proftui.tui.type_ahead import TypeAhead
from proftui.tui.view_choices import ViewChoices
from proftui.tui.widgets.breadcrumb import Breadcrumb
from proftui.tui.widgets.header_bar import HeaderBar
from proftui.tui.widgets.key_bar import KeyBar
from proftui.tui.widgets.search_prompt import SearchPrompt
from proftui.tui.widgets.status_line import NameSelected, SettingChanged, StatusLine
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingsMap, BindingType
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher

HEADER_TICK_S = 0.5  # the live header's clock is redrawn this often
# What the header's "incomplete" means (the notes, `w`, say it).
INCOMPLETE_NOTE = ("incomplete: this profile was taken before the target's data was all in "
                   "(saved or detached while it ran, or it was killed while writing): the "
                   "counts are true for what was recorded, the end of the run is missing")

# The panes, in tab order; the first is shown at start.  A new pane: its module plus one line.
PANES: list[type[Pane]] = [
    FlatPane,
    CallTreeView,
    SourcePane,
    ProcPane,
    FlamePane,
    TimelinePane,
]


def _shown_within(widget: Widget, pane: Widget) -> bool:
    """`widget` is `pane` or inside it, and neither it nor a parent is `display: none`."""
    node: Widget | None = widget
    while node is not None:
        if not node.display:
            return False
        if node is pane:
            return pane.is_attached
        node = node.parent if isinstance(node.parent, Widget) else None
    return False


class ProfTuiApp(TypeAhead, ViewChoices, RunControls, DiffViews, App[None]):
    """Browse a saved profile, or watch a collector's live one."""

    CSS_PATH = Path(__file__).with_name("proftui.tcss")  # absolute: subclasses live elsewhere
    TITLE = "proftui"
    PANES: ClassVar[list[type[Pane]]] = PANES  # a subclass may list other panes
    # Plus each pane's key, first (see __init__).  The help screen and the palette are
    # generated from these (tui/screens/help.py): the tooltip is their longer text.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", tooltip="Return to the previous step of the trail"),
        Binding("m", "metric", "Metric", tooltip="Show the next metric (samples, CPU time...)"),
        # Key bar order is priority: keys from the last give way first on narrow terminals.
        Binding("e", "export", "Save/Export",
                tooltip="Save the profile (.proftui) or export it (pprof, folded...)"),
        Binding("c", "names", "Names", show=False,
                tooltip="Cycle full names, templates <…>, templates and parameters (…)"),
        Binding("t", "threads", "Threads",
                tooltip="Show one thread or process, or all (threads by share)"),
        Binding("p", "pause", "Pause", tooltip="Pause or resume collection in the target"),
        Binding("r", "reset", "Reset", tooltip="Reset the counters: count from now on"),
        Binding("w", "notes", "Notes", tooltip="Warnings about this profile, in full"),
        Binding("b", "mark", "Mark", show=False,
                tooltip="During a live run, mark a baseline now (again: re-mark); B shows "
                        "the change since"),
        Binding("B", "since_mark", "Since mark", show=False,
                tooltip="Whole profile or the phase since the mark, with Δ against the phase "
                        "before it (with --base: Δ columns on or off)"),
        Binding("x", "clear_mark", "Clear mark", show=False,
                tooltip="Forget the live baseline mark: back to the whole profile"),
        Binding("a", "normalise", "Δ shares/absolute", show=False,
                tooltip="Δ columns in points of each profile's total, or in cost units"),
        Binding("question_mark,f1", "help", "Help", tooltip="Every key, grouped"),
        Binding("q", "quit", "Quit",
                tooltip="Quit (asks before killing a running target; attach detaches)"),
        # Priority: the screen's own ctrl+c (copy text) would otherwise take it.
        Binding("ctrl+c", "interrupt", "Interrupt", show=False, priority=True,
                tooltip="As in a shell: SIGINT to a launched target, detach from an "
                        "attached one, and quit"),
    ]

    def _fleet_whole(self) -> Profile:
        assert self._fleet is not None
        return self._fleet.load()

    def _fleet_window(self, start: float, end: float) -> Profile:
        assert self._fleet is not None
        return self._fleet.load_window(start, end)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, or on a Linux terminal the one that takes a lone Esc when
        its delay ends (tui/input_driver.py)."""
        return terminal_driver(super().get_driver_class())

    def __init__(self, collector: Collector | None = None, profile: Profile | None = None,
                 stop_signals: StopSignals | None = None, base: Profile | None = None,
                 base_name: str = "base", reload: Callable[[], Profile] | None = None,
                 source: str = "",
                 load_range: Callable[[float, float], Profile] | None = None,
                 fleet: FleetQuery | None = None) -> None:
        """`stop_signals`: SIGTERM/SIGHUP caught by the CLI; the app exits on them
        through its normal path, so the terminal is restored.  `base`: a profile to
        compare with (`open NEW --base BASE`), named `base_name` in the header.
        `reload`: runs the query `profile` came from again (a fleet URL, named `source`
        in the header); `r` calls it.  `load_range`: that query over a window (Unix
        seconds), for a range picked in a fleet profile's timeline.  `fleet`: the
        fleet query `profile` came from, which gives both and the picker's breakdowns
        (`g`)."""
        super().__init__()
        self._fleet = fleet
        # what to do once the next whole profile is shown (the picker after a breakdown)
        self.after_shown: list[Callable[[], None]] = []
        if fleet is not None:
            reload = self._fleet_whole
            load_range = self._fleet_window
            source = source or fleet.url.display()
        # The pane keys come from the registry; they lead the key bar, as the tabs do.
        keys = BindingsMap([Binding(p.KEY, f"pane({p.PANE_ID!r})", p.TAB, tooltip=p.TITLE)
                            for p in self.PANES])
        own = dict(self._bindings.key_to_bindings)
        if reload is not None:  # `r` re-runs the query instead of resetting counters
            own["r"] = [Binding("r", "reset", "Re-query",
                                tooltip="Run the fleet query again (a live fleet view)")]
        self._bindings = BindingsMap.from_keys({**keys.key_to_bindings, **own})
        self._reload = reload
        self._load_range = load_range
        self._source = source
        self._queried_at = time.time() if reload is not None else None
        self.collector = collector
        self.profile: Profile | None = profile  # as shown (the phase since a mark, if chosen)
        self._whole: Profile | None = profile  # the latest whole profile
        self._entries: list[FlatEntry] = []
        # What the Δ columns compare with (tui/diffstate.py): `baseline`, `normalise`.
        self.init_diff(base, base_name)
        self.metric = 0
        self.part: str | None = None  # the thread or process shown (a parts label; None: all)
        self._gc_frozen = False  # a saved profile's objects were gc.freeze()d
        # Remembered choices (tui/settings.py): read once here, saved when one changes.
        self.settings, self._settings_error = settings_file.load()
        self.name_mode = self.settings.names  # tui.names.MODES; `c` cycles it
        self._metric_restored = False
        first = self.PANES[0]  # shown at start
        self.nav: list[NavState] = [step_to(first, NavState(first.PANE_ID, ""))]
        self.paused = False
        self.frozen = False  # display frozen (collectors that cannot pause)
        self.exit_info: ExitInfo | None = None
        self.ended = collector is None
        self.finishing = False  # the target ended, its final profile is being read
        self._final: Profile | None = None
        self._error = ""
        self._proc: ProcStat | None = None
        self._reset_at: float | None = None  # time.time() of the last counter reset
        self.poller: Poller | None = None  # the live update loop, once it runs
        self._stop = threading.Event()
        self._poll_wake = threading.Event()  # set to end the poll worker's wait early
        self._stop_signals = stop_signals
        self._exit_soon: Callable[[int], None] | None = None

    # -- layout ----------------------------------------------------------------------

    def get_default_screen(self) -> Screen[Any]:
        return MainScreen(self.focus_pane, id="_default")

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Breadcrumb(id="breadcrumb")
        with ContentSwitcher(initial=self.nav[0].pane, id="panes"):
            for pane in self.PANES:
                yield cast("type[Widget]", pane)(id=pane.PANE_ID)  # a Pane is also a Widget
        yield StatusLine(id="status-line")
        yield SearchPrompt(id="search-prompt")
        yield KeyBar(id="keys")

    def pane(self, pane_id: str) -> Pane:
        """The widget of pane `pane_id`."""
        return cast(Pane, self.query_one("#panes", ContentSwitcher).get_child_by_id(pane_id))

    def panes(self) -> list[Pane]:
        """Every pane widget, in registry order."""
        return [self.pane(p.PANE_ID) for p in self.PANES]

    def _pane_class(self, pane_id: str) -> type[Pane]:
        return {p.PANE_ID: p for p in self.PANES}[pane_id]

    def on_mount(self) -> None:
        if self._stop_signals is not None:
            loop = asyncio.get_running_loop()

            def exit_soon(_signum: int) -> None:
                loop.call_soon_threadsafe(self.exit)  # inside a signal handler: schedule only

            self._exit_soon = exit_soon
            self._stop_signals.listen(exit_soon)
        use_theme(self.get_css_variables())
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        for pane in self.panes():
            pane.begin(live=self.collector is not None, has_profile=self.profile is not None)
        self._restore_settings()
        if self._whole is not None:
            self._prepare(self._whole, self.part)
        self._show_nav()
        self._update_header()
        if self.collector is not None:
            self.query_one(ProcPane).follow_output(self.collector.output(), self.collector.mode)
            if self.collector.pid is None:  # every process (--all): no one to show here
                self.query_one(ProcPane).show_message(
                    "every process of the host is sampled: no one process to show here "
                    "(t picks a process's threads in the other panes)")
            self._poll()
            # The header's clock moves on its own, twice a second, whatever the snapshots'
            # pace (one line: cheap).
            self.set_interval(HEADER_TICK_S, self._tick_header)

    def _theme_changed(self, _theme: object) -> None:
        """A theme picked in the palette: heat colours follow it, and rows drawn with
        the old ones (tree labels, table and source lines) are drawn again."""
        use_theme(self.get_css_variables())
        if self.profile is not None and self._entries:
            self._apply(self.profile, self._entries)
        for widget in self.screen_stack[0].query("*"):
            widget.refresh()

    @work(thread=True, exclusive=True, group="prepare")
    def _prepare(self, profile: Profile, part: str | None) -> None:
        """The flat profile of a saved profile (seconds for 200,000 nodes), or of a newly
        chosen thread, off the UI thread."""
        views = self._views(profile, part, self._view_key())
        self.call_from_thread(self._prepared, profile, part, views)
        if self.collector is None and not self._gc_frozen:
            # A saved profile lives as long as the app: take its (millions of) objects out
            # of the cyclic GC's scans, whose full passes otherwise stall keys for seconds.
            # After the first screen is drawn: the collection itself takes 0.1 s per
            # 70,000 fleet rows, which the first screen need not wait for.
            self._gc_frozen = True
            time.sleep(0.3)
            gc.collect()
            gc.freeze()

    def _prepared(self, profile: Profile, part: str | None, views: Views) -> None:
        if part == self.part and self.current_views(views) and (
                self._whole is None or self._whole is profile or self.collector is None):
            self._apply_views(profile, views)
            if self._whole is profile:
                shown, self.after_shown = self.after_shown, []
                for then in shown:
                    then()

    def _tick_header(self) -> None:
        if not self.ended:
            self._update_header()

    def wake_poll(self) -> None:
        """End the poll worker's wait now (a `b` mark wants a snapshot at once)."""
        self._poll_wake.set()

    def on_unmount(self) -> None:
        self._stop.set()
        self._poll_wake.set()
        if self._stop_signals is not None and self._exit_soon is not None:
            self._stop_signals.unlisten(self._exit_soon)

    # -- live polling ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll")
    def _poll(self) -> None:
        """The live update loop (tui/poller.py), in a worker thread."""
        assert self.collector is not None
        self.poller = Poller(self.collector, self)
        self.poller.run(self._stop, self._poll_wake)

    @property
    def snapshots_taken(self) -> int:
        """Snapshots the poller computed (not skipped), for tests."""
        return self.poller.snapshots_taken if self.poller is not None else 0

    @property
    def poll_rounds(self) -> int:
        """Snapshots the poller made.  Test seam (the observer tests)."""
        return self.poller.rounds if self.poller is not None else 0

    @property
    def shown_version(self) -> object | None:
        """The collector's data_version() the last snapshot was taken at."""
        return self.poller.shown_version if self.poller is not None else None

    def snapshot_views(self, profile: Profile) -> tuple[str | None, Views]:
        """For the poller (any thread): the part shown now and `profile`'s views of it."""
        part = self.part
        return part, self._views(profile, part, self._view_key())

    def take_mark_request(self) -> bool:
        """For the poller: whether a `b` mark waits for a fresh snapshot (cleared)."""
        wanted, self.mark_request = self.mark_request is not None, None
        return wanted

    def on_snapshot(self, message: Snapshot) -> None:
        self._error = message.error
        self.exit_info = message.exit
        if message.final:
            self.ended = True
            self.finishing = False
        if message.profile is not None:
            profile = message.profile
            if message.final and message.exit is not None and profile.meta.exit_status is None \
                    and profile.meta.exit_signal is None:
                profile.meta.exit_status = message.exit.status
                profile.meta.exit_signal = message.exit.signal
            if message.final:
                self._final = profile
            try:
                views = message.views
                if message.part != self.part or views is None or not self.current_views(views):
                    # A thread or a mark chosen while this snapshot was being made.
                    self._whole = profile
                    self._prepare(profile, self.part)
                else:
                    with self.batch_update():
                        self._apply_views(profile, views)
                if message.marked_at is not None and not message.final:
                    self.take_mark(profile, message.marked_at)
            except NoMatches:  # posted just before the app closed: its screen is gone
                return
        self._update_header()
        if message.final:
            info = message.exit
            failed = info is not None and (info.signal is not None or bool(info.status))
            has_output = self.collector is not None and self.collector.output() is not None
            self.query_one(ProcPane).target_ended(self._state_text(), failed)
            more = f"; press {ProcPane.KEY} for its output" if failed and has_output else ""
            self.notify(f"target {self._state_text()}: final profile shown{more}", timeout=6,
                        severity="warning" if failed else "information")
            self.refresh_bindings()

    def on_target_ended(self, message: TargetEnded) -> None:
        """The header stops saying "running" at once, before the final profile is in."""
        if self.ended:
            return
        self.exit_info = message.exit
        self.finishing = True
        try:
            self._update_header()
        except NoMatches:  # posted just before the app closed
            return

    def on_proc_update(self, message: ProcUpdate) -> None:
        if message.stat == self._proc or self._stop.is_set():
            return  # nothing moved (a process that sleeps), or the app is closing
        self._proc = message.stat
        note = self._state_text() if self.ended else (
            self.exit_info.describe() if self.finishing and self.exit_info is not None else "")
        try:
            panes = self.panes()
        except NoMatches:  # posted just before the app closed: its screen is gone
            return
        for pane in panes:
            pane.show_process(message.stat, note)
        if not self.ended:
            self._update_header()  # the elapsed time moves on without snapshots too

    def _apply(self, profile: Profile, entries: list[FlatEntry]) -> None:
        """Give a new profile to the panes; hidden panes refresh when shown."""
        self.profile, self._entries = profile, entries
        if not self._metric_restored and profile.metrics:
            self._metric_restored = True  # the remembered metric, if this profile has it
            names = [m.name for m in profile.metrics]
            if self.settings.metric in names:
                self.metric = names.index(self.settings.metric)
        if self.metric >= len(profile.metrics):
            self.metric = 0
        current = self.nav[-1]
        for pane in self.panes():
            pane.part = self.part
            pane.show_profile(profile, entries, self.metric,
                              current if current.pane == pane.PANE_ID else None)
        self._update_header()

    def _state_text(self) -> str:
        if self.collector is None and self._source:
            at = time.strftime("%H:%M:%S", time.localtime(self._queried_at or time.time()))
            return f"{self._source} at {at}"
        if self.collector is None:
            return "saved profile"
        if self.exit_info is not None:
            state = self.exit_info.describe()
        elif self.ended or self.finishing:
            state = "detached" if not self.collector.owns_target and self.ended else "ended"
        else:
            return "running"
        return state + (" · reading the final profile…" if self.finishing else "")

    def _update_header(self) -> None:
        pid = self.collector.pid if self.collector is not None else None
        state = self._state_text()
        if self.frozen:
            state += " (display frozen)"
        try:
            header = self.query_one(HeaderBar)
        except NoMatches:
            return  # a timer or worker's late call while the app closes: its screen is gone
        header.show(self.profile, pid=pid, state=state, paused=self.paused, error=self._error,
                    part=self.part, reset_at=self._reset_at, delta=self._delta_text(),
                    running=self.collector is not None and not self.ended, metric=self.metric)

    # -- navigation ------------------------------------------------------------------

    def go(self, state: NavState) -> None:
        """Push a step of the trail and show it."""
        if self.nav[-1] != state:
            self.nav.append(state)
            del self.nav[:-50]  # a long session must not grow the stack forever
        self._show_nav()

    def _show_nav(self) -> None:
        state = self.nav[-1]
        focused = self.focused
        self.query_one(ContentSwitcher).current = state.pane
        pane = self.pane(state.pane)
        pane.part = self.part
        pane.show_step(self.profile, state, self.metric)
        self.focus_pane(keep=False)
        frame = pane.selected_frame()
        if frame is None and state.pane == SourcePane.PANE_ID:
            frame = state.source  # the source pane names its function in the status line
        self.query_one(StatusLine).show(frame, getattr(pane, "status_note", ""))
        trail = [s.label for s in self.nav[-5:]]
        if len(self.nav) > 5:
            trail[0] = "…"
        tabs = [(p.PANE_ID, f"{p.KEY} {p.TAB}") for p in self.PANES]
        self.query_one(Breadcrumb).show(tabs, state.pane, trail)
        if self.focused is focused:
            # A focus change refreshes the footer by itself; each refresh rebuilds
            # every footer key (the costliest part of a pane switch).
            self.refresh_bindings()

    def focus_pane(self, keep: bool = True) -> None:
        """Put the focus in the visible pane: its focus widget, or nothing (keys then go
        to the app's bindings).  With `keep`, a focused widget shown inside the pane
        (the open filter box) keeps it.  Never a hidden widget (see MainScreen)."""
        pane = cast(Widget, self.pane(self.nav[-1].pane))
        screen = pane.screen
        focused = screen.focused
        if keep and focused is not None and _shown_within(focused, pane):
            return
        target = cast(Pane, pane).focus_widget()
        if target is not None and _shown_within(target, pane):
            screen.set_focus(target)
        elif focused is not None:
            screen.set_focus(None)

    def action_pane(self, pane_id: str) -> None:
        """Show pane `pane_id`, keeping the shared choices (tree view, source) of the step."""
        target = self._pane_class(pane_id)
        current = self.nav[-1]
        state = target.enter(replace(current, pane=pane_id),
                             self.pane(current.pane).selected_frame())
        self.go(step_to(target, state))

    async def action_back(self) -> None:  # App.action_back is a coroutine too
        if len(self.nav) > 1:
            self.nav.pop()
            self._show_nav()
        elif self.part is not None:  # at the trail's start: zoom out to all threads (perf)
            self.select_part(None)
        else:
            self.bell()

    @on(Drill)
    def _drill(self, message: Drill) -> None:
        """A pane's drill-down (Enter on a function, a tree view change...)."""
        self.go(step_to(self._pane_class(message.pane), self.nav[-1], **message.changes))

    # -- actions ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide live-only keys for saved profiles; grey them out once the target ended."""
        if action == "reset" and self._reload is not None:
            return True
        if action in ("pause", "reset"):
            if self.collector is None:
                return False
            return None if self.ended else True
        if action == "back":
            return True if len(self.nav) > 1 or self.part is not None else None
        return True

    def action_metric(self) -> None:
        if self.profile is None or len(self.profile.metrics) < 2:
            self.notify("this profile has a single metric")
            return
        self.metric = (self.metric + 1) % len(self.profile.metrics)
        self._apply(self.profile, self._entries)
        self._save_settings()
        self.notify(f"showing {metric_label(self.profile.metrics[self.metric])}")

    @on(SelectPart)
    def _select_part_message(self, message: SelectPart) -> None:
        self.select_part(message.part)

    @on(SettingChanged)
    def _setting_changed(self) -> None:
        self._save_settings()

    @on(NameSelected)
    def name_selected(self, message: NameSelected) -> None:
        """The shown pane's selection, named in full in the status line."""
        if message.pane != self.nav[-1].pane:
            return
        try:
            line = self.query_one(StatusLine)
        except NoMatches:
            return  # posted while the app closes: its screen is gone
        line.show(message.frame, message.note)
        if message.frame is not None and message.pane in (FlatPane.PANE_ID,
                                                          CallTreeView.PANE_ID):
            # Enter there, `f` here: the likeliest next view, derived while the user reads.
            self.query_one(CallTreeView).focus_ahead(message.frame)

    def action_notes(self) -> None:
        """Every warning of the profile shown (e.g. gprof's estimated tree, dropped records)."""
        profile = self.profile
        incomplete = profile is not None and not profile.meta.complete and (
            self.collector is None or self.ended)
        self.push_screen(NotesScreen(profile_notes(profile,
                                                   INCOMPLETE_NOTE if incomplete else None)))

    def action_help(self) -> None:
        """Every key of the current pane, then the app's (tui/screens/help.py)."""
        if isinstance(self.screen, HelpScreen):
            return
        current = self._pane_class(self.nav[-1].pane)
        pane = cast(Widget, self.pane(current.PANE_ID))
        keys = pane_keys(self, pane)
        main = [k for k in keys if k.shown or k.printable]
        self.push_screen(HelpScreen([(f"{current.TITLE} (this pane)", main),
                                     ("Everywhere", app_keys(self)),
                                     (f"Moving around in {current.TITLE}",
                                      [k for k in keys if k not in main])]))

    def final_profile(self) -> Profile | None:
        """The last profile shown: after the target exited, its final one (with exit status)."""
        return self._final if self._final is not None else self.profile

    # -- command palette -----------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)  # theme, quit, screenshot...
        for title, help_text, callback in self.palette_commands():
            yield SystemCommand(title, help_text, callback)

    def palette_commands(self) -> list[Command]:
        """Every key as a palette entry (tui/screens/help.py `palette_entries`)."""
        panes = [PaneEntry(p.PANE_ID, p.TITLE, p.KEY, p.HINT, cast(Widget, w), w.commands())
                 for p, w in zip(self.PANES, self.panes(), strict=True)]
        return palette_entries(self, panes, self._show_pane)

    def _show_pane(self, pane_id: str) -> None:
        if self.nav[-1].pane != pane_id:
            self.action_pane(pane_id)
