"""Processes seen through /proc: a process's children, waiting until one is gone, and
checks on what became of a target (gone, or running on untraced)."""

from __future__ import annotations

import time
from pathlib import Path


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def wait_for_child(pid: int, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = children(pid)
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never started a child")


def wait_gone(pid: int, timeout: float = 30.0) -> float:
    """Seconds until `pid` is gone (or a zombie nobody waits for any more)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return time.monotonic() - started
        if state == "Z":
            return time.monotonic() - started
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still runs after {timeout} s")


def assert_no_orphan(pid: int) -> None:
    """The target is gone, not re-parented to PID 1 (or a subreaper) and left running."""
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text(
    ).rsplit(")", 1)[1].split()[0] == "Z", f"target {pid} outlived proftui"


def assert_untouched(pid: int) -> None:
    status = dict(line.split(":\t", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
    assert status["TracerPid"].strip() == "0"
    assert status["State"][0] not in "tTZ", status["State"]
