"""Fixture programs as processes: the gcc flags they are built with, and targets started
outside proftui for attach mode and the terminal tests."""

from __future__ import annotations

import subprocess
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


class SpinTarget:
    """tests/fixtures/att_spin.c running as our child but outside proftui (main ->
    att_outer -> att_middle -> att_hot, and att_thread_main -> att_cold in a second
    thread) for `seconds`, then it prints ATT_DONE and exits 7."""

    def __init__(self, seconds: float, flags: list[str] = ATT_FLAGS) -> None:
        binary = build_fixture("att_spin.c", flags)
        self.proc = subprocess.Popen([str(binary), str(seconds)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == f"ready {self.proc.pid}\n"
        self.pid = self.proc.pid

    def finish(self) -> tuple[str, int]:
        """(its output, its exit status), once it has ended."""
        out, _ = self.proc.communicate(timeout=30)
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


def spin_binary() -> Path:
    """tests/fixtures/life_spin.c (life_hot in a loop until killed; an argument `ignore`
    makes it ignore SIGTERM and SIGHUP); skips when sampler mode is not built."""
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    return build_fixture("life_spin.c", SPIN_FLAGS)
