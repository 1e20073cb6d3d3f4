"""The contract every collector fulfils, so the TUI and CLI never care which one runs."""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from proftui.collectors.model.profile import Profile
from proftui.collectors.runtime.launch import ExitInfo, LaunchedProcess
from proftui.collectors.runtime.output import OutputLog
from proftui.collectors.runtime.rundir import RunDirectory

if TYPE_CHECKING:
    from proftui.collectors.model.profile import Metric
    from proftui.collectors.stacktable.builder import StackProfile

APPLY_EVERY_S = 1.0  # headless runs apply drained data to the profile this often


@dataclass
class CollectorOptions:
    """User choices that collectors honour where they apply.

    frequency_hz: sampling rate (sampler, attach, instrument); count_only: hook
    library with no clock at all; timed: hook library timing every call (two
    timestamps) instead of sampling; include/exclude: function-name patterns (uftrace's
    -F/-N); max_depth: call depth limit; buffer_bytes: shared-memory budget
    per process; output: "inherit" (headless) or "log" (TUI).
    """

    output: Literal["inherit", "log"] = "inherit"
    frequency_hz: int = 1000
    count_only: bool = False
    timed: bool = False
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    max_depth: int | None = None
    buffer_bytes: int | None = None
    keep_run_dir: bool = False
    wall_clock: bool = False
    follow_children: bool = False
    duration_s: float | None = None  # attach: stop sampling after this many seconds
    pid: int | None = None  # attach: the running process to sample
    method: str | None = None  # attach: "perf" or "ptrace" (None: choose automatically)
    heap_sample_bytes: int | None = None  # heap: mean bytes between samples (None: exact)


class SeriesPart(Protocol):
    """One process of a collector of many (agent): its own stack table and labels."""

    key: int  # unique in the run
    gone: bool  # nothing more will come: released once its last changes are taken

    @property
    def table(self) -> StackProfile:
        """Its stack table; a new one, under the same series, once the old one's changes
        were all taken (a long-lived process's stacks forgotten, to bound memory)."""
        ...

    def labels(self) -> dict[str, str]: ...


class SeriesParts(Protocol):
    """A collector's processes, each pushed as a series of its own."""

    def take(self) -> Sequence[SeriesPart]:
        """Apply what arrived; every part that may have changes."""
        ...

    def tables_held(self) -> contextlib.AbstractContextManager[object]:
        """Held while the parts' tables are read: nothing adds to them meanwhile."""
        ...

    def release(self, part: SeriesPart) -> bool:
        """`part` is gone and its last changes were taken: True once it is forgotten."""
        ...

    def dropped(self) -> int:
        """Samples lost so far that no part holds (full buffers, or after their process's
        last push): the fleet keeps them per run, under the run's own labels."""
        ...


class Collector(abc.ABC):
    """Runs (or attaches to) a target and produces `Profile` snapshots.

    The common part of launched and attached targets: snapshots, reset, pause.
    `LaunchCollector` adds what launching needs (spawn, run directory, exit
    status); attach mode implements the lifecycle on its helper process.
    `snapshot()` may be called from a worker thread while the main thread
    waits; implementations guard their shared state with `self._lock`.
    """

    mode: ClassVar[str]
    can_pause: ClassVar[bool] = False
    # The CollectorOptions fields this mode honours (besides output and keep_run_dir): a
    # command line that sets any other is refused (tui/modes.py), never ignored.
    options_honoured: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def refuse(cls, program: str, options: CollectorOptions) -> None:
        """ProftuiError, in one line, when this mode cannot profile `program` with
        `options` (not built for it, statically linked, options that exclude each
        other); called before anything starts.  The default refuses nothing."""
        return None

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        self.argv = list(argv)
        self.options = options or CollectorOptions()
        self._lock = threading.RLock()
        self._baseline: Profile | None = None
        self._resets = 0  # reset() calls: part of data_version()
        self.stop_signal: int | None = None  # a SIGTERM/SIGHUP that ended the run early

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """The target's pid (None before it starts)."""

    @abc.abstractmethod
    def start(self) -> None:
        """Launch or attach; raise ProftuiError with a one-line reason on failure."""

    @abc.abstractmethod
    def collect(self) -> Profile:
        """Everything collected so far, finalized; `meta.complete` False while running.

        Subclasses implement this (not `snapshot`) so `reset()` works for free.
        """

    @abc.abstractmethod
    def exit_info(self) -> ExitInfo | None:
        """None while the target runs (or when its end status is unknown)."""

    @abc.abstractmethod
    def is_running(self) -> bool:
        """True until the target ended (or was detached from)."""

    def wait(self) -> Profile:
        """Block until the target ends; return the final profile with its exit status."""
        while self.is_running():
            time.sleep(0.05)
        return self.snapshot()

    def stop(self) -> None:  # noqa: B027 - optional: a replayed or finished target holds nothing
        """Release the target (kill a launched one, detach from an attached one)."""

    def end(self, signum: int) -> str:
        """proftui received `signum` (SIGTERM, SIGHUP): release the target as a shell
        would, i.e. detach from an attached one, which keeps running untouched.
        Returns one line on what became of the target.  `stop()` still follows."""
        self.stop_signal = self.stop_signal or signum
        self.stop()
        info = self.exit_info()
        if info is not None:
            return f"target pid {self.pid} {info.describe()}"
        return f"detached from pid {self.pid}, which keeps running"

    def signalled(self) -> int | None:
        """The SIGTERM/SIGHUP that ended the run early, if one did."""
        return self.stop_signal

    @property
    def owns_target(self) -> bool:
        """True when proftui started the target (quitting ends it); attach and the agent
        only sample processes that run on without them."""
        return True

    def quit_question(self) -> str:
        """What quitting while the run goes on does, asked before the TUI quits."""
        return f"The target (pid {self.pid}) is still running.\nQuit and kill it?"

    def output(self) -> OutputLog | None:
        """The target's stdout and stderr as captured for the TUI (thread-safe readers;
        kept after `stop()`); None when proftui does not hold them: headless runs, where
        the target writes to the terminal, and attached processes."""
        return None

    def data_version(self) -> object | None:
        """A cheap token that changes whenever `snapshot()` could return something new
        (samples arrived, the target ended, counters were reset); None when the collector
        cannot tell, so a poller must take every snapshot.  Live pollers skip snapshots
        while it stays the same (paused, or a target that sleeps)."""
        return None

    @property
    def lock(self) -> threading.RLock:
        """Held by `snapshot()` through `collect()`; a reader of `stack_tables()` holds it
        from its `collect()` until it has read them."""
        return self._lock

    def stack_tables(self) -> list[StackProfile]:
        """The live stack tables `collect()` folds counts into, in metric order (their
        metrics side by side are the profile's): what a fleet push takes each interval
        from (`StackProfile.changes`).  Empty when the collector keeps none; a push then
        subtracts snapshots."""
        return []

    def tables_held(self) -> contextlib.AbstractContextManager[object]:
        """Held (after `collect()`, under `lock`) while `stack_tables()` are read, for a
        collector whose reader thread adds stacks to them outside `lock` (attach)."""
        return contextlib.nullcontext()

    def series_parts(self) -> SeriesParts | None:
        """For a collector of many processes (agent), its parts, each pushed under its
        own series and labels; None for one process (pushed as one series)."""
        return None

    def series_metrics(self) -> tuple[Metric, ...]:
        """The metrics of the parts' tables (with `series_parts`)."""
        return ()

    def apply_drained(self) -> None:  # noqa: B027 - optional: most collectors keep nothing raw
        """Apply what the collector has drained but not yet applied to its live profile,
        without making a snapshot.  Headless runs call it every APPLY_EVERY_S
        (`applying_drained`), so raw data (new stacks, per-interval counts) never piles
        up until the end of a long run; the TUI's snapshots do the same work.  Takes
        `self._lock`."""

    @contextlib.contextmanager
    def applying_drained(self) -> Iterator[None]:
        """While the body runs (a headless wait), a thread calls `apply_drained()` every
        APPLY_EVERY_S, so the body's thread stays free to forward signals to the target."""
        done = threading.Event()

        def loop() -> None:
            while not done.wait(APPLY_EVERY_S):
                try:
                    self.apply_drained()
                except Exception:  # the final collect() meets it again and says it
                    return

        thread = threading.Thread(target=loop, name="proftui-apply-drained", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def snapshot(self) -> Profile:
        """`collect()` minus the counters at the last `reset()` (the model's one
        subtraction, `diff.subtract`: a `b` mark taken at the same moment gives the
        same numbers)."""
        with self._lock:
            profile = self.collect()
            if self._baseline is not None:
                from proftui.collectors.model.diff import subtract

                profile = subtract(profile, self._baseline)
            return profile

    def pause(self) -> None:
        """Pause collection in the target (the target keeps running)."""
        raise NotImplementedError(f"{self.mode} mode cannot pause collection")

    def resume(self) -> None:
        raise NotImplementedError(f"{self.mode} mode cannot pause collection")

    def reset(self) -> None:
        """Zero the counters: later snapshots show only what happens from now on."""
        with self._lock:
            self._baseline = None
            self._baseline = self.collect()
            self._resets += 1


class LaunchCollector(Collector):
    """A collector that starts the target itself (gprof, instrument, sampler).

    `start()` creates `self.process` (a `LaunchedProcess`) with the per-run
    directory `self.run_dir` as the runtime's output place; the lifecycle
    follows that process.
    """

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        self.run_dir = RunDirectory(keep=self.options.keep_run_dir)
        self.process: LaunchedProcess | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def exit_info(self) -> ExitInfo | None:
        return self.process.poll() if self.process is not None else None

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait(self) -> Profile:
        if self.process is not None:
            with self.applying_drained():
                self.process.wait()
        return self.snapshot()

    def output(self) -> OutputLog | None:
        return self.process.output_log if self.process is not None else None

    def stop(self) -> None:
        """Kill the target if it still runs, then remove the run directory."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.close()
        self.run_dir.close()

    def end(self, signum: int) -> str:
        """Pass `signum` on to the target (its process group in the TUI), SIGKILL it
        if it still runs GRACE_S later; one line on how it ended."""
        self.stop_signal = self.stop_signal or signum
        if self.process is None:
            return "no target was started"
        self.process.terminate(signum)
        return self.process.describe_end()

    def signalled(self) -> int | None:
        if self.stop_signal is None and self.process is not None:
            return self.process.stop_signal  # caught while waiting (LaunchedProcess.wait)
        return self.stop_signal
