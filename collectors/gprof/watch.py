"""What /proc shows of a gprof target while it runs, for the notes on its gmon.out.

glibc writes gmon.out only at exit, so whatever could explain a missing or
empty profile must be seen before the target is reaped: how many threads it
ran, how much CPU it used (utime + stime, read until it is a zombie), whether
it blocked or ignored SIGPROF (glibc's profil() samples on SIGPROF from
ITIMER_PROF), whether it changed its root directory (chroot) or its
filesystem user id, and which executable objects it mapped (to name a
dlopen'ed plugin that gmon.out's arcs point into).  Polled from one daemon
thread every 20 ms; each poll reads three small /proc files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

from proftui.collectors.procfs import parse_status, proc_status, status_ints
from proftui.collectors.symbols.maps import AddressSpace

POLL_S = 0.02
MAPS_EVERY = 5  # polls between two reads of /proc/PID/maps (maps can be long)
SIGPROF_BIT = 1 << (signal.SIGPROF - 1)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class TargetWatch:
    """Facts about process `pid` polled from /proc until it ends (or `stop()`)."""

    def __init__(self, pid: int, program: Path) -> None:
        self.pid = pid
        self.program = program
        self.most_threads = 1
        self.cpu_s = 0.0  # utime + stime at the last poll (a lower bound of the total)
        # The root it started with is ours (we launched it): its own link, read here,
        # may already be the jail when it chroots first thing (seen under load).
        self.first_root = _readlink("/proc/self/root")
        self.new_root: str | None = None  # the root directory it changed to, if seen
        self.sigprof_ignored = False  # SIGPROF set to SIG_IGN at some poll
        self._polls = 0
        self._blocked_polls = 0  # polls that found SIGPROF blocked in every thread
        self.fsuid: int | None = None  # its filesystem uid at the last poll
        self.space = AddressSpace(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proftui-gprof-watch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        polls = 0
        while not self._done.is_set():
            if not self._poll(polls % MAPS_EVERY == 0):
                return
            polls += 1
            self._done.wait(POLL_S)

    def _poll(self, maps: bool) -> bool:
        """One look; False once the process is gone (or reaped)."""
        base = f"/proc/{self.pid}"
        try:
            tasks = os.listdir(f"{base}/task")
            with open(f"{base}/stat", "rb") as f:
                stat = f.read()
            with open(f"{base}/status", "rb") as f:
                status = f.read()
        except OSError:  # ended (or a zombie being reaped)
            return False
        self.most_threads = max(self.most_threads, len(tasks))
        fields = stat.rpartition(b")")[2].split()
        if len(fields) > 12:
            # A zombie's stat still holds its whole CPU time: the closest to the total.
            self.cpu_s = max(self.cpu_s, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
        values = parse_status(status)
        if fields and fields[0] == b"Z":
            return True
        if _mask(values, "SigIgn") & SIGPROF_BIT:
            self.sigprof_ignored = True
        self._polls += 1
        if _mask(values, "SigBlk") & SIGPROF_BIT and self._all_threads_block(tasks):
            self._blocked_polls += 1
        uids = status_ints(values, "Uid")  # real, effective, saved, filesystem
        if len(uids) == 4:
            self.fsuid = uids[3]
        root = _readlink(f"{base}/root")
        if root is not None and self.first_root is not None and root != self.first_root:
            self.new_root = root
        if maps:
            self.space.refresh()
        return True

    def _all_threads_block(self, tasks: list[str]) -> bool:
        """A process-wide SIGPROF goes to any thread that does not block it."""
        for tid in tasks:
            status = proc_status(self.pid, int(tid))
            if status and not _mask(status, "SigBlk") & SIGPROF_BIT:
                return False
        return True

    @property
    def sigprof_blocked(self) -> bool:
        """Every thread blocked SIGPROF for most of the run, not in a moment's critical
        section (pthread_create blocks all signals briefly)."""
        return self._blocked_polls >= max(2, self._polls // 2)

    def stop(self) -> None:
        """Stop polling (idempotent)."""
        self._done.set()
        self._thread.join()

    def main_base(self) -> int | None:
        """Load bias of the main program (runtime minus link-time address), if seen."""
        for mapping in self.space.mappings:
            if mapping.path == str(self.program):
                resolved = self.space.resolve(mapping.start)
                if resolved is not None:
                    return mapping.start - resolved[1]
        return None


def _readlink(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return os.readlink(path)
    return None


def _mask(status: dict[str, str], key: str) -> int:
    """A signal mask field of /proc/PID/status (hex), 0 when missing."""
    return (status_ints(status, key, 16) or [0])[0]
