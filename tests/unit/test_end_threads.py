"""proftui ends once the TUI has returned, even when a library thread never does
(Textual's input thread loops on a hung-up terminal's end of file: a proftui whose tmux
session was killed once stayed at 50% of a CPU for half an hour, waiting for it)."""

from __future__ import annotations

import subprocess
import sys
import time

STUCK = """
import threading, time
from proftui.tui.terminal import end_threads
threading.Thread(target=lambda: time.sleep(3600)).start()  # non-daemon, never ends
print("returning", flush=True)
raise SystemExit(end_threads(7))
"""

ENDING = """
import threading, time
from proftui.tui.terminal import end_threads
threading.Thread(target=lambda: time.sleep(0.2)).start()
raise SystemExit(end_threads(5))
"""


def test_a_thread_that_never_ends_does_not_hold_the_process() -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True,
                          timeout=60)
    took = time.monotonic() - start
    assert done.returncode == 7 and done.stdout == "returning\n", done
    assert took < 30, took  # THREADS_END_S (2 s) after the return, not an hour


def test_threads_that_end_are_waited_for() -> None:
    done = subprocess.run([sys.executable, "-c", ENDING], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 5, done
