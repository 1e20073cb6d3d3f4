"""Perf maps and jitdumps under attach, both methods: JIT code of a process sampled
from outside is named from its /tmp/perf-PID.map or its mapped jit-PID.dump
(collectors/symbols/jitdump.py, StackFrames.watch_jit), module `[jit]`, and the
attach helper's walk (the one unwinder, csrc/common/pt_unwind.c) goes on through it
by frame pointer and through a call stub by the stub step.

tests/fixtures/smp_jit.c MODE 60 ready writes the file, says "ready PID", and spins.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import pytest
from proftui.collectors.model.views import flat_profile

from tests.conftest import build_fixture
from tests.helpers.collect import attach
from tests.helpers.costs import paths_to
from tests.helpers.targets import ReadyTarget

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the fixture generates x86-64 code")

CHAINS = {"good": ("jit_spin", ["main", "run_jit", "jit_spin"]),
          "dump": ("jit_spin", ["main", "run_jit", "jit_spin"]),
          "stub": ("stub_spin", ["main", "run_stub", "call_stub", "jit_stub", "stub_spin"])}


@pytest.mark.parametrize("mode", sorted(CHAINS))
@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_attach_names_and_unwinds_jit_code(method: str, mode: str) -> None:
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    with ReadyTarget([binary, mode, "60", "ready"]) as target:
        try:
            collector = attach(target.pid, method, frequency_hz=500)
            try:
                # Sampled until 100 samples are in, within a deadline (CPU-time samples
                # come slower on a loaded machine); the target spins longer than that.
                deadline = time.monotonic() + 40
                profile = collector.snapshot()
                while profile.total(0) < 100 and time.monotonic() < deadline:
                    time.sleep(0.1)  # polling a live profile, not waiting for an event
                    profile = collector.snapshot()
            finally:
                collector.stop()
            assert target.proc.poll() is None, "the target did not survive the attach"
        finally:
            for path in (f"/tmp/perf-{target.pid}.map", f"/tmp/jit-{target.pid}.dump"):
                Path(path).unlink(missing_ok=True)
    whole = profile.total(0)
    assert whole >= 100, f"too few samples in 40 s: {whole}"
    assert not [w for w in profile.meta.warnings if "perf map" in w or "jitdump" in w]
    spin, chain = CHAINS[mode]
    rows = {e.frame.function: e for e in flat_profile(profile)}
    jit = chain[-1] if mode != "stub" else "jit_stub"
    assert jit in rows and rows[jit].frame.module == "[jit]", list(rows)
    assert rows[spin].self_cost[0] >= 0.8 * whole, (rows[spin], whole)
    plain = [[name.split(" [clone")[0] for name in p] for p in paths_to(profile, spin)]
    through = [p for p in plain if p[-len(chain):] == chain]
    assert len(through) == len(plain), plain
