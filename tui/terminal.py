"""The terminal around the TUI: a watchdog that finishes proftui when the app cannot
(a hung-up terminal stalls Textual's writer), and restoring the terminal by hand then.
Pure POSIX terminal handling; no Textual, no collectors beyond the contract."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import termios
import threading
import time
from collections.abc import Callable
from typing import Any

from proftui.collectors.base import Collector

STUCK_EXIT_S = 5.0  # the app's normal shutdown takes well under a second
STUCK_EXIT_HUP_S = 1.5  # after SIGHUP the terminal is most likely gone: no screen to restore
THREADS_END_S = 2.0  # after the app returned, its library threads end well within this


def end_threads(status: int) -> int:
    """`status`, once every other non-daemon thread has ended; if one has not within
    THREADS_END_S, the process ends here with `status` (stdio flushed).  Textual's input
    thread reads a hung-up terminal's end of file in a loop that never stops once the
    app's shutdown could not reach the terminal: the interpreter would wait for it at
    exit forever, at 50% of a CPU (seen after a test's tmux session was killed)."""
    deadline = time.monotonic() + THREADS_END_S
    for thread in threading.enumerate():
        if thread is threading.current_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(status)
    return status


class StuckExit:
    """After a stop signal, or once the terminal has hung up, finish without the app if
    it has not returned STUCK_EXIT_S later.  Textual's writer thread dies on a write
    error (a hung-up terminal) and its full queue then blocks the event loop for good;
    the target must still be ended, the run directory removed and proftui must exit.

    The terminal is watched too because a stuck main thread may never run the
    Python-level SIGHUP handler that would arm this.
    """

    def __init__(self, collector: Collector | None,
                 signal_name: Callable[[int], str]) -> None:
        self.collector = collector
        self.signal_name = signal_name
        self.app_returned = threading.Event()
        self.finishing = threading.Lock()  # the main thread's cleanup, or ours: one of them
        self._signum: int | None = None
        self._saved_tty = _tty_attrs()
        threading.Thread(target=self._run, name="proftui-stuck-exit", daemon=True).start()

    def arm(self, signum: int) -> None:
        """Called from the signal handler: only note the signal."""
        if self._signum is None:
            self._signum = signum

    def _run(self) -> None:
        deadline: float | None = None
        while not self.app_returned.wait(0.2):
            if self._signum is None and _terminal_hung_up():
                self._signum = signal.SIGHUP
            if self._signum is not None and deadline is None:
                patience = STUCK_EXIT_HUP_S if self._signum == signal.SIGHUP else STUCK_EXIT_S
                deadline = time.monotonic() + patience
            if deadline is not None and time.monotonic() >= deadline:
                break
        else:
            return
        if not self.finishing.acquire(blocking=False):
            return
        signum = self._signum or signal.SIGHUP
        line = ""
        with contextlib.suppress(Exception):
            if self.collector is not None:
                line = self.collector.end(signum)
                self.collector.stop()
        _restore_tty(self._saved_tty)
        if line:
            _write_nonblocking(f"proftui: {self.signal_name(signum)}: {line} "
                               "(the terminal stopped responding)\n")
        os._exit(128 + signum)  # the main thread is stuck inside the app


def _terminal_hung_up() -> bool:
    """Whether the terminal on stdin has gone (a closed window, a killed tmux session)."""
    try:
        poller = select.poll()
        poller.register(sys.stdin.fileno(), select.POLLHUP)
        return any(events & (select.POLLHUP | select.POLLNVAL) for _fd, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _tty_attrs() -> list[Any] | None:
    try:
        return termios.tcgetattr(sys.stdin.fileno())
    except (termios.error, OSError, ValueError):
        return None


def _restore_tty(attrs: list[Any] | None) -> None:
    """Best effort, never blocking: leave the alternate screen, mouse off, cursor on."""
    if attrs is not None:
        with contextlib.suppress(termios.error, OSError, ValueError):
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, attrs)
    _write_nonblocking("\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"
                       "\x1b[?2004l\x1b[?1004l\x1b[<u\x1b[?1049l\x1b[?25h")


def _write_nonblocking(text: str, patience_s: float = 1.0) -> None:
    """Write to the terminal for at most `patience_s`: one that stopped reading
    must not hold proftui."""
    data = text.encode()
    deadline = time.monotonic() + patience_s
    with contextlib.suppress(OSError, ValueError):
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        os.set_blocking(fd, False)
        while data and select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
            data = data[os.write(fd, data):]
