"""Perf maps and jitdumps under attach, both methods: JIT code of a process sampled
from outside is named from its /tmp/perf-PID.map or its mapped jit-PID.dump
(collectors/symbols/jitdump.py, StackFrames.watch_jit), module `[jit]`, and the
attach helper's walk (the one unwinder, csrc/common/pt_unwind.c) goes on through it
by the jitdump's unwinding records (csrc/common/pt_jit.c), by frame pointer, and
through a call stub by the stub step.

tests/fixtures/smp_jit.c MODE 60 ready writes the file, says "ready PID", and spins.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from proftui.collectors.model.views import flat_profile
from proftui.collectors.symbols.stacks import PSEUDO_ROOTS, STACK_UNREADABLE

from tests.conftest import build_fixture
from tests.helpers.collect import attached_until
from tests.helpers.costs import paths_to, total_of
from tests.helpers.targets import ReadyTarget

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the fixture generates x86-64 code")

CHAINS = {"good": ("jit_spin", ["main", "run_jit", "jit_spin"]),
          "dump": ("jit_spin", ["main", "run_jit", "jit_spin"]),
          "stub": ("stub_spin", ["main", "run_stub", "call_stub", "jit_stub", "stub_spin"]),
          # No frame pointer, rsp moved: only the jitdump's unwinding record unwinds it.
          "dump-cfi": ("jit_cfi", ["main", "run_cfi", "call_stub", "jit_cfi"])}


@pytest.mark.parametrize("mode", sorted(CHAINS))
@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_attach_names_and_unwinds_jit_code(method: str, mode: str) -> None:
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    with ReadyTarget([binary, mode, "60", "ready"]) as target:
        try:
            profile = attached_until(target.pid, 100, method, frequency_hz=500)
            assert target.proc.poll() is None, "the target did not survive the attach"
        finally:
            for path in (f"/tmp/perf-{target.pid}.map", f"/tmp/jit-{target.pid}.dump"):
                Path(path).unlink(missing_ok=True)
    whole = profile.total(0)
    assert whole >= 100, f"too few samples in 40 s: {whole}"
    # The jitdump's own mapping (executable, for perf to find) is not code to symbolize.
    assert not [w for w in profile.meta.warnings
                if "perf map" in w or "jitdump" in w or "not a readable ELF" in w]
    spin, chain = CHAINS[mode]
    rows = {e.frame.function: e for e in flat_profile(profile)}
    jit = chain[-1] if mode != "stub" else "jit_stub"
    assert jit in rows and rows[jit].frame.module == "[jit]", list(rows)
    assert rows[spin].self_cost[0] >= 0.8 * whole, (rows[spin], whole)
    # A sample whose stack page the kernel could not read (being migrated: once in CI,
    # 1 of ~100) keeps its leaf only, under its own root: no unwinder could do more.
    unread = PSEUDO_ROOTS[STACK_UNREADABLE]
    assert total_of(profile, unread) <= 0.05 * whole, profile.meta.warnings
    plain = [[name.split(" [clone")[0] for name in p] for p in paths_to(profile, spin)
             if p[0] != unread]
    through = [p for p in plain if p[-len(chain):] == chain]
    if mode != "dump-cfi":
        assert len(through) == len(plain), plain
        return
    # Generated code without a frame pointer: where a loaded machine made a sample's
    # stack copy useless (its seam changed), no frame-pointer chain can carry the walk
    # on, and the sample stays cut at the leaf (once 1 of 101, in a container).
    assert through and all(p in through or p == [spin] for p in plain), plain
    assert rows["run_cfi"].total_cost[0] >= 0.95 * rows[spin].total_cost[0], rows


def jit_page(pid: int) -> int:
    """Start of the fixture's generated code: its one anonymous executable mapping."""
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if fields[1].startswith("r-x") and len(fields) == 5:
            return int(fields[0].split("-")[0], 16)
    raise AssertionError(f"no anonymous executable mapping in pid {pid}")


def test_a_map_older_than_the_process_is_not_used() -> None:
    """A /tmp/perf-PID.map last written before the process started was left by an
    earlier process with the same pid: its names are not used, and one warning says
    why (without the check, it named the code `stale_name`)."""
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    with ReadyTarget([binary, "nomap", "60", "ready"]) as target:
        stale = Path(f"/tmp/perf-{target.pid}.map")
        try:
            fd = os.open(stale, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, f"{jit_page(target.pid):x} e stale_name\n".encode())
            os.close(fd)
            hour_ago = time.time() - 3600
            os.utime(stale, (hour_ago, hour_ago))
            profile = attached_until(target.pid, 100, frequency_hz=500)
        finally:
            stale.unlink(missing_ok=True)
    assert profile.total(0) >= 100, profile.total(0)
    names = {e.frame.function for e in flat_profile(profile)}
    assert "stale_name" not in names, names
    warned = [w for w in profile.meta.warnings if "perf map" in w]
    assert len(warned) == 1 and "before the process started" in warned[0], warned


@pytest.mark.parametrize("mode", ["good", "dump", "dump-cfi"])
def test_a_container_map_is_read_through_its_root(mode: str) -> None:
    """A target in its own mount and pid namespaces (a container: private /tmp, pid 1
    there) writes /tmp/perf-1.map (or maps /tmp/jit-1.dump) in its /tmp; attached from
    outside, its JIT code is named from /proc/PID/root/tmp/..., as perf reads it, and
    the jitdump's unwinding records unwind it (dump-cfi)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to make a mount and pid namespace")
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    script = f"mount -t tmpfs -o mode=1777 tmpfs /tmp && exec {binary} {mode} 60 ready"
    proc = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--kill-child",
                             "--mount-proc", "sh", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready != "ready 1\n":
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.skip(f"no namespaces here: unshare said {err.strip()[:200]!r}")
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        profile = attached_until(int(children[0]), 100, frequency_hz=500)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    assert profile.total(0) >= 100, profile.total(0)
    assert not [w for w in profile.meta.warnings if "perf map" in w or "jitdump" in w], \
        profile.meta.warnings
    rows = {e.frame.function: e for e in flat_profile(profile)}
    spin = CHAINS[mode][0]
    assert spin in rows and rows[spin].frame.module == "[jit]", list(rows)
    assert rows[spin].self_cost[0] >= 0.8 * profile.total(0), rows[spin]
    if mode == "dump-cfi":  # as below: a starved helper may cut a sample at the leaf
        assert rows["run_cfi"].total_cost[0] >= 0.95 * rows[spin].total_cost[0], rows
