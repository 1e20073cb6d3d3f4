"""ProfTuiApp: the panes of `PANES`, keyboard drill-down with a back stack, live polling.

Each pane is one module under tui/panes/ declaring itself through the
`tui.panes.base.Pane` protocol; `PANES` below lists them (one line each, the
order of the breadcrumb tabs), and the app derives from it the pane keys,
tabs and palette entries.

A thread worker polls `collector.snapshot()` ~3 times a second while the data
changes (`collector.data_version()`; nothing is recomputed while paused or while
the target sleeps), computes the flat profile off the UI thread and posts one
`Snapshot` message; the app only hands the frozen profile to the panes.  When
the target ends, the worker takes the final profile (`collector.wait()`, which
carries the exit status) and stops; that profile stays on screen and is what
`final_profile()` returns.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from proftui.collectors.base import Collector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import write_export
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import FlatEntry, flat_profile
from proftui.collectors.runtime.launch import ExitInfo, StopSignals
from proftui.collectors.runtime.procstat import ProcSampler, ProcStat
from proftui.tui.format import metric_label
from proftui.tui.panes.base import Drill, NavState, Pane, step_to
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.process import ProcPane
from proftui.tui.panes.source import SourcePane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.screens.export import ExportScreen
from proftui.tui.screens.notes import NotesScreen
from proftui.tui.screens.quit import QuitScreen
from proftui.tui.widgets.breadcrumb import Breadcrumb
from proftui.tui.widgets.header_bar import HeaderBar
from proftui.tui.widgets.key_bar import KeyBar
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingsMap, BindingType
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher

POLL_INTERVAL_S = 0.33  # snapshots per second: ~3
PROC_INTERVAL_S = 1.0  # psutil samples per second: 1
# At most this share of one CPU for the poll worker's snapshots: a huge profile is
# refreshed less often rather than starve the target (the observer must stay light).
POLL_MAX_DUTY = 0.08
# The whole app's CPU (drawing included) the refresh rate aims at: above it, live
# views refresh less often, in proportion, down to once every POLL_SLOWEST_S.
POLL_CPU_BUDGET = 0.10
POLL_SLOWEST_S = 2.0

# The panes, in tab order; the first is shown at start.  A new pane: its module plus one line.
PANES: list[type[Pane]] = [
    FlatPane,
    CallTreeView,
    SourcePane,
    ProcPane,
]


@dataclass
class Snapshot(Message):
    """A profile from the poll worker (final=True once the target has ended)."""

    profile: Profile | None
    entries: list[FlatEntry]
    exit: ExitInfo | None
    final: bool
    error: str = ""


@dataclass
class ProcUpdate(Message):
    stat: ProcStat


class ProfTuiApp(App[None]):
    """Browse a saved profile, or watch a collector's live one."""

    CSS_PATH = Path(__file__).with_name("proftui.tcss")  # absolute: subclasses live elsewhere
    TITLE = "proftui"
    PANES: ClassVar[list[type[Pane]]] = PANES  # a subclass may list other panes
    BINDINGS: ClassVar[list[BindingType]] = [  # plus each pane's key, first (see __init__)
        Binding("escape", "back", "Back"),
        Binding("m", "metric", "Metric"),
        Binding("p", "pause", "Pause"),
        Binding("r", "reset", "Reset"),
        Binding("e", "export", "Export"),
        Binding("w", "notes", "Notes"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, collector: Collector | None = None, profile: Profile | None = None,
                 stop_signals: StopSignals | None = None) -> None:
        """`stop_signals`: SIGTERM/SIGHUP caught by the CLI; the app exits on them
        through its normal path, so the terminal is restored."""
        super().__init__()
        # The pane keys come from the registry; they lead the key bar, as the tabs do.
        keys = BindingsMap([Binding(p.KEY, f"pane({p.PANE_ID!r})", p.TAB) for p in self.PANES])
        self._bindings = BindingsMap.from_keys({**keys.key_to_bindings,
                                                **self._bindings.key_to_bindings})
        self.collector = collector
        self.profile: Profile | None = profile
        self._entries: list[FlatEntry] = []
        self.metric = 0
        first = self.PANES[0]  # shown at start
        self.nav: list[NavState] = [step_to(first, NavState(first.PANE_ID, ""))]
        self.paused = False
        self.frozen = False  # display frozen (collectors that cannot pause)
        self.exit_info: ExitInfo | None = None
        self.ended = collector is None
        self._final: Profile | None = None
        self._error = ""
        self._proc: ProcStat | None = None
        self._stop = threading.Event()
        self._stop_signals = stop_signals
        self._exit_soon: Callable[[int], None] | None = None

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Breadcrumb(id="breadcrumb")
        with ContentSwitcher(initial=self.nav[0].pane, id="panes"):
            for pane in self.PANES:
                yield cast("type[Widget]", pane)(id=pane.PANE_ID)  # a Pane is also a Widget
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
        for pane in self.panes():
            pane.begin(live=self.collector is not None, has_profile=self.profile is not None)
        if self.profile is not None:
            self._prepare(self.profile)
        self._show_nav()
        self._update_header()
        if self.collector is not None:
            self._poll()

    @work(thread=True, group="prepare")
    def _prepare(self, profile: Profile) -> None:
        """The flat profile of a saved profile (seconds for 200,000 nodes), off the UI thread."""
        entries = flat_profile(profile)
        # A saved profile lives as long as the app: take its (millions of) objects out of
        # the cyclic GC's scans, whose full passes otherwise stall keys for seconds.
        gc.collect()
        gc.freeze()
        self.call_from_thread(self._apply, profile, entries)

    def on_unmount(self) -> None:
        self._stop.set()
        if self._stop_signals is not None and self._exit_soon is not None:
            self._stop_signals.unlisten(self._exit_soon)

    # -- live polling ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll")
    def _poll(self) -> None:
        """Snapshot when the collector's data moved (every POLL_INTERVAL_S at most, less
        often when snapshots or drawing them cost more than POLL_CPU_BUDGET); otherwise
        only watch for the target's end and sample the process once a second."""
        collector = self.collector
        assert collector is not None
        sampler = ProcSampler(collector.pid) if collector.pid is not None else None
        last_proc = 0.0
        shown: object | None = None  # data_version() of the last snapshot taken
        next_snapshot = 0.0  # monotonic time before which no snapshot is taken
        self.snapshots_taken = 0  # for tests: snapshots computed (not skipped),
        self.poll_rounds = 0  # poll rounds done,
        self.shown_version: object | None = None  # and the data_version() last snapshotted
        share = 0.0  # the app's recent CPU use, in CPUs (smoothed)
        last_cpu, last_wall = time.process_time(), time.monotonic()
        while not self._stop.is_set():
            self.poll_rounds += 1
            started = time.monotonic()
            cpu = time.process_time()
            if started > last_wall:
                share = 0.7 * share + 0.3 * (cpu - last_cpu) / (started - last_wall)
            last_cpu, last_wall = cpu, started
            info = collector.exit_info()
            ended = info is not None or not collector.is_running()
            version = None if ended or self.frozen else collector.data_version()
            if ended or (not self.frozen and started >= next_snapshot
                         and (version is None or version != shown)):
                worker_cpu = time.thread_time()
                try:
                    profile = collector.wait() if ended else collector.snapshot()
                    info = collector.exit_info() if ended else info
                    self.post_message(Snapshot(profile, flat_profile(profile), info, ended))
                    shown = self.shown_version = version
                except (ProftuiError, OSError, ValueError) as exc:
                    self.post_message(Snapshot(None, [], info, ended, str(exc)))
                self.snapshots_taken += 1
                next_snapshot = started + max(
                    POLL_INTERVAL_S, (time.thread_time() - worker_cpu) / POLL_MAX_DUTY,
                    min(POLL_SLOWEST_S, POLL_INTERVAL_S * share / POLL_CPU_BUDGET))
            if sampler is not None and (ended or started - last_proc >= PROC_INTERVAL_S):
                last_proc = started
                self.post_message(ProcUpdate(sampler.sample()))
            if ended:
                return
            # Look again at the next allowed snapshot, or for the process pane's
            # once-a-second sample, whichever comes first.
            wake = max(next_snapshot, started + POLL_INTERVAL_S)
            if sampler is not None:
                wake = min(wake, last_proc + PROC_INTERVAL_S)
            self._stop.wait(max(0.05, wake - time.monotonic()))

    def on_snapshot(self, message: Snapshot) -> None:
        self._error = message.error
        self.exit_info = message.exit
        if message.final:
            self.ended = True
        if message.profile is not None:
            profile = message.profile
            if message.final and message.exit is not None and profile.meta.exit_status is None \
                    and profile.meta.exit_signal is None:
                profile.meta.exit_status = message.exit.status
                profile.meta.exit_signal = message.exit.signal
            if message.final:
                self._final = profile
            try:
                with self.batch_update():
                    self._apply(profile, message.entries)
            except NoMatches:  # posted just before the app closed: its screen is gone
                return
        self._update_header()
        if message.final:
            self.notify(f"target {self._state_text()}: final profile shown", timeout=6)
            self.refresh_bindings()

    def on_proc_update(self, message: ProcUpdate) -> None:
        if message.stat == self._proc or self._stop.is_set():
            return  # nothing moved (a process that sleeps), or the app is closing
        self._proc = message.stat
        note = self._state_text() if self.ended else ""
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
        if self.metric >= len(profile.metrics):
            self.metric = 0
        current = self.nav[-1]
        for pane in self.panes():
            pane.show_profile(profile, entries, self.metric,
                              current if current.pane == pane.PANE_ID else None)
        self._update_header()

    def _state_text(self) -> str:
        if self.collector is None:
            return "saved profile"
        if self.exit_info is not None:
            return self.exit_info.describe()
        if self.ended:
            return "detached" if self.collector.mode == "attach" else "ended"
        return "running"

    def _update_header(self) -> None:
        pid = self.collector.pid if self.collector is not None else None
        state = self._state_text()
        if self.frozen:
            state += " (display frozen)"
        self.query_one(HeaderBar).show(self.profile, pid=pid, state=state,
                                       paused=self.paused, error=self._error)

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
        pane.show_step(self.profile, state, self.metric)
        target = pane.focus_widget()
        if target is not None:
            target.focus()
        trail = [s.label for s in self.nav[-5:]]
        if len(self.nav) > 5:
            trail[0] = "…"
        tabs = [(p.PANE_ID, f"{p.KEY} {p.TAB}") for p in self.PANES]
        self.query_one(Breadcrumb).show(tabs, state.pane, trail)
        if self.focused is focused:
            # A focus change refreshes the footer by itself; each refresh rebuilds
            # every footer key (the costliest part of a pane switch).
            self.refresh_bindings()

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
        else:
            self.bell()

    @on(Drill)
    def _drill(self, message: Drill) -> None:
        """A pane's drill-down (Enter on a function, a tree view change...)."""
        self.go(step_to(self._pane_class(message.pane), self.nav[-1], **message.changes))

    # -- actions ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide live-only keys for saved profiles; grey them out once the target ended."""
        if action in ("pause", "reset"):
            if self.collector is None:
                return False
            return None if self.ended else True
        if action == "back":
            return True if len(self.nav) > 1 else None
        return True

    def action_metric(self) -> None:
        if self.profile is None or len(self.profile.metrics) < 2:
            self.notify("this profile has a single metric")
            return
        self.metric = (self.metric + 1) % len(self.profile.metrics)
        self._apply(self.profile, self._entries)
        self.notify(f"showing {metric_label(self.profile.metrics[self.metric])}")

    def action_pause(self) -> None:
        collector = self.collector
        if collector is None or self.ended:
            return
        try:
            if collector.can_pause:
                if self.paused:
                    collector.resume()
                else:
                    collector.pause()
                self.paused = not self.paused
                self.notify("collection paused" if self.paused else "collection resumed")
            else:
                self.frozen = not self.frozen
                self.notify(f"{collector.mode} mode cannot pause collection: display "
                            + ("frozen" if self.frozen else "live again"))
        except (ProftuiError, OSError, NotImplementedError) as exc:
            self.notify(str(exc), severity="error")
        self._update_header()

    def action_reset(self) -> None:
        if self.collector is None or self.ended:
            return
        self._reset_worker()

    @work(thread=True, group="reset")
    def _reset_worker(self) -> None:
        assert self.collector is not None
        try:
            self.collector.reset()
        except (ProftuiError, OSError, NotImplementedError) as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self.notify, "counters reset")

    def action_notes(self) -> None:
        """Every warning of the profile shown (e.g. gprof's estimated tree, dropped records)."""
        profile = self.profile
        notes = list(profile.meta.warnings) if profile is not None else []
        if profile is not None and profile.meta.dropped:
            notes.insert(0, f"{profile.meta.dropped:,} records dropped by the runtime "
                            "(its tables were full; --buffer raises the budget)")
        self.push_screen(NotesScreen(notes))

    def action_export(self) -> None:
        profile = self.profile
        if profile is None:
            self.notify("nothing to export yet", severity="warning")
            return
        pid = self.collector.pid if self.collector is not None else None
        stem = f"proftui-{profile.meta.mode}" + (f"-{pid}" if pid else "")
        self.push_screen(ExportScreen(Path.cwd() / f"{stem}.proftui"),
                         lambda choice: self._export(profile, choice))

    def _export(self, profile: Profile, choice: tuple[str, Path] | None) -> None:
        if choice is not None:
            self._export_worker(profile, *choice)

    @work(thread=True, group="export")
    def _export_worker(self, profile: Profile, fmt: str, path: Path) -> None:
        try:
            write_export(profile, fmt, path)
        except ProftuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self.notify, f"{fmt} export written to {path}")

    async def action_quit(self) -> None:
        collector = self.collector
        if collector is None or self.ended or not collector.is_running():
            self.exit()
            return
        if collector.mode == "attach":
            message = (f"Detach from pid {collector.pid} and quit?\n"
                       "The process keeps running.")
        else:
            message = (f"The target (pid {collector.pid}) is still running.\n"
                       "Quit and kill it?")
        self.push_screen(QuitScreen(message), lambda yes: self.exit() if yes else None)

    def final_profile(self) -> Profile | None:
        """The last profile shown: after the target exited, its final one (with exit status)."""
        return self._final if self._final is not None else self.profile

    # -- command palette -----------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)

        def on_pane(pane_id: str, action: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                if self.nav[-1].pane != pane_id:
                    self.action_pane(pane_id)
                action()
            return run

        commands: list[tuple[str, str, Callable[[], object]]] = [
            (f"{p.TITLE} ({p.KEY})", p.HINT, partial(self.action_pane, p.PANE_ID))
            for p in self.PANES]
        commands += [
            ("Back (Escape)", "Return to the previous view", self.action_back),
            ("Next metric (m)", "Show the next metric (samples, CPU time...)", self.action_metric),
            ("Export (e)", "Write pprof, folded, callgrind, dot or speedscope", self.action_export),
            ("Notes (w)", "Warnings about this profile, in full", self.action_notes),
        ]
        for pane in self.panes():
            commands += [(title, help_text, on_pane(pane.PANE_ID, action))
                         for title, help_text, action in pane.commands()]
        if self.collector is not None and not self.ended:
            commands += [("Pause / resume (p)", "Pause collection in the target",
                          self.action_pause),
                         ("Reset counters (r)", "Count from now on", self.action_reset)]
        for title, help_text, callback in commands:
            yield SystemCommand(title, help_text, callback)
