"""Sampler mode against hostile targets: they use the sampling signal, close
every fd, fork 50 children, crash.  The target's output and exit status
must be what it is without proftui, nothing may hang, and a profile comes
back every time.
"""

from __future__ import annotations

import platform
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler
from tests.helpers.costs import self_costs
from tests.helpers.targets import FP_FLAGS, NOFP_FLAGS


def plain_run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("how", ["handler", "ignore"])
def test_target_owning_sigprof_keeps_it(how: str) -> None:
    """The target's own SIGPROF use works as without proftui; sampling moves away."""
    binary = build_fixture("smp_signals.c", NOFP_FLAGS)
    plain = plain_run(binary, how)
    profile, output = run_sampler(binary, how)
    assert (output, profile.meta.exit_status) == (plain.stdout, plain.returncode)
    assert plain.returncode == 4 and "MISSING" not in output
    assert "SIGPROF" not in profile.meta.clock  # moved to another signal
    assert any("uses SIGPROF itself" in w for w in profile.meta.warnings)
    assert self_costs(profile).get("busy", 0) > 50


def test_target_blocking_sigprof_does_not_hang() -> None:
    binary = build_fixture("smp_signals.c", NOFP_FLAGS)
    profile, output = run_sampler(binary, "block")
    assert (output, profile.meta.exit_status) == ("block: done\n", 4)
    # Blocked signals are lost samples: proftui says so rather than guessing.
    assert self_costs(profile).get("busy", 0) < 20
    assert any("did the target block" in w for w in profile.meta.warnings)


def test_gprof_binary_keeps_its_sigprof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-pg code's profil() owns SIGPROF: the sampler must move before it starts."""
    binary = build_fixture("smp_signals.c", ["-O2", "-g", "-pg"], output="smp_signals_pg")
    monkeypatch.chdir(tmp_path)  # gmon.out lands here
    profile, output = run_sampler(binary, "pg")
    assert (output, profile.meta.exit_status) == ("pg: done\n", 4)
    assert "SIGPROF" not in profile.meta.clock
    assert (tmp_path / "gmon.out").stat().st_size > 0
    assert self_costs(profile).get("busy", 0) > 50


@pytest.mark.parametrize("how", ["closefds", "closerange"])
def test_target_closing_all_fds(how: str) -> None:
    """Daemon-style "close everything" must not stop the sampling either."""
    binary = build_fixture("smp_robust.c", FP_FLAGS)
    profile, output = run_sampler(binary, how)
    assert (output, profile.meta.exit_status) == ("closefds done\n", 3)
    assert self_costs(profile).get("busy", 0) > 50


def test_fork_50_children_exit_statuses_kept() -> None:
    binary = build_fixture("smp_robust.c", FP_FLAGS)
    profile, output = run_sampler(binary, "fork")
    assert (output, profile.meta.exit_status) == ("fork done bad=0\n", 5)
    assert len(profile.meta.pids) == 1  # children are not followed by default


def test_fork_50_children_followed() -> None:
    binary = build_fixture("smp_robust.c", FP_FLAGS)
    profile, output = run_sampler(binary, "fork", follow_children=True)
    assert (output, profile.meta.exit_status) == ("fork done bad=0\n", 5)
    assert len(profile.meta.pids) == 51
    assert self_costs(profile).get("busy", 0) > 5


@pytest.mark.parametrize(("how", "sig"), [("segv", signal.SIGSEGV), ("kill", signal.SIGKILL)])
def test_killed_target_still_yields_profile(how: str, sig: int) -> None:
    binary = build_fixture("smp_robust.c", NOFP_FLAGS)
    profile, output = run_sampler(binary, how)
    assert output == "about to die\n"
    assert (profile.meta.exit_status, profile.meta.exit_signal) == (None, sig)
    assert self_costs(profile).get("busy", 0) > 20
    busy = next(f for f in profile.frames if f.function == "busy")
    assert Path(busy.module).resolve() == binary.resolve()


def test_inherited_stdio_untouched(capfd: pytest.CaptureFixture[str]) -> None:
    """Headless mode: the target writes straight to our stdout."""
    from proftui.collectors.base import CollectorOptions
    from proftui.collectors.sampler.collector import SamplerCollector

    binary = build_fixture("smp_work.c", FP_FLAGS)
    collector = SamplerCollector([str(binary), "50"], CollectorOptions(output="inherit"))
    collector.start()
    try:
        profile = collector.wait()
    finally:
        collector.stop()
    assert capfd.readouterr().out == "done 50\n"
    assert profile.meta.exit_status == 7


@pytest.mark.parametrize("follow", [False, True])
def test_exec_in_child(follow: bool) -> None:
    """A forked child that exec's is profiled only when following children."""
    binary = build_fixture("smp_robust.c", NOFP_FLAGS)
    profile, output = run_sampler(binary, "exec", follow_children=follow)
    assert (output, profile.meta.exit_status) == ("exec done status=9\n", 5)
    assert len(profile.meta.pids) == (2 if follow else 1)
    child_parts = [t for part, t in profile.parts.items()
                   if not part.startswith(f"pid {profile.meta.pids[0]} ")]
    assert bool(child_parts) == follow


def test_many_short_threads_reuse_slots() -> None:
    """300 threads one after another: more than the 128 slots, reused once drained."""
    binary = build_fixture("smp_threads.c", [*FP_FLAGS, "-pthread"])
    profile, output = run_sampler(binary, "many")
    assert (output, profile.meta.exit_status) == ("many done\n", 0)
    assert not any("not sampled" in w for w in profile.meta.warnings)
    assert len(profile.meta.threads) > 200


def test_stack_deeper_than_kept_frames() -> None:
    binary = build_fixture("smp_robust.c", NOFP_FLAGS)
    profile, output = run_sampler(binary, "deep")
    assert (output, profile.meta.exit_status) == ("deep 300\n", 0)
    assert any("deeper than 128 frames" in w for w in profile.meta.warnings)
    assert not any("cut short" in w for w in profile.meta.warnings)
    leaves = [n for n in profile.tree.nodes() if profile.frames[n.frame_id].function == "busy"]
    assert sum(n.self_cost[0] for n in leaves) > 20
    for node in leaves:
        names = [profile.frames[f].function for f in node.path()]
        assert len(names) == 128 and names[:-1] == ["recurse"] * 127, names[:3]


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the fixture reads rsp (x86-64)")
def test_target_that_hides_its_own_stack_page_survives() -> None:
    """The stack page under a register-only leaf made PROT_NONE for 20 ms at a time
    (att_hidden_stack.c): the handler reads the live stack in place, so it probes each
    page before reading it.  It killed the target (SIGSEGV in the handler) before;
    now such samples keep their leaf, the notes count them by their true cause, and
    the target exits 0 with its own output."""
    binary = build_fixture("att_hidden_stack.c", ["-O2", "-g", "-pthread"])
    profile, output = run_sampler(binary, "2")
    assert profile.meta.exit_status == 0, (profile.meta.exit_status, output)
    assert re.fullmatch(r"ready \d+\nhidden [1-9]\d*\n", output), output
    costs = self_costs(profile)
    assert costs.get("hidden_spin", 0) >= 0.9 * profile.total(0), costs
    unread = [w for w in profile.meta.warnings if "came without their whole stack" in w]
    assert unread, profile.meta.warnings
    share = int(unread[0].split(" of ")[0].replace(",", "")) / profile.total(0)
    assert 0.1 <= share <= 0.8, (share, unread)  # hidden about half the time
    assert not any("frame pointers or unwind tables" in w for w in profile.meta.warnings), \
        profile.meta.warnings
