"""The target's process status for the TUI's process pane: psutil snapshots (no widgets).

One `psutil.Process` is kept per pid; `sample()` costs well under a
millisecond for the light fields and is meant for 1-2 Hz polling from a
worker thread.  Peak RSS and thread names come from /proc directly.

Its one reader is the process pane (the app polls, the pane draws).  It sits
in collectors because the TUI reads no files, /proc included, and in runtime
beside the target's other live state: its threads (tasks.py) and its output
(output.py, shown in the same pane).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import psutil
from proftui.collectors.procfs import proc_status, status_bytes
from proftui.collectors.runtime.tasks import live_task
from proftui.collectors.runtime.thread_names import printable_name, read_comm

HISTORY = 120  # samples of history kept for the sparklines


@dataclass(frozen=True)
class ThreadStat:
    tid: int
    name: str
    cpu_percent: float  # of one core, since the previous sample


@dataclass(frozen=True)
class ProcStat:
    """One look at the process.  Memory in bytes, CPU in percent of one core."""

    pid: int
    alive: bool
    state: str = ""
    name: str = ""
    cpu_percent: float = 0.0
    rss: int = 0
    vms: int = 0
    peak_rss: int = 0
    num_threads: int = 0
    num_fds: int | None = None
    ctx_voluntary: int = 0
    ctx_involuntary: int = 0
    read_bytes: int | None = None
    write_bytes: int | None = None
    threads: tuple[ThreadStat, ...] = ()
    error: str = ""
    cpu_history: tuple[float, ...] = field(default_factory=tuple)
    rss_history: tuple[float, ...] = field(default_factory=tuple)


def _peak_rss(pid: int) -> int:
    return status_bytes(proc_status(pid), "VmHWM") or 0


class ProcSampler:
    """Samples one pid; keeps CPU and RSS history and per-thread CPU deltas."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._process: psutil.Process | None = None
        self._thread_times: dict[int, float] = {}
        self._last_time: float | None = None
        self.cpu_history: deque[float] = deque(maxlen=HISTORY)
        self.rss_history: deque[float] = deque(maxlen=HISTORY)
        self._last: ProcStat | None = None

    def sample(self) -> ProcStat:
        """The current state; `alive` False once the process is gone (last values kept)."""
        try:
            if self._process is None:
                self._process = psutil.Process(self.pid)
                self._process.cpu_percent(None)  # primes the CPU counter
            return self._sample(self._process)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            if self._follow_live_task():
                return self.sample()
            return self._gone("process has exited")
        except psutil.AccessDenied:
            return self._gone("permission denied reading the process")

    def _follow_live_task(self) -> bool:
        """The main thread called pthread_exit and others run on: look at the process
        through a live thread from now on (its /proc entry shows the whole group)."""
        tid = live_task(self.pid)
        if tid is None or self._process is None or tid == self._process.pid:
            return False
        try:
            self._process = psutil.Process(tid)
            self._process.cpu_percent(None)
        except psutil.Error:
            return False
        return True

    def _gone(self, why: str) -> ProcStat:
        last = self._last
        if last is None:
            return ProcStat(self.pid, alive=False, error=why)
        return ProcStat(self.pid, False, "gone", last.name, 0.0, last.rss, last.vms,
                        last.peak_rss, 0, None, last.ctx_voluntary, last.ctx_involuntary,
                        last.read_bytes, last.write_bytes, (), why,
                        tuple(self.cpu_history), tuple(self.rss_history))

    def _sample(self, proc: psutil.Process) -> ProcStat:
        now = time.monotonic()
        with proc.oneshot():
            info = proc.as_dict(attrs=["name", "status", "memory_info", "num_threads",
                                       "num_ctx_switches", "threads"], ad_value=None)
            cpu = proc.cpu_percent(None)
            try:
                num_fds: int | None = proc.num_fds()
            except psutil.AccessDenied:
                num_fds = None
            try:
                io = proc.io_counters()
                read_bytes, write_bytes = io.read_bytes, io.write_bytes
            except (psutil.AccessDenied, AttributeError):
                read_bytes = write_bytes = None
        if info["status"] == psutil.STATUS_ZOMBIE:
            if self._follow_live_task():
                return self.sample()
            return self._gone("process has exited (zombie)")
        elapsed = now - self._last_time if self._last_time is not None else 0.0
        self._last_time = now
        threads = []
        times: dict[int, float] = {}
        for t in info["threads"] or []:
            used = t.user_time + t.system_time
            times[t.id] = used
            before = self._thread_times.get(t.id)
            share = 100.0 * (used - before) / elapsed if before is not None and elapsed > 0 else 0.0
            name = read_comm(f"/proc/{proc.pid}/task/{t.id}/comm") or ""
            threads.append(ThreadStat(t.id, name, max(0.0, share)))
        self._thread_times = times
        mem = info["memory_info"]
        ctx = info["num_ctx_switches"]
        self.cpu_history.append(cpu)
        self.rss_history.append(float(mem.rss) if mem else 0.0)
        stat = ProcStat(
            pid=self.pid, alive=True, state=info["status"] or "",
            # psutil hands back the comm's undecodable bytes as surrogates: escape them.
            name=printable_name(info["name"] or ""),
            cpu_percent=cpu, rss=mem.rss if mem else 0, vms=mem.vms if mem else 0,
            peak_rss=_peak_rss(proc.pid), num_threads=info["num_threads"] or 0,
            num_fds=num_fds, ctx_voluntary=ctx.voluntary if ctx else 0,
            ctx_involuntary=ctx.involuntary if ctx else 0, read_bytes=read_bytes,
            write_bytes=write_bytes, threads=tuple(sorted(threads, key=lambda t: -t.cpu_percent)),
            cpu_history=tuple(self.cpu_history), rss_history=tuple(self.rss_history),
        )
        self._last = stat
        return stat
