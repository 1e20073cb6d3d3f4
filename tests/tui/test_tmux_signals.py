"""SIGTERM/SIGHUP to the TUI in a real terminal (tmux), as a desktop or `kill` sends them
(issue 14): the app leaves the alternate screen, turns mouse reporting off and shows the
cursor again; a launched target ends as a shell would end it (SIGKILL after the grace
period if it ignores the signal), an attached one runs on untraced; proftui exits 128+N
with one line on what became of the target; nothing is left under TMPDIR.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.registry import COLLECTORS
from proftui.collectors.runtime.launch import GRACE_S

from tests.helpers.processes import assert_no_orphan, assert_untouched, wait_for_child, wait_gone
from tests.helpers.targets import ReadyTarget, spin_binary
from tests.helpers.tmux import PROFTUI, Terminal, pane_pid, wait_attached

# A login shell's part when its terminal closes: pass SIGHUP on to the job, then record
# the job's status (a plain `sh -c` would die first, taking the status with it).
HUP_WRAPPER = """\
import os, signal, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGHUP, lambda signum, _frame: proc.send_signal(signum))
status = proc.wait()
with open(sys.argv[1] + ".part", "w") as out:
    out.write(str(status))
os.replace(sys.argv[1] + ".part", sys.argv[1])  # the test polls for the file: whole or absent
"""


def modes(term: Terminal) -> tuple[str, str, str]:
    """(alternate screen on, cursor visible, mouse reporting on) as tmux sees them."""
    out = subprocess.run(["tmux", "display", "-p", "-t", term.name,
                          "#{alternate_on} #{cursor_flag} #{mouse_any_flag}"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0], out[1], out[2]


def tmpdir(tmp_path: Path) -> Path:
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def start(terminal: list[Terminal], tmp_path: Path, tmp: Path, *args: str) -> Terminal:
    term = Terminal(["env", f"TMPDIR={tmp}", str(PROFTUI), *args], tmp_path)
    terminal.append(term)
    return term


@pytest.mark.parametrize(("how", "sig", "said"), [
    ("", signal.SIGTERM, "killed by signal 15 (SIGTERM)"),
    ("ignore", signal.SIGTERM, f"ignored SIGTERM for {GRACE_S:g} s and was killed by signal 9"),
    ("", signal.SIGHUP, "killed by signal 1 (SIGHUP)"),
    ("", signal.SIGINT, "killed by signal 2 (SIGINT)"),  # `kill -INT`: the keys send none
])
def test_signal_to_the_tui_ends_a_launched_run_cleanly(terminal: list[Terminal], tmp_path: Path,
                                                       how: str, sig: int, said: str) -> None:
    tmp = tmpdir(tmp_path)
    term = start(terminal, tmp_path, tmp, str(spin_binary()), *([how] if how else []))
    term.wait_for("running", "life_hot")
    assert modes(term) == ("1", "0", "1")  # the app owns the screen
    app = wait_for_child(pane_pid(term))
    target = wait_for_child(app)
    os.kill(app, sig)
    took = wait_gone(app)
    screen = term.wait_for(f"PROFTUI-EXIT={128 + sig}")
    assert f"proftui: {signal.Signals(sig).name}: target pid {target} {said}" in screen
    assert "Traceback" not in screen
    assert modes(term) == ("0", "1", "0"), "terminal left in the app's modes"
    assert_no_orphan(target)
    assert list(tmp.iterdir()) == [], "run directory left under TMPDIR"
    print(f"{signal.Signals(sig).name} to proftui exit, {how or 'default'} target: {took:.2f} s")


@pytest.mark.parametrize("how", ["", "ignore"])
def test_closing_the_terminal_ends_target(terminal: list[Terminal], tmp_path: Path,
                                          how: str) -> None:
    """`tmux kill-session` hangs the terminal up: SIGHUP, as when a window is closed."""
    tmp = tmpdir(tmp_path)
    status = tmp_path / "status"
    term = Terminal([sys.executable, "-c", HUP_WRAPPER, str(status), "env", f"TMPDIR={tmp}",
                     str(PROFTUI), str(spin_binary()), *([how] if how else [])], tmp_path)
    terminal.append(term)
    term.wait_for("running", "life_hot")
    app = wait_for_child(wait_for_child(pane_pid(term)))  # sh -> wrapper -> proftui
    target = wait_for_child(app)
    term.close()
    took = wait_gone(app)
    deadline = time.monotonic() + 10
    while not status.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status.read_text() == str(128 + signal.SIGHUP)
    assert_no_orphan(target)
    assert list(tmp.iterdir()) == [], "run directory left under TMPDIR"
    print(f"terminal closed to proftui exit, {how or 'default'} target: {took:.2f} s")


def attach_target() -> ReadyTarget:
    """life_spin running outside proftui, for it to attach to."""
    if "attach" not in COLLECTORS:
        pytest.skip("attach mode is not in this build")
    return ReadyTarget([spin_binary()])


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_sigterm_to_the_tui_detaches_cleanly(terminal: list[Terminal],
                                             tmp_path: Path, method: str) -> None:
    with attach_target() as target:
        tmp = tmpdir(tmp_path)
        term = start(terminal, tmp_path, tmp, "--pid", str(target.pid), "--method", method)
        wait_attached(term, "life_hot")
        assert modes(term) == ("1", "0", "1")
        app = wait_for_child(pane_pid(term))
        os.kill(app, signal.SIGTERM)
        took = wait_gone(app)
        screen = term.wait_for("PROFTUI-EXIT=143")
        assert f"proftui: SIGTERM: detached from pid {target.pid}, which keeps running" in screen
        assert modes(term) == ("0", "1", "0"), "terminal left in the app's modes"
        time.sleep(0.2)
        assert target.proc.poll() is None
        assert_untouched(target.pid)
        assert list(tmp.iterdir()) == []
        print(f"SIGTERM to proftui exit, attach ({method}): {took:.2f} s")


def test_attach_terminal_closed_detaches(terminal: list[Terminal], tmp_path: Path) -> None:
    with attach_target() as target:
        tmp = tmpdir(tmp_path)
        status = tmp_path / "status"
        term = Terminal([sys.executable, "-c", HUP_WRAPPER, str(status), "env",
                         f"TMPDIR={tmp}", str(PROFTUI), "--pid", str(target.pid),
                         "--method", "ptrace"], tmp_path)
        terminal.append(term)
        wait_attached(term, "life_hot")
        app = wait_for_child(wait_for_child(pane_pid(term)))
        term.close()
        wait_gone(app)
        deadline = time.monotonic() + 10
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.read_text() == str(128 + signal.SIGHUP)
        time.sleep(0.2)
        assert target.proc.poll() is None
        assert_untouched(target.pid)
        assert list(tmp.iterdir()) == []


def test_terminal_that_stopped_reading(terminal: list[Terminal], tmp_path: Path) -> None:
    """The terminal stops reading (its tmux server is stopped), Textual's writes block
    and its event loop with them: SIGTERM still ends the target, removes the run
    directory and exits 143 (after terminal.STUCK_EXIT_S), instead of hanging forever."""
    from proftui.tui.terminal import STUCK_EXIT_S

    tmp = tmpdir(tmp_path)
    status = tmp_path / "status"
    server = f"proftui-stuck-{os.getpid()}"  # a private server: stopping it stops no one else
    tmux = ["tmux", "-L", server]
    shell = (f"env TMPDIR={tmp} {PROFTUI} {spin_binary()}; echo $? > {status}; sleep 60")
    subprocess.run([*tmux, "new-session", "-d", "-s", "s", "-x", "160", "-y", "50",
                    "-e", "TERM=xterm-256color", shell], check=True)
    server_pid = 0
    try:
        deadline = time.monotonic() + 30
        while "life_hot" not in subprocess.run([*tmux, "capture-pane", "-p", "-t", "s"],
                                               capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, "the app never showed its profile"
            time.sleep(0.1)
        sh = int(subprocess.run([*tmux, "display", "-p", "-t", "s", "#{pane_pid}"],
                                capture_output=True, text=True, check=True).stdout)
        server_pid = int(subprocess.run([*tmux, "display", "-p", "#{pid}"],
                                        capture_output=True, text=True, check=True).stdout)
        app = wait_for_child(sh)
        target = wait_for_child(app)
        os.kill(server_pid, signal.SIGSTOP)
        time.sleep(3)  # the app's refreshes fill the terminal's buffer and Textual's queue
        os.kill(app, signal.SIGTERM)
        took = wait_gone(app, timeout=STUCK_EXIT_S + GRACE_S + 20)
        assert_no_orphan(target)
        assert list(tmp.iterdir()) == [], "run directory left under TMPDIR"
        os.kill(server_pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status.read_text().strip() == "143"
        print(f"SIGTERM to proftui exit, terminal not reading: {took:.2f} s")
    finally:
        if server_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(server_pid, signal.SIGCONT)
        subprocess.run([*tmux, "kill-server"], capture_output=True)
