"""Lifecycle costs (issue 14), each against an anchor measured in the same run.

1. A target writing 1 GiB to stdout: through the TUI's bounded output log
   (pipe + drain thread) vs into /dev/null (the anchor: no reader at all) and
   into `cat > /dev/null` (a C reader on a pipe).
2. SIGTERM to `proftui --text prog` until proftui exits: a target that dies
   at once, one that ignores SIGTERM (SIGKILL after GRACE_S); the anchor is
   the same target without proftui.
3. The same for the TUI in tmux (if installed): the app's shutdown included.

usage: python benchmarks/bench_lifecycle.py
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.runtime.launch import GRACE_S, LaunchedProcess  # noqa: E402
from proftui.collectors.runtime.rundir import RunDirectory  # noqa: E402

from tests.conftest import build_fixture  # noqa: E402

PROFTUI = Path(sys.executable).parent / "proftui"


def timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def output_log() -> None:
    flood = str(build_fixture("life_flood.c", ["-O2"]))

    def devnull() -> None:
        with open(os.devnull, "wb") as sink:
            subprocess.run([flood, "1024"], stdout=sink, check=True)

    def cat() -> None:
        subprocess.run(f"{flood} 1024 | cat > /dev/null", shell=True, check=True)

    def log() -> None:
        with RunDirectory() as run_dir:
            proc = LaunchedProcess([flood, "1024"], run_dir=run_dir.path, output="log")
            assert proc.wait().status == 0
            proc.close()

    anchor = timed(devnull)
    piped = timed(cat)
    ours = timed(log)
    print(f"1 GiB of output: /dev/null {anchor:.2f} s (anchor), cat pipe {piped:.2f} s "
          f"(x{piped / anchor:.1f}), proftui log {ours:.2f} s (x{ours / anchor:.1f})")


def headless_sigterm() -> None:
    spin = str(build_fixture("life_spin.c", ["-O1", "-g", "-fno-omit-frame-pointer"]))

    def until_exit(argv: list[str]) -> float:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready PID"
        time.sleep(0.5)
        started = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.communicate()
        return time.perf_counter() - started

    anchor = until_exit([spin])
    prompt = until_exit([str(PROFTUI), "--text", spin])
    ignoring = until_exit([str(PROFTUI), "--text", spin, "ignore"])
    print(f"headless SIGTERM -> exit: target alone {anchor * 1000:.0f} ms (anchor), "
          f"proftui + prompt target {prompt * 1000:.0f} ms, proftui + target ignoring it "
          f"{ignoring:.2f} s (grace {GRACE_S:g} s)")


def tui_sigterm() -> None:
    if shutil.which("tmux") is None:
        print("TUI: tmux is not installed, skipped")
        return
    spin = str(build_fixture("life_spin.c", ["-O1", "-g", "-fno-omit-frame-pointer"]))
    for how in ("", "ignore"):
        name = f"proftui-bench-{os.getpid()}"
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50",
                        f"exec {PROFTUI} {spin} {how}"], check=True)
        try:
            time.sleep(4)  # the app is up and sampling
            pane = int(subprocess.run(["tmux", "display", "-p", "-t", name, "#{pane_pid}"],
                                      capture_output=True, text=True).stdout)
            started = time.perf_counter()
            os.kill(pane, signal.SIGTERM)
            while _running(pane):  # a zombie has exited (tmux reaps it late)
                time.sleep(0.005)
            took = time.perf_counter() - started
        finally:
            subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        print(f"TUI SIGTERM -> exit, {how or 'prompt'} target: {took:.2f} s")


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


if __name__ == "__main__":
    tempfile.tempdir = tempfile.mkdtemp(prefix="bench-lifecycle-")
    try:
        output_log()
        headless_sigterm()
        tui_sigterm()
    finally:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)
