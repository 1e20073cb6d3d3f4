"""A real terminal for end-to-end tests: the installed `proftui` command in a detached
tmux session, keys sent one by one, the screen read back with capture-pane."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

PROFTUI = Path(sys.executable).parent / "proftui"


class Terminal:
    """One detached tmux session (160x50) running a command; the shell line records its status."""

    def __init__(self, command: list[str], cwd: Path) -> None:
        self.name = f"proftui-test-{uuid.uuid4().hex[:8]}"
        # COLUMNS/LINES may leak in from the test runner: the app must see the real size.
        shell = ("unset COLUMNS LINES; " + " ".join(_quote(a) for a in command)
                 + "; echo PROFTUI-EXIT=$?; sleep 60")
        # A running tmux server gives new sessions its own environment, not ours: pass the
        # test's settings directory (conftest) so remembered settings never leak in.
        config = os.environ.get("XDG_CONFIG_HOME", "")
        argv = ["tmux", "new-session", "-d", "-s", self.name, "-x", "160", "-y", "50",
                "-c", str(cwd), "-e", "TERM=xterm-256color", "-e", f"XDG_CONFIG_HOME={config}",
                shell]
        # The server exits with its last session: a new session asked for in that moment
        # fails ("server exited unexpectedly"); the next attempt starts a new server.
        for attempt in range(3):
            made = subprocess.run(argv, capture_output=True, text=True)
            if made.returncode == 0:
                break
            if attempt == 2:
                raise AssertionError(f"tmux new-session failed: {made.stderr.strip()}")
            time.sleep(0.5)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True).stdout

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {texts!r} on screen:\n{screen}")
            time.sleep(0.1)

    def key(self, key: str, settle: float = 0.3) -> None:
        """One key, then a pause (Escape followed too fast by a key reads as Alt+key)."""
        subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
        time.sleep(settle)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def pane_pid(term: Terminal) -> int:
    return int(subprocess.run(["tmux", "display", "-p", "-t", term.name, "#{pane_pid}"],
                              capture_output=True, text=True, check=True).stdout)


def wait_attached(term: Terminal, *texts: str) -> str:
    """The screen once `term`'s proftui is attached and running and shows `texts`; skips
    the test where the machine does not allow attaching (the app's last line says why)."""
    screen = term.wait_for("attach", "running")
    if "not allowed" in screen or "denied" in screen:
        pytest.skip(screen.strip().splitlines()[-1])
    return term.wait_for(*texts)


def attached_terminal(opened: list[Terminal], cwd: Path, pid: int, *texts: str
                      ) -> tuple[Terminal, str]:
    """`proftui --pid PID -F 500` in a new terminal (added to `opened`, the `terminal`
    fixture's list), and its screen once attached and showing `texts` (wait_attached)."""
    from proftui.collectors.registry import COLLECTORS

    if "attach" not in COLLECTORS:
        pytest.skip("attach mode is not in this build")
    term = Terminal([str(PROFTUI), "--pid", str(pid), "-F", "500"], cwd)
    opened.append(term)
    return term, wait_attached(term, *texts)
