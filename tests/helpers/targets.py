"""Fixture programs as processes: the gcc flags they are built with, and targets started
outside proftui for attach mode and the terminal tests."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from proftui.collectors.registry import COLLECTORS

from tests.conftest import build_fixture

# Frame pointers (what the sampler walks) or none (gcc -O2's default: only DWARF CFI
# finds the callers).
FP_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]
NOFP_FLAGS = ["-O2", "-g", "-fomit-frame-pointer"]
# att_spin: frame pointers everywhere (leaf functions too), or none at all.
ATT_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread"]
ATT_NO_FP_FLAGS = ["-O2", "-g", "-fomit-frame-pointer", "-pthread"]
ATT_DONE = "att_spin done sink=nonzero usr1=0\n"
SPIN_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]


class ReadyTarget:
    """A fixture program run as our child but outside proftui, as `argv`; it says "ready
    PID" on stdout first. As a context manager, it is killed at the end if it still runs."""

    def __init__(self, argv: Sequence[str | Path], stdin: int | None = None) -> None:
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=stdin,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready == f"ready {self.proc.pid}\n", ready
        self.pid = self.proc.pid

    def finish(self, timeout: float = 60) -> tuple[str, int]:
        """(the rest of its output, its exit status), once it has ended."""
        out, _ = self.proc.communicate(timeout=timeout)
        return out, self.proc.returncode

    def tracer(self) -> int:
        """The TracerPid of its /proc status: 0 when nothing traces it."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
        return -1

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> ReadyTarget:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.kill()


class SpinTarget(ReadyTarget):
    """tests/fixtures/att_spin.c (main -> att_outer -> att_middle -> att_hot, and
    att_thread_main -> att_cold in a second thread) for `seconds`; then it prints
    ATT_DONE and exits 7."""

    def __init__(self, seconds: float, flags: list[str] = ATT_FLAGS) -> None:
        super().__init__([build_fixture("att_spin.c", flags), str(seconds)])


def static_binary() -> Path:
    """tests/fixtures/cli_exit.c linked -static; skips where gcc has no static libc."""
    try:
        return build_fixture("cli_exit.c", ["-O1", "-static"], output="cli_exit_static")
    except subprocess.CalledProcessError:
        pytest.skip("gcc -static does not work here (no static libc)")


def spin_binary() -> Path:
    """tests/fixtures/life_spin.c (life_hot in a loop until killed; an argument `ignore`
    makes it ignore SIGTERM and SIGHUP); skips when sampler mode is not built."""
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    return build_fixture("life_spin.c", SPIN_FLAGS)
