"""The launcher passes the target's output and exit status through untouched."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys

from proftui.collectors.runtime.launch import ExitInfo, LaunchedProcess
from proftui.collectors.runtime.rundir import RunDirectory


def test_run_directory_is_private() -> None:
    with RunDirectory() as run_dir:
        assert stat.S_IMODE(run_dir.path.stat().st_mode) == 0o700
        assert run_dir.path.name.startswith("proftui-") and len(run_dir.path.name) > 12


def test_run_directory_is_removed_at_the_end() -> None:
    with RunDirectory() as run_dir:
        assert run_dir.path.exists()
    assert not run_dir.path.exists()


def test_launched_target_passes_through_untouched(compile_c) -> None:
    binary = compile_c("cli_exit.c", ["-O1"])
    with RunDirectory() as run_dir:
        proc = LaunchedProcess([str(binary), "7"], run_dir=run_dir.path, output="log",
                               env={"PROFTUI_TEST": "1"})
        info = proc.wait(timeout=30)
        assert info == ExitInfo(7, None) and info.shell_status() == 7
        # stdout to a pipe is fully buffered, so stderr lands first: both are there.
        assert sorted(proc.output_head().decode().splitlines()) == ["err", "out 2"]
        assert proc.output_dropped == 0
        assert list(run_dir.path.iterdir()) == []  # the output is not written under TMPDIR


def test_killed_target_reports_signal() -> None:
    with RunDirectory() as run_dir:
        proc = LaunchedProcess(["/bin/sleep", "30"], run_dir=run_dir.path, output="log")
        proc.send_signal(signal.SIGTERM)
        info = proc.wait(timeout=30)
    assert info.signal == signal.SIGTERM and info.shell_status() == 128 + signal.SIGTERM
    assert "SIGTERM" in info.describe()


def test_inherited_stdio_is_untouched(compile_c, tmp_path) -> None:
    binary = compile_c("cli_exit.c", ["-O1"])
    code = (
        "import sys; from pathlib import Path;"
        "from proftui.collectors.runtime.launch import LaunchedProcess;"
        f"p = LaunchedProcess([{str(binary)!r}, '3'], run_dir=Path({str(tmp_path)!r}));"
        "sys.exit(p.wait().shell_status())"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, env={**os.environ})
    assert (result.returncode, result.stdout, result.stderr) == (3, "out 2\n", "err\n")
