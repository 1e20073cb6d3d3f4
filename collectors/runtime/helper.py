"""The out-of-process sampling helper (proftui-attach) as a child of the front end: its
start, the reader thread's end, the stop request, and the wait for a stop signal.

Attach (`--pid`) and the agent (`agent`, `--all`) run the same helper with different
arguments and read the same stream (wire_attach.py); this is the part of their
lifecycle that does not depend on what the stream says.  Stopping = a byte on the
helper's stdin, then closing it; if proftui dies the helper sees EOF and
PR_SET_PDEATHSIG and stops too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from proftui.collectors.runtime.launch import stop_signals

STOP_TIMEOUT_S = 5.0


class Helper:
    """A running proftui-attach: its pipes, and `ended` once its stream has ended."""

    def __init__(self, argv: list[str], ended: threading.Event) -> None:
        """`ended`: set by the caller's reader when the stream ended."""
        # Own session: a Ctrl-C at the terminal reaches proftui, which then stops the
        # helper in order, instead of reaching the helper directly.
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, close_fds=True)
        self.ended = ended
        self._stdin_lock = threading.Lock()  # forget() and stop() write from two threads

    def chunks(self) -> Iterator[bytes]:
        """What the helper writes, read by read, until it closes its stdout."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                return
            yield data

    def reap(self) -> str:
        """After the stream ended: wait for the helper; its stderr's tail when it failed
        ("" when it ended with status 0)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        if self.proc.returncode in (0, None):
            return ""
        return self.stderr()

    def stderr(self) -> str:
        stream = self.proc.stderr
        return stream.read().decode(errors="replace").strip() if stream else ""

    def stop(self) -> None:
        """Ask the helper to stop and wait for its stream's end (idempotent); kill it
        when it does not end in time."""
        stdin = self.proc.stdin
        with self._stdin_lock:
            if stdin is not None and not stdin.closed:
                with contextlib.suppress(OSError, ValueError):
                    stdin.write(b"q")
                    stdin.flush()
                with contextlib.suppress(OSError, ValueError):
                    stdin.close()
        if not self.ended.wait(STOP_TIMEOUT_S):
            self.kill()  # the kernel detaches a dead tracer; perf fds close
            self.ended.wait(STOP_TIMEOUT_S)

    def forget(self) -> bool:
        """Ask the system method's helper to empty its stack table (a FORGET record
        follows once every count before it is out); False when it is stopping."""
        stdin = self.proc.stdin
        with self._stdin_lock:
            if stdin is None or stdin.closed:
                return False
            try:
                stdin.write(b"f")
                stdin.flush()
            except (OSError, ValueError):
                return False
            return True

    def abort(self) -> None:
        """The start failed: end the helper; no reader will see its stream end, so it is
        over now (a later stop() returns at once)."""
        self.kill()
        self.ended.set()

    def kill(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Stopped(Exception):
    """A stop signal came while the main thread waited: raised out of the wait, which a
    signal interrupts only by raising (no polling: each wake-up costs CPU)."""


def wait_for_stop(ended: threading.Event, duration_s: float | None,
                  on_signal: Callable[[int], None],
                  around: contextlib.AbstractContextManager[Any] | None = None) -> None:
    """Until `ended`, `duration_s` passed, Ctrl-C, or SIGTERM/SIGHUP (handed to
    `on_signal`, on the main thread only); `around`: held meanwhile (a headless run's
    applying of drained data)."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    stop = threading.Event()
    waiting = [False]  # the handler raises only out of the wait itself
    old_handlers: dict[int, Any] = {}

    def handler(signum: int, _frame: object) -> None:
        on_signal(signum)
        stop.set()
        if waiting[0]:
            raise _Stopped

    if threading.current_thread() is threading.main_thread():
        for sig in stop_signals():
            old_handlers[sig] = signal.signal(sig, handler)
    try:
        with around if around is not None else contextlib.nullcontext():
            while not ended.is_set():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                waiting[0] = True  # before the check: a signal from here on raises
                try:
                    if stop.is_set():
                        break
                    ended.wait(remaining)
                except _Stopped:
                    break
                finally:
                    waiting[0] = False
    except KeyboardInterrupt:
        pass  # Ctrl-C ends the recording; the profile is still kept
    finally:
        for sig, old in old_handlers.items():
            signal.signal(sig, old)
