"""The lifecycle shared by the LD_PRELOAD collectors (sampler, heap).

Each runs its target with a runtime library preloaded (runtime/preload.py),
finds the runtime's files in the per-run directory, and reads them on a poll
thread while the target runs.  Starting, waiting, pausing, stopping and the
notes gathered on the way are the same for every such runtime, and so are the
address spaces and symbolizer its stacks are resolved through (one set for both
collectors of a --heap run: `share_symbols`); a subclass says what to preload
(`preload`), what one poll round reads (`poll`) and how its files are built
into a Profile (`collect`).
"""

from __future__ import annotations

import abc
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from proftui.collectors.base import CollectorOptions, LaunchCollector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Profile, ProfileMeta
from proftui.collectors.runtime.launch import LaunchedProcess
from proftui.collectors.runtime.notes import read_notes
from proftui.collectors.runtime.preload import (
    PollThread,
    Preload,
    check_preloadable,
    file_too_young,
    launch_preloaded,
)
from proftui.collectors.runtime.wire import WireVersionError
from proftui.collectors.symbols.stacks import ImageSpaces


class _Pausable(Protocol):
    def set_paused(self, paused: bool) -> None: ...


class RuntimeReader(Protocol):
    """What the lifecycle needs of a runtime file reader (SamplerFile, HeapFile)."""

    @property
    def file(self) -> _Pausable: ...

    def close(self) -> None: ...


ReaderT = TypeVar("ReaderT", bound=RuntimeReader)


class PreloadedCollector(LaunchCollector, Generic[ReaderT]):
    """A LaunchCollector whose target runs with a preloaded runtime, read live."""

    file_glob: ClassVar[str]  # the runtime's files in the run directory
    poll_thread_name: ClassVar[str]  # e.g. "proftui-sampler-drain"
    poll_interval_s: ClassVar[float]
    can_pause: ClassVar[bool] = True
    runtime_what: ClassVar[str]  # "the sampler": the runtime, as refusals name it
    static_hint: ClassVar[str]  # what to use on a statically linked program instead

    @classmethod
    def refuse(cls, program: str, options: CollectorOptions) -> None:
        """A program the runtime cannot be preloaded into (another ELF kind, static)."""
        check_preloadable(program, cls.runtime_what, cls.static_hint, options.follow_children)

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        self._files: dict[Path, ReaderT] = {}  # runtime file -> its reader
        self._bad_files: set[Path] = set()  # never to be opened again
        self._warnings: list[str] = []
        self._paused = False
        self._start_time: float | None = None  # set by preload(): when the run began
        self._poller: PollThread | None = None
        # Guards the open files, the paused flag and the warnings, and what a subclass
        # gathers from them; the poll thread and snapshot() both take it.
        self._files_lock = threading.RLock()
        # Guards the symbolizer and the address spaces: collect() takes it once done with
        # _files_lock; the poll thread never does, so it never waits for symbols.
        self._sym_lock = threading.Lock()
        self._images = ImageSpaces()  # file name -> its image's address space

    @abc.abstractmethod
    def preload(self) -> Preload:
        """Check the options and say what to preload (the runtime and its environment)."""

    @abc.abstractmethod
    def poll(self) -> None:
        """One round of the poll thread: open new files, read what moved (thread-safe)."""

    @abc.abstractmethod
    def open_reader(self, path: Path) -> ReaderT:
        """A reader of the runtime file `path` (ProftuiError when it cannot be read)."""

    def share_symbols(self, other: PreloadedCollector[Any]) -> None:
        """Use `other`'s address spaces, symbolizer and their lock: another collector
        reading the same run (--heap), so that one address gives one frame in both.
        Call before the run begins."""
        self._images, self._sym_lock = other._images, other._sym_lock

    def run_begins(self) -> None:
        """Called by `preload()` once the options are checked: the shared symbolizer is
        asked for (made on first use, once for the collectors that share it) and the
        start time noted."""
        self._images.want_symbols()
        self._start_time = time.time()

    def salvage(self, path: Path, error: ProftuiError) -> ReaderT | None:
        """A file that failed to open and is as complete as it will get: a reader of
        what can be saved, or None with the loss noted (this default)."""
        self._warnings.append(f"{error}: {self.lost_note}")
        return None

    lost_note: ClassVar[str] = "its data is lost"  # said of a file that cannot be read
    runtime_name: ClassVar[str]  # "the sampler", "the heap profiler": said in the notes
    note_kind: ClassVar[str]  # its files' kind, "sampler" or "heap" (<kind>.<pid>.note)
    unwind_variable: ClassVar[str]  # PROFTUI_*_UNWIND: "fp" means frame pointers on purpose

    def meta(self, mode: str, pids: list[int], dropped: int, warnings: list[str],
             **fields: Any) -> ProfileMeta:
        """The metadata every preloaded collector gives: the program, its processes (the
        target's pid before any file appeared), times, exit status, completeness and
        drops; `fields` add the collector's own (clock, threads, period...)."""
        exit_info = self.process.poll() if self.process is not None else None
        running = exit_info is None
        return ProfileMeta(
            mode=mode, argv=list(self.argv), pids=sorted(pids) or (
                [self.process.pid] if self.process is not None else []),
            start_time=self._start_time, end_time=None if running else self._end_time,
            exit_status=None if exit_info is None else exit_info.status,
            exit_signal=None if exit_info is None else exit_info.signal,
            complete=not running, dropped=dropped, warnings=warnings, **fields)

    def runtime_notes(self, files: int, no_space: bool, no_cfi: bool, dropped: str) -> list[str]:
        """The notes every preloaded runtime may need: what it could not map (its own
        words, runtime/notes.py), the run directory was full (what was `dropped`
        because of it), no CFI unwind tables, or no runtime file at all once the target
        ended."""
        mapped = read_notes(self.run_dir.path, self.note_kind, self.runtime_name)
        notes = [note.text for note in mapped]
        if no_space:
            notes.append(f"the run directory's file system ({self.run_dir.path.parent}) is "
                         f"full or nearly full: {dropped} could not be stored (dropped); "
                         "point TMPDIR at a file system with more space")
        if no_cfi and files and os.environ.get(self.unwind_variable) != "fp" and \
                not any(note.what == "unwind" for note in mapped):
            notes.append("no DWARF CFI unwind tables were built (CFI unwinding is x86-64 "
                         "only): stacks are walked through frame pointers")
        ended = self.process is not None and self.process.poll() is not None
        # A file that was found but could not be read has its own warning.
        if ended and not files and not self._bad_files and \
                not any(note.what == "file" for note in mapped):
            notes.append(self._no_file_note())
        return notes

    def _no_file_note(self) -> str:
        """Why the target wrote no runtime file: a full run directory, or no preload."""
        run_dir = self.run_dir.path
        with contextlib.suppress(OSError):
            st = os.statvfs(run_dir)
            if st.f_bavail * st.f_frsize < 1 << 20:
                return (f"{self.runtime_name} could not create its file: the run directory's "
                        f"file system ({run_dir.parent}) has {st.f_bavail * st.f_frsize >> 10} "
                        "KiB free; the target ran unprofiled (point TMPDIR at a file system "
                        "with more space)")
        return (f"{self.runtime_name} did not start in the target (no runtime file): "
                "was LD_PRELOAD removed or the program static?")

    def opened_paused(self, reader: ReaderT) -> None:
        """`reader` was opened while collection is paused (after set_paused(True))."""

    def start(self) -> None:
        self.begin(launch_preloaded(self.argv, run_dir=self.run_dir.path,
                                    preloads=[self.preload()], output=self.options.output,
                                    follow=self.options.follow_children))

    def begin(self, process: LaunchedProcess) -> None:
        """Read the runtime files of `process`, started with `preload()`'s runtime."""
        self.process = process
        self._warnings.extend(process.env_warnings)
        self._poller = PollThread(self.poll_thread_name, self.poll, self._ended, self._note,
                                  self.poll_interval_s)
        self._poller.start()

    def _ended(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def _note(self, warning: str) -> None:
        with self._files_lock:
            self._warnings.append(warning)

    @property
    def _end_time(self) -> float | None:
        """When the poll thread's last round was done (None while it polls)."""
        return self._poller.end_time if self._poller is not None else None

    def wait(self) -> Profile:
        if self.process is not None:
            with self.applying_drained():
                self.process.wait()
        self.join_poll()
        return self.snapshot()

    def join_poll(self) -> None:
        """Wait for the poll thread's last round (it ends once the target has ended),
        started at once rather than after the poll interval."""
        if self._poller is not None:
            self._poller.wake()
            self._poller.join()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self._poller is not None:
            self._poller.stop()
        with self._files_lock:
            for reader in self._files.values():
                reader.close()
            self._files.clear()
        super().stop()

    def pause(self) -> None:
        self._set_paused(True)

    def resume(self) -> None:
        self._set_paused(False)

    def _open_new_files(self) -> None:
        """Open runtime files that appeared (the target, and followed children); the
        caller holds _files_lock."""
        for path in sorted(self.run_dir.path.glob(self.file_glob)):
            if path in self._files or path in self._bad_files:
                continue
            try:
                reader = self.open_reader(path)
            except WireVersionError as exc:  # another proftui's runtime: nothing to salvage
                self._bad_files.add(path)
                self._warnings.append(str(exc))
                continue
            except ProftuiError as exc:
                # A file being created has no header yet: give it a moment.
                if file_too_young(path, self.process):
                    continue
                salvaged = self.salvage(path, exc)
                if salvaged is None:
                    self._bad_files.add(path)
                    continue
                reader = salvaged
            if self._paused:
                reader.file.set_paused(True)
                self.opened_paused(reader)
            self._files[path] = reader

    def _set_paused(self, paused: bool) -> None:
        with self._files_lock:
            self._paused = paused
            for reader in self._files.values():
                reader.file.set_paused(paused)
