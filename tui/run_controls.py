"""Mixin of ProfTuiApp: what acts on the run and the profile rather than on a view:
pause and resume, reset (or the fleet query again), save or export, Ctrl-C and quit."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from proftui.collectors.base import Collector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import write_export
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.storage import save_or_fallback
from proftui.collectors.model.textsafe import display
from proftui.collectors.runtime.launch import StopSignals
from proftui.tui.screens.export import NATIVE, ExportScreen
from proftui.tui.screens.quit import QuitScreen
from textual import work

if TYPE_CHECKING:
    from textual.app import App

    _Base = App[None]
else:
    _Base = object


class RunControls(_Base):
    """Pause, reset, re-query, save/export, interrupt and quit (ProfTuiApp's keys)."""

    collector: Collector | None
    profile: Profile | None
    ended: bool
    paused: bool
    frozen: bool
    part: str | None
    _reload: Callable[[], Profile] | None
    _source: str
    _queried_at: float | None
    _reset_at: float | None
    _whole: Profile | None
    _mark: Profile | None
    _stop_signals: StopSignals | None

    if TYPE_CHECKING:  # ProfTuiApp's, which this mixin calls
        def _update_header(self) -> None: ...
        def _prepare(self, profile: Profile, part: str | None) -> object: ...
        def clear_mark(self) -> None: ...
        def select_part(self, part: str | None) -> None: ...

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
        if self._reload is not None:
            self.notify(f"running {display(self._source)}")
            self._requery()
            return
        if self.collector is None or self.ended:
            return
        self._reset_worker()

    @work(thread=True, exclusive=True, group="requery")
    def _requery(self) -> None:
        """The fleet query again, off the UI thread; its profile replaces the one shown."""
        assert self._reload is not None
        try:
            profile = self._reload()
        except ProftuiError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self._requeried, profile)

    def _requeried(self, profile: Profile, what: str = "fleet query run again") -> None:
        self._queried_at = time.time()
        self._whole = profile
        if self.part is not None and self.part not in profile.parts:
            self.select_part(None)  # the part chosen is not in this answer: all of it
        else:
            self._prepare(profile, self.part)
        self.notify(what)

    @work(thread=True, group="reset")
    def _reset_worker(self) -> None:
        assert self.collector is not None
        try:
            self.collector.reset()
        except (ProftuiError, OSError, NotImplementedError) as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self._was_reset, time.time())

    def _was_reset(self, when: float) -> None:
        self._reset_at = when
        if self._mark is not None:  # counts below the mark: the phase since it means nothing
            self.clear_mark()
            self.notify("counters reset: the baseline mark is cleared")
        else:
            self.notify("counters reset")
        self._update_header()

    def action_interrupt(self) -> None:
        """Ctrl-C, as in a shell: the CLI's SIGINT path ends a launched target (SIGINT,
        then SIGKILL if it lingers) or detaches from an attached one, and exits 130."""
        if self._stop_signals is not None:
            signal.raise_signal(signal.SIGINT)  # StopSignals catches it: see tui/cli.py
        else:  # no CLI around it (tests, embedding): just leave; the caller stops the collector
            self.exit()

    def action_export(self) -> None:
        profile = self.profile
        if profile is None:
            self.notify("nothing to export yet", severity="warning")
            return
        pid = self.collector.pid if self.collector is not None else None
        stem = f"proftui-{profile.meta.mode}" + (f"-{pid}" if pid else "")
        base, n = Path.cwd() / f"{stem}.proftui", 1
        while base.exists():  # the default never overwrites an earlier save
            base, n = Path.cwd() / f"{stem}-{n}.proftui", n + 1
        self.push_screen(ExportScreen(base), lambda choice: self._export(profile, choice))

    def _export(self, profile: Profile, choice: tuple[str, Path] | None) -> None:
        if choice is not None:
            self._export_worker(profile, *choice)

    @work(thread=True, group="export")
    def _export_worker(self, profile: Profile, fmt: str, path: Path) -> None:
        try:
            if fmt == NATIVE:
                written, note = save_or_fallback(profile, path, regular_only=True)
                self.call_from_thread(self.notify, note or f"profile saved to {written}",
                                      severity="warning" if note else "information")
                return
            write_export(profile, fmt, path, regular_only=True)
        except (ProftuiError, OSError) as exc:
            self.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.call_from_thread(self.notify, f"{fmt} export written to {path}")

    async def action_quit(self) -> None:
        collector = self.collector
        if collector is None or self.ended or not collector.is_running():
            self.exit()
            return
        self.push_screen(QuitScreen(collector.quit_question()),
                         lambda yes: self.exit() if yes else None)

