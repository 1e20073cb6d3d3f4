"""End to end as a person would: the installed `proftui` command in a real terminal (tmux),
keys sent one by one, the screen read back with capture-pane."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.registry import COLLECTORS

from tests.conftest import build_fixture
from tests.helpers.targets import ATT_DONE, SpinTarget
from tests.helpers.tmux import PROFTUI, Terminal, attached_terminal


def gprof_binary() -> Path:
    if "gprof" not in COLLECTORS:
        pytest.skip("gprof mode is not in this build")
    return build_fixture("gp_split.c", ["-pg", "-g", "-O1", "-fno-inline"])


def test_saved_profile_drill_down_in_a_terminal(terminal: list[Terminal], tmp_path: Path
                                                ) -> None:
    saved = tmp_path / "split.proftui"
    record = subprocess.run([str(PROFTUI), "record", "-o", str(saved), str(gprof_binary()),
                             "150", "3"], capture_output=True, text=True, timeout=120)
    assert record.returncode == 3, record.stderr  # the target's own status
    term = Terminal([str(PROFTUI), "open", str(saved)], tmp_path)
    terminal.append(term)
    screen = term.wait_for("Self%", "step", "1 Flat")
    assert "gprof" in screen.splitlines()[0]
    rows = [line for line in screen.splitlines() if " step " in f" {line} "]
    assert rows, screen
    term.key("Enter")  # step is the top row: its callers and callees
    screen = term.wait_for("who calls step", "tree: step")
    for caller in ("heavy", "medium", "light"):
        assert caller in screen
    term.key("Enter")  # its source, at the hottest line
    screen = term.wait_for("source: step", "6364136223846793005UL")
    assert "gp_split.c" in screen
    term.key("Escape")
    term.wait_for("who calls step")
    term.key("4")
    term.wait_for("no live process")
    term.key("q")
    term.wait_for("PROFTUI-EXIT=0")


def test_live_attach_quit_detaches(terminal: list[Terminal], tmp_path: Path) -> None:
    with SpinTarget(20.0) as target:
        term, screen = attached_terminal(terminal, tmp_path, target.pid, "att_hot", "att_cold")
        assert f"pid {target.pid}" in screen.splitlines()[0]
        term.key("4")
        term.wait_for("peak RSS", "threads", str(target.pid))
        term.key("q")
        term.wait_for("Detach from pid", "keeps running")
        term.key("y")
        term.wait_for("PROFTUI-EXIT=0")
        assert target.proc.poll() is None, "detaching must leave the target running"
        status = Path(f"/proc/{target.pid}/status").read_text()
        assert "TracerPid:\t0" in status
        os.kill(target.pid, 0)


def test_live_gprof_run_shows_exit_status(terminal: list[Terminal], tmp_path: Path) -> None:
    binary = gprof_binary()
    term = Terminal([str(PROFTUI), str(binary), "150", "5"], tmp_path)
    terminal.append(term)
    screen = term.wait_for("exited with status 5", "step", timeout=60)
    assert "heavy" in screen
    term.key("q")
    term.wait_for("PROFTUI-EXIT=5")  # proftui exits with the target's status


@pytest.mark.parametrize(("how", "status", "said"), [("exit", 4, "exited with status 4"),
                                                     ("abort", 134, "killed by signal 6")])
def test_gprof_run_without_gmon_out_exits_with_the_targets_status(
        terminal: list[Terminal], tmp_path: Path, how: str, status: int, said: str) -> None:
    """Issue 26: a -pg target leaving through _exit(4) (or abort) writes no gmon.out, so
    the TUI had no final profile and proftui exited 0."""
    if "gprof" not in COLLECTORS:
        pytest.skip("gprof mode is not in this build")
    binary = build_fixture("gp_exit.c", ["-pg", "-g", "-O1"])
    term = Terminal([str(PROFTUI), str(binary), *([how] if how == "abort" else [])], tmp_path)
    terminal.append(term)
    term.wait_for(f"target {said}", timeout=60)
    term.key("q")
    term.wait_for(f"PROFTUI-EXIT={status}")


def test_attach_target_keeps_output(terminal: list[Terminal], tmp_path: Path) -> None:
    """The target profiled live in the TUI still prints its own line and exits 7."""
    if "attach" not in COLLECTORS:
        pytest.skip("attach mode is not in this build")
    # 8 s: the TUI's start (Textual's import, the attach) takes seconds on a loaded
    # machine, and a target that ended first cannot be attached to (a 2 s one once was not).
    with SpinTarget(8.0) as target:
        term = Terminal([str(PROFTUI), "--pid", str(target.pid)], tmp_path)
        terminal.append(term)
        term.wait_for("att_hot", timeout=60)
        term.wait_for("exited", timeout=60)
        term.key("q")
        term.wait_for("PROFTUI-EXIT=")
        assert target.finish() == (ATT_DONE, 7)
