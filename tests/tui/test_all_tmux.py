"""`proftui --all` in a real terminal: every process of the host, live; `t` picks a
process or one of its threads, the Process pane says why it shows none, and quitting stops the
sampling without touching any process."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.helpers.processes import assert_untouched
from tests.helpers.targets import SpinTarget
from tests.helpers.tmux import PROFTUI, Terminal


def _may_sample_every_process() -> None:
    if os.geteuid() == 0:
        return
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid > -1:
        pytest.skip("sampling every process needs root or CAP_PERFMON "
                    f"(kernel.perf_event_paranoid is {paranoid})")


def test_all_shows_every_process_and_quits_touching_none(terminal: list[Terminal],
                                                         tmp_path: Path) -> None:
    _may_sample_every_process()
    with SpinTarget(60.0) as target:
        term = Terminal([str(PROFTUI), "--all", "-F", "199"], tmp_path)
        terminal.append(term)
        term.wait_for("agent", "running", "att_hot")
        # Snapshots keep coming while processes start (a lock-order deadlock once froze
        # them at the first few hundred samples).
        first = _samples(term.screen())
        deadline = time.monotonic() + 20
        while _samples(term.screen()) < first + 500 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _samples(term.screen()) >= first + 500, term.screen()
        term.key("t")
        # The fixture as a process (its threads merged, named by its program); its
        # threads follow the processes, below the fold on a busy host.
        screen = term.wait_for(f"process {target.pid} ", "All threads")
        row = next(line for line in screen.splitlines() if f"process {target.pid} " in line)
        assert "att_spin" in row, row
        term.key("Escape")
        term.key("4")
        term.wait_for("every process of the host is sampled")
        term.key("q")
        term.wait_for("Stop sampling every process and quit?", "No process is touched.")
        term.key("y")
        screen = term.wait_for("PROFTUI-EXIT=0")
        assert "Traceback" not in screen
        assert target.proc.poll() is None, "quitting --all must leave every process running"
        assert_untouched(target.pid)


def _samples(screen: str) -> int:
    """The header's sample count."""
    match = re.search(r"([\d,]+) samples", screen)
    return int(match.group(1).replace(",", "")) if match else 0


def test_all_refuses_a_program_or_a_pid(tmp_path: Path) -> None:
    import subprocess

    for extra in (["/bin/true"], ["--pid", str(os.getpid())], ["--mode", "gprof"]):
        result = subprocess.run([str(PROFTUI), "--all", *extra], capture_output=True,
                                text=True, timeout=60, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("proftui: "), \
            result.stderr
