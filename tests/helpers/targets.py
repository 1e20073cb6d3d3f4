"""Fixture programs as processes, and the profiles real collectors take of them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Profile
from proftui.collectors.registry import COLLECTORS

from tests.conftest import build_fixture

ATT_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread"]
ATT_DONE = "att_spin done sink=nonzero usr1=0\n"
SPIN_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]


class SpinTarget:
    """tests/fixtures/att_spin.c running outside proftui (main -> att_outer -> att_middle
    -> att_hot, and att_thread_main -> att_cold in a second thread), exit status 7."""

    def __init__(self, seconds: float) -> None:
        binary = build_fixture("att_spin.c", ATT_FLAGS)
        self.proc = subprocess.Popen([str(binary), str(seconds)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == f"ready {self.proc.pid}\n"
        self.pid = self.proc.pid

    def finish(self) -> tuple[str, int]:
        out, _ = self.proc.communicate(timeout=30)
        return out, self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def attach(pid: int, **options: object) -> AttachCollector:
    """A started AttachCollector on `pid`; skips when the machine forbids sampling."""
    collector = AttachCollector([], CollectorOptions(pid=pid, **options))  # type: ignore[arg-type]
    try:
        collector.start()
    except ProftuiError as exc:
        collector.stop()
        if any(w in str(exc) for w in ("denied", "refused", "ptrace_scope", "paranoid",
                                       "disabled", "not allowed")):
            pytest.skip(f"attach sampling is not allowed here: {exc}")
        raise
    return collector


def attach_profile(seconds: float = 2.0) -> Profile:
    """att_spin (running `seconds`) sampled by attach mode until it exits."""
    target = SpinTarget(seconds)
    try:
        collector = attach(target.pid, frequency_hz=500)
        profile = collector.wait()
        collector.stop()
        assert target.finish() == (ATT_DONE, 7)
    finally:
        target.kill()
    assert profile.total(0) > 50, "too few samples to test with"
    return profile


def gprof_collector(units: str = "150", status: str = "3"):
    """A GprofCollector (not started) on gp_split: heavy/medium/light = 60/30/10 of step."""
    from proftui.collectors.gprof.collector import GprofCollector

    binary = build_fixture("gp_split.c", ["-pg", "-g", "-O1", "-fno-inline"])
    return GprofCollector([str(binary), units, status], CollectorOptions(output="log"))


def sampled(argv: list[str]) -> Profile:
    """The sampler's profile of `argv`, run to its exit (output kept in memory)."""
    from proftui.collectors.sampler.collector import SamplerCollector

    collector = SamplerCollector(argv, CollectorOptions(output="log"))
    collector.start()
    try:
        return collector.wait()
    finally:
        collector.stop()


def spin_binary() -> Path:
    """tests/fixtures/life_spin.c (life_hot in a loop until killed; an argument `ignore`
    makes it ignore SIGTERM and SIGHUP); skips when sampler mode is not built."""
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    return build_fixture("life_spin.c", SPIN_FLAGS)
