"""Threads of a process seen through /proc/PID/task: which still run.

A process whose main thread called pthread_exit is a zombie leader with a
live thread group; /proc/PID then shows empty memory, so readers look at the
process through one of its live threads instead.
"""

from __future__ import annotations

import os
from pathlib import Path


def task_state(pid: int, tid: int) -> str:
    """State letter of one thread ("R", "S", "Z"...), "" if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text(errors="replace")
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2 :][:1]


def live_task(pid: int) -> int | None:
    """A thread of `pid` that still runs: `pid` itself, or, once its leader called
    pthread_exit (a zombie whose group runs on), one of the other threads, whose
    /proc entries still show the process's memory.  None if every thread is dead."""
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (OSError, ValueError):
        return None
    if pid in tids:  # the leader first
        tids.remove(pid)
        tids.insert(0, pid)
    for tid in tids:
        if task_state(pid, tid) not in ("", "Z", "X", "x"):
            return tid
    return None
