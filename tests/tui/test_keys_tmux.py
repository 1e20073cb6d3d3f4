"""Keys in a real 80x24 terminal (tmux): the key bar keeps `?` and `q`, the Process-pane
trap is gone, `?` opens help, Ctrl-C ends or detaches as in a shell."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from proftui.collectors.model.storage import save

from tests.helpers.processes import assert_no_orphan, assert_untouched, wait_for_child, wait_gone
from tests.helpers.profiles import sample_profile
from tests.helpers.targets import SpinTarget, spin_binary
from tests.helpers.tmux import PROFTUI, Terminal, attached_terminal, pane_pid


def small(term: Terminal) -> Terminal:
    """Shrink the session to 80x24, as a default terminal window is."""
    subprocess.run(["tmux", "resize-window", "-t", term.name, "-x", "80", "-y", "24"],
                   check=True)
    return term


def last_line(screen: str) -> str:
    lines = screen.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def test_keys_reachable_at_80x24(terminal: list[Terminal], tmp_path: Path) -> None:
    saved = save(sample_profile(), tmp_path / "sample.proftui")
    term = small(Terminal([str(PROFTUI), "open", str(saved)], tmp_path))
    terminal.append(term)
    term.wait_for("Self%", "leaf")
    deadline = time.monotonic() + 15
    while len(term.screen().splitlines()[0]) > 80 and time.monotonic() < deadline:
        time.sleep(0.1)
    for key in ("1", "2", "3", "4"):
        term.key(key)
        screen = term.wait_for(" q Quit", " ? Help")
        assert len(screen.splitlines()) == 24 and max(map(len, screen.splitlines())) <= 80
        bar = last_line(screen)
        assert "? Help" in bar and "q Quit" in bar, screen
    # The reported trap: 4, w, Esc, then keys must reach the app, not a hidden filter.
    term.key("4")
    term.key("w")
    term.wait_for("Notes on this profile")
    term.key("Escape")
    term.key("1")
    screen = term.wait_for("Self%")
    assert "matching" not in screen, screen
    term.key("?")
    screen = term.wait_for("Flat profile (this pane)", "Everywhere")
    term.key("Escape")
    screen = term.wait_for("Self%", " q Quit")
    assert "Everywhere" not in screen
    term.key("q")
    term.wait_for("PROFTUI-EXIT=0")


def test_ctrl_c_interrupts_a_launched_target(terminal: list[Terminal], tmp_path: Path) -> None:
    term = Terminal([str(PROFTUI), str(spin_binary())], tmp_path)
    terminal.append(term)
    term.wait_for("running", "life_hot")
    app = wait_for_child(pane_pid(term))
    target = wait_for_child(app)
    term.key("C-c")
    wait_gone(app)
    screen = term.wait_for("PROFTUI-EXIT=130")
    assert f"proftui: SIGINT: target pid {target} killed by signal 2 (SIGINT)" in screen
    assert "Traceback" not in screen
    assert_no_orphan(target)


def test_ctrl_c_detaches_from_an_attached_process(terminal: list[Terminal], tmp_path: Path
                                                  ) -> None:
    with SpinTarget(30.0) as target:
        term, _screen = attached_terminal(terminal, tmp_path, target.pid, "att_hot")
        term.key("C-c")
        screen = term.wait_for("PROFTUI-EXIT=130")
        assert f"proftui: SIGINT: detached from pid {target.pid}, which keeps running" \
            in screen
        time.sleep(0.2)
        assert target.proc.poll() is None, "Ctrl-C must leave an attached process running"
        assert_untouched(target.pid)
