"""The ptrace method's clock (issue 26): the target's own ITIMER_PROF, set in it for
the attach by running system calls in one of its threads, and removed at detach.

Each test checks that the target is unharmed: its output and exit status, its
action for SIGPROF afterwards, a system call it was blocked in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from proftui.collectors.runtime.libraries import runtime_executable_path

from tests.conftest import build_fixture
from tests.helpers.collect import attach, attached_profile
from tests.helpers.costs import names_on_paths, self_costs
from tests.helpers.targets import ATT_DONE, ReadyTarget, SpinTarget

TIMER_NOTE = "ptrace: samples were taken where the target's own CPU timer"
SIGPROF_BIT = 1 << (signal.SIGPROF - 1)


def ignored_signals(pid: int) -> int:
    """The SigIgn mask of /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn in /proc/{pid}/status")


def sigprof_fixture() -> Path:
    return build_fixture("att_sigprof.c", ["-O2", "-g", "-pthread"])


def test_the_timer_is_set_for_the_attach_only() -> None:
    """SIGPROF is ignored in the target while attached and its own action is back after:
    the target then spins on (a SIGPROF left pending would end it) and exits as usual."""
    with SpinTarget(2.5) as fixture:
        before = ignored_signals(fixture.pid)
        collector = attach(fixture.pid, "ptrace", frequency_hz=1000, duration_s=0.8)
        time.sleep(0.4)
        during = ignored_signals(fixture.pid)
        profile = collector.wait()
        collector.stop()
        after = ignored_signals(fixture.pid)
        assert fixture.finish() == (ATT_DONE, 7)
    assert not before & SIGPROF_BIT and during & SIGPROF_BIT and after == before
    assert any(w.startswith(TIMER_NOTE) for w in profile.meta.warnings), profile.meta.warnings
    selfs = self_costs(profile)
    assert selfs.get("att_hot", 0) + selfs.get("att_cold", 0) > 0.8 * profile.total(0), selfs


def test_a_killed_helper_leaves_the_target_running() -> None:
    """If the helper dies without detaching, the timer's signals are ignored, not fatal."""
    with SpinTarget(1.5) as fixture:
        helper = subprocess.Popen([runtime_executable_path("proftui-attach"), str(fixture.pid),
                                   "1000", "ptrace"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert helper.stdout is not None
        header = helper.stdout.read(32)
        if len(header) < 32:
            helper.wait()
            pytest.skip(f"ptrace is not allowed here: {helper.stderr.read().decode()!r}")
        time.sleep(0.3)
        assert ignored_signals(fixture.pid) & SIGPROF_BIT
        helper.kill()
        helper.communicate()
        assert fixture.finish() == (ATT_DONE, 7)


def test_a_target_with_its_own_sigprof_is_polled() -> None:
    """A target that profiles itself keeps its handler and timer: proftui polls instead."""
    with ReadyTarget([sigprof_fixture(), "own", "1.5"]) as target:
        collector = attach(target.pid, "ptrace", frequency_hz=500, duration_s=0.6)
        profile = collector.wait()
        collector.stop()
        assert target.finish() == ("own ticks=1\n", 0)
    notes = [w for w in profile.meta.warnings if "the target handles SIGPROF itself" in w]
    assert notes and notes[0].startswith("ptrace: sampling by looking at the threads"), \
        profile.meta.warnings
    assert "sp_spin" in self_costs(profile)


def test_a_system_call_the_target_was_blocked_in_goes_on() -> None:
    """The timer is set through a thread blocked in read(): that read is restarted,
    neither failed with EINTR nor cut short."""
    with ReadyTarget([sigprof_fixture(), "read", "0.4"], stdin=subprocess.PIPE) as target:
        assert target.proc.stdin is not None
        time.sleep(0.1)  # in read() by now
        collector = attach(target.pid, "ptrace", frequency_hz=1000)
        time.sleep(0.2)
        target.proc.stdin.write("hello\n")
        target.proc.stdin.flush()
        profile = collector.wait()  # until the target exits
        collector.stop()
        assert target.finish() == ("read hello\n", 0)
    assert any(w.startswith(TIMER_NOTE) for w in profile.meta.warnings), profile.meta.warnings
    assert "sp_spin" in self_costs(profile)



@pytest.mark.parametrize("when", ["early", "late"])
def test_a_thread_that_blocks_sigprof_is_polled(when: str) -> None:
    """The timer's signal goes to a thread that does not block it: a running thread that
    blocks SIGPROF (one started before the attach, or after) would go unsampled and wake
    others, so proftui polls from when it sees one, and still samples that thread."""
    with ReadyTarget([sigprof_fixture(), "blocked", "1.0", when]) as target:
        collector = attach(target.pid, "ptrace", frequency_hz=500)
        profile = collector.wait()  # until the target exits
        collector.stop()
        assert target.finish() == ("blocked done\n", 0)
    notes = [w for w in profile.meta.warnings if "blocks SIGPROF" in w]
    assert len(notes) == 1 and notes[0].startswith("ptrace: thread "), profile.meta.warnings
    paths = names_on_paths(profile)
    assert any("sp_blocked_spin" in p for p in paths), paths


def test_signals_sent_while_the_timer_is_set_and_removed_all_arrive() -> None:
    """Queued signals sent all through the attach (while system calls run in the target
    at its start and end) are each delivered once: none lost, none doubled."""
    with ReadyTarget([sigprof_fixture(), "rt", "3.5"]) as target:
        sent = 0
        done = threading.Event()

        def send() -> None:
            nonlocal sent
            while not done.is_set():
                os.kill(target.pid, signal.SIGRTMIN)
                sent += 1
                time.sleep(0.0005)

        sender = threading.Thread(target=send)
        sender.start()
        try:
            for _ in range(3):  # three attaches: three arms and three removals
                collector = attach(target.pid, "ptrace", frequency_hz=1000, duration_s=0.2)
                profile = collector.wait()
                collector.stop()
                assert any(w.startswith(TIMER_NOTE) for w in profile.meta.warnings), \
                    profile.meta.warnings
        finally:
            done.set()
            sender.join()
        assert target.finish() == (f"rt {sent}\n", 0)


CLOCK_NOTE = "ptrace: blocking system calls are under-counted"


@pytest.mark.parametrize("clock", ["timer", "polling"])
def test_every_ptrace_profile_says_what_its_clock_misses(clock: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocking system calls get too few samples on either ptrace clock (issue 32, item
    5: a server's epoll_wait 11-34 points under perf's): every ptrace profile says so,
    names --method perf and what it needs here; a perf profile says none of it."""
    if clock == "polling":
        monkeypatch.setenv("PROFTUI_ATTACH_POLL", "1")  # read by the helper
    with SpinTarget(1.5) as fixture:
        ptrace = attached_profile(fixture, "ptrace", frequency_hz=500, duration_s=0.3)
        perf = attached_profile(fixture, "perf", frequency_hz=500, duration_s=0.3)
        assert fixture.finish() == (ATT_DONE, 7)
    notes = [w for w in ptrace.meta.warnings if w.startswith(CLOCK_NOTE)]
    assert len(notes) == 1, ptrace.meta.warnings
    note = notes[0]
    assert "epoll_wait" in note and "--method perf" in note, note
    assert "kernel.perf_event_paranoid <= 1, or CAP_PERFMON" in note, note
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    assert "CAP_PERFMON here" in note or f"kernel.perf_event_paranoid={paranoid}" in note, note
    timer = any(w.startswith(TIMER_NOTE) for w in ptrace.meta.warnings)
    assert timer == (clock == "timer"), ptrace.meta.warnings
    assert ("ITIMER_PROF" in note) == (clock == "timer"), note
    assert not any("under-counted" in w for w in perf.meta.warnings), perf.meta.warnings
