"""ProfTuiApp: the four panes, keyboard drill-down with a back stack, live polling.

A thread worker polls `collector.snapshot()` ~3 times a second, computes the
flat profile off the UI thread and posts one `Snapshot` message; the app only
hands the frozen profile to the panes.  When the target ends, the worker takes
the final profile (`collector.wait()`, which carries the exit status) and
stops; that profile stays on screen and is what `final_profile()` returns.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from proftui.collectors.base import Collector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import write_export
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.views import FlatEntry, flat_profile
from proftui.collectors.runtime.launch import ExitInfo
from proftui.collectors.runtime.procstat import ProcSampler, ProcStat
from proftui.tui.format import metric_label
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.process import ProcPane
from proftui.tui.panes.source import SourcePane, SourceView
from proftui.tui.panes.tree import CallTreeView, View
from proftui.tui.screens.export import ExportScreen
from proftui.tui.screens.notes import NotesScreen
from proftui.tui.screens.quit import QuitScreen
from proftui.tui.widgets.breadcrumb import Breadcrumb
from proftui.tui.widgets.flat_table import FlatTable
from proftui.tui.widgets.header_bar import HeaderBar
from proftui.tui.widgets.key_bar import KeyBar
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ContentSwitcher

POLL_INTERVAL_S = 0.33  # snapshots per second: ~3
PROC_INTERVAL_S = 1.0  # psutil samples per second: 1
PANE_LABELS = {"flat": "Flat profile", "tree": "Call tree", "source": "Source",
               "proc": "Process"}


@dataclass(frozen=True)
class NavState:
    """One step of the drill-down trail; Escape returns to the previous one."""

    pane: str
    label: str
    tree_view: View = "top-down"
    focus: Frame | None = None
    source: Frame | None = None


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

    CSS_PATH = "proftui.tcss"
    TITLE = "proftui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "pane('flat')", "Flat"),
        Binding("2", "pane('tree')", "Tree"),
        Binding("3", "pane('source')", "Source"),
        Binding("4", "pane('proc')", "Proc"),
        Binding("escape", "back", "Back"),
        Binding("m", "metric", "Metric"),
        Binding("p", "pause", "Pause"),
        Binding("r", "reset", "Reset"),
        Binding("e", "export", "Export"),
        Binding("w", "notes", "Notes"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, collector: Collector | None = None, profile: Profile | None = None
                 ) -> None:
        super().__init__()
        self.collector = collector
        self.profile: Profile | None = profile
        self.metric = 0
        self.nav: list[NavState] = [NavState("flat", PANE_LABELS["flat"])]
        self.paused = False
        self.frozen = False  # display frozen (collectors that cannot pause)
        self.exit_info: ExitInfo | None = None
        self.ended = collector is None
        self._final: Profile | None = None
        self._error = ""
        self._proc: ProcStat | None = None
        self._stop = threading.Event()

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Breadcrumb(id="breadcrumb")
        with ContentSwitcher(initial="flat", id="panes"):
            yield FlatPane(id="flat")
            yield CallTreeView(id="tree")
            yield SourcePane(id="source")
            yield ProcPane(id="proc")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        if self.collector is None:
            self.query_one(ProcPane).show_message(
                "no live process: this is a saved profile" if self.profile is not None
                else "no live process")
        else:
            self.query_one(ProcPane).show_message("waiting for the first process sample...")
        if self.profile is not None:
            self.query_one(CallTreeView).freeze_results = self.collector is None
            self._prepare(self.profile)
        self._show_nav()
        self._update_header()
        if self.collector is not None:
            self._poll()
        self.query_one(FlatTable).focus()

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

    # -- live polling ----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll")
    def _poll(self) -> None:
        collector = self.collector
        assert collector is not None
        sampler = ProcSampler(collector.pid) if collector.pid is not None else None
        last_proc = 0.0
        while not self._stop.is_set():
            started = time.monotonic()
            info = collector.exit_info()
            ended = info is not None or not collector.is_running()
            if not self.frozen or ended:
                try:
                    profile = collector.wait() if ended else collector.snapshot()
                    info = collector.exit_info() if ended else info
                    self.post_message(Snapshot(profile, flat_profile(profile), info, ended))
                except (ProftuiError, OSError, ValueError) as exc:
                    self.post_message(Snapshot(None, [], info, ended, str(exc)))
            if sampler is not None and (ended or started - last_proc >= PROC_INTERVAL_S):
                last_proc = started
                self.post_message(ProcUpdate(sampler.sample()))
            if ended:
                return
            self._stop.wait(max(0.05, POLL_INTERVAL_S - (time.monotonic() - started)))

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
            with self.batch_update():
                self._apply(profile, message.entries)
        self._update_header()
        if message.final:
            self.notify(f"target {self._state_text()}: final profile shown", timeout=6)
            self.refresh_bindings()

    def on_proc_update(self, message: ProcUpdate) -> None:
        self._proc = message.stat
        self.query_one(ProcPane).show_stat(message.stat, self._state_text()
                                           if self.ended else "")

    def _apply(self, profile: Profile, entries: list[FlatEntry]) -> None:
        """Give a new profile to the panes; hidden panes refresh when shown."""
        self.profile = profile
        if self.metric >= len(profile.metrics):
            self.metric = 0
        self.query_one(FlatPane).set_profile(profile, entries, self.metric)
        current = self.nav[-1]
        if current.pane == "tree":
            self.query_one(CallTreeView).show(profile, metric=self.metric)
        elif current.pane == "source" and current.source is not None:
            self.query_one(SourcePane).show(profile, current.source, self.metric,
                                            keep_cursor=True)
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
        profile = self.profile
        if state.pane == "tree" and profile is not None:
            tree = self.query_one(CallTreeView)
            tree.show(profile, view=state.tree_view, focus=state.focus, metric=self.metric)
            tree.focus()
        elif state.pane == "source":
            if profile is not None and state.source is not None:
                pane = self.query_one(SourcePane)
                if pane.frame != state.source or pane.profile is not profile:
                    pane.show(profile, state.source, self.metric)
            self.query_one(SourceView).focus()
        elif state.pane == "flat":
            self.query_one(FlatTable).focus()
        trail = [s.label for s in self.nav[-5:]]
        if len(self.nav) > 5:
            trail[0] = "…"
        self.query_one(Breadcrumb).show(state.pane, trail)
        if self.focused is focused:
            # A focus change refreshes the footer by itself; each refresh rebuilds
            # every footer key (the costliest part of a pane switch).
            self.refresh_bindings()

    def _current_tree_state(self, pane: str) -> NavState:
        """A step to `pane` that keeps the tree/source choices of the current step."""
        return replace(self.nav[-1], pane=pane, label=PANE_LABELS[pane])

    def action_pane(self, pane: str) -> None:
        state = self._current_tree_state(pane)
        if pane == "tree" and state.focus is not None:
            state = replace(state, label=f"tree: {state.focus.function}")
        if pane == "source" and state.source is None:
            frame = self._frame_under_cursor()
            if frame is not None:
                state = replace(state, source=frame)
        if pane == "source" and state.source is not None:
            state = replace(state, label=f"source: {state.source.function}")
        self.go(state)

    def _frame_under_cursor(self) -> Frame | None:
        pane = self.nav[-1].pane
        if pane == "flat":
            return self.query_one(FlatPane).selected_frame()
        if pane == "tree":
            return self.query_one(CallTreeView).selected_frame()
        return None

    def action_back(self) -> None:
        if len(self.nav) > 1:
            self.nav.pop()
            self._show_nav()
        else:
            self.bell()

    @on(FlatPane.FunctionChosen)
    def _drill_tree(self, message: FlatPane.FunctionChosen) -> None:
        self.go(replace(self.nav[-1], pane="tree", tree_view="focus", focus=message.frame,
                        label=f"tree: {message.frame.function}"))

    @on(CallTreeView.FocusWanted)
    def _focus_tree(self, message: CallTreeView.FocusWanted) -> None:
        self._drill_tree(FlatPane.FunctionChosen(message.frame))

    @on(CallTreeView.SourceWanted)
    def _drill_source(self, message: CallTreeView.SourceWanted) -> None:
        self.go(replace(self.nav[-1], pane="source", source=message.frame,
                        label=f"source: {message.frame.function}"))

    @on(CallTreeView.ViewWanted)
    def _tree_view(self, message: CallTreeView.ViewWanted) -> None:
        self.go(replace(self.nav[-1], pane="tree", tree_view=message.view, focus=None,
                        label=f"tree: {message.view}"))

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
        self.query_one(FlatPane).set_metric(self.metric)
        self._apply(self.profile, self.query_one(FlatPane).entries)
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

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        tree = self.query_one(CallTreeView)
        flat = self.query_one(FlatPane)
        source = self.query_one(SourcePane)

        def on_pane(pane: str, action: object) -> object:
            def run() -> None:
                if self.nav[-1].pane != pane:
                    self.action_pane(pane)
                action()  # type: ignore[operator]
            return run

        commands = [
            ("Flat profile (1)", "Every function, sortable", lambda: self.action_pane("flat")),
            ("Call tree (2)", "Top-down call tree", lambda: self.action_pane("tree")),
            ("Source (3)", "Annotated source of the selected function",
             lambda: self.action_pane("source")),
            ("Process status (4)", "CPU, memory, threads of the target",
             lambda: self.action_pane("proc")),
            ("Back (Escape)", "Return to the previous view", self.action_back),
            ("Next metric (m)", "Show the next metric (samples, CPU time...)", self.action_metric),
            ("Export (e)", "Write pprof, folded, callgrind, dot or speedscope", self.action_export),
            ("Notes (w)", "Warnings about this profile, in full", self.action_notes),
            ("Filter functions (/)", "Filter the flat profile by name",
             on_pane("flat", flat.action_filter)),
            ("Sort column (s)", "Sort the flat profile by the next column",
             on_pane("flat", flat.action_sort)),
            ("Hot path (h)", "Expand the costliest call chain",
             on_pane("tree", tree.action_hot_path)),
            ("Bottom-up / top-down (b)", "Toggle the call tree direction",
             on_pane("tree", tree.action_toggle_view)),
            ("Hottest line (g)", "Jump to the costliest source line",
             on_pane("source", lambda: self.query_one(SourceView).action_hottest())),
            ("Source / disassembly (d)", "Toggle source and disassembly",
             on_pane("source", source.action_toggle_disassembly)),
        ]
        if self.collector is not None and not self.ended:
            commands += [("Pause / resume (p)", "Pause collection in the target",
                          self.action_pause),
                         ("Reset counters (r)", "Count from now on", self.action_reset)]
        for title, help_text, callback in commands:
            yield SystemCommand(title, help_text, callback)  # type: ignore[arg-type]
