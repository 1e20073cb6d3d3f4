"""Kernel time is counted (issue 13): a syscall-heavy fixture (reads of
/dev/zero, nearly all kernel time: getrusage says so) measures the CPU share
of the function making the system calls with its thread CPU clock, and the
profile's share of that function must match it within 5 points, under the
sampler (perf and timer clocks) and attach (perf and ptrace).  Where perf may
count user time only, the profile must say "user time only" (and the test of
the share skips, saying why)."""

from __future__ import annotations

import math
import re

import pytest
from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import attached_profile, run_sampler
from tests.helpers.costs import total_of
from tests.helpers.targets import ReadyTarget

FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]
SECONDS = "2.5"


def measured_share(output: str) -> float:
    """The fixture's own share of CPU time in smp_syscalls (thread CPU clock)."""
    match = re.search(r"syscall_share=([0-9.]+) kernel_share=([0-9.]+)", output)
    assert match, output
    assert float(match[2]) > 0.2, output  # getrusage: the fixture really is syscall-heavy
    return float(match[1])


def profiled_share(profile: Profile, floor: int = 100) -> float:
    """smp_syscalls' share of the profile's CPU time (at least `floor` samples): the
    time metric, whose samples are weighted by the periods they stand for (a timer's
    overruns), as the fixture's clock measures time."""
    samples = profile.total(0)
    assert samples >= floor, samples
    names = [metric.name for metric in profile.metrics]
    time_metric = names.index("cpu_ns") if "cpu_ns" in names else 0
    return total_of(profile, "smp_syscalls", time_metric) / profile.total(time_metric)


@pytest.mark.parametrize("clock", ["perf", "timer"])
def test_sampler_counts_kernel_time(clock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if clock == "timer":
        monkeypatch.setenv("PROFTUI_SAMPLER_CLOCK", "timer")
    profile, output = run_sampler(build_fixture("smp_syscall.c", FLAGS), SECONDS)
    kernel = measured_share(output)
    if "user time only" in profile.meta.clock:
        pytest.skip(f"perf_event may count user time only here: {profile.meta.clock}")
    # POSIX CPU timers expire at scheduler ticks (about 250 samples/s here, not 1000),
    # so the timer clock has a quarter of perf's samples and more spread.  With rounds
    # of one fixed length CI measured 0.32 against 0.372, 0.294 against 0.377 and
    # 0.366 against 0.468 (508 samples: 4.6 standard errors); rounds now vary in
    # length, so a cycle in step with the ticks cannot recur (tests/fixtures/smp_syscall.c).
    # Bound: 5 standard errors of the samples taken, and no tighter than 0.05 / 0.10.
    samples = profile.total(0)
    spread = 5 * math.sqrt(kernel * (1 - kernel) / samples)
    tolerance = max(0.05 if clock == "perf" else 0.10, spread)
    share = profiled_share(profile)
    assert abs(share - kernel) <= tolerance, (share, kernel, samples)


def test_sampler_user_time_only_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """PROFTUI_SAMPLER_KERNEL=0 forces the path a machine without kernel
    counting takes: the profile says so, and its share is far below the truth."""
    monkeypatch.setenv("PROFTUI_SAMPLER_KERNEL", "0")
    profile, output = run_sampler(build_fixture("smp_syscall.c", FLAGS), "1.5")
    if "perf" not in profile.meta.clock:
        pytest.skip(f"perf_event is not available: {profile.meta.clock}")
    assert "user time only" in profile.meta.clock
    assert any(w.startswith("user time only") for w in profile.meta.warnings)
    assert profiled_share(profile) < measured_share(output) - 0.15


def attach_until_exit(method: str) -> tuple[Profile, str]:
    """Attach to smp_syscall until it exits, after SECONDS of its own CPU time (a loaded
    machine stretches the run instead of starving the profile: ptrace's clock samples
    at most once per kernel tick of the target's CPU time, so 2.5 s of wall time once
    gave it 44 samples): (profile, the fixture's output)."""
    with ReadyTarget([build_fixture("smp_syscall.c", FLAGS), SECONDS, "cpu"]) as target:
        # 4 kHz, not 1: the fixture's read/compute cycle takes about a millisecond, and a
        # fixed 1 ms period aliases with it (perf method, 24 runs: shares off by up to 0.063,
        # 3 of them beyond 0.04; at 4 kHz 18 runs stayed within 0.02).  perf record's
        # frequency mode jitters its period; the attach's fixed period does not: a known
        # limitation, docs/attach-stream.md).
        profile = attached_profile(target, method, frequency_hz=4000)
        out, status = target.finish(timeout=20)
    assert status == 0
    return profile, out


def test_attach_user_time_only_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFTUI_ATTACH_KERNEL", "0")
    profile, out = attach_until_exit("perf")
    assert "user time only" in profile.meta.clock
    assert any(w.startswith("user time only") for w in profile.meta.warnings)
    assert profiled_share(profile) < measured_share(out) - 0.15


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_attach_counts_kernel_time(method: str) -> None:
    floor = 100 if method == "perf" else 40
    profile, out = attach_until_exit(method)
    if profile.total(0) < floor:
        # A loaded machine starves ptrace's helper (29 samples once, beside two busy
        # loops, the suite and a slow host): the share needs more; one more run.
        profile, out = attach_until_exit(method)
    if "user time only" in profile.meta.clock:
        pytest.skip(f"perf_event may count user time only here: {profile.meta.clock}")
    kernel = measured_share(out)
    # ptrace's samples wait on the helper: beside two busy loops its SIGPROF stops
    # coalesce (87 samples once); each stands for the CPU time since the last.
    share, samples = profiled_share(profile, floor), profile.total(0)
    # Five standard errors of a share of `samples` samples.  perf samples at the 4 kHz
    # asked: thousands of samples, and 0.05 holds.  ptrace's clock is the target's
    # ITIMER_PROF, checked at the kernel's ticks (250 a second here): about 600 samples
    # in 2.5 s of CPU time, a standard error near 0.02; and a stop asked for during a
    # short read() is taken when the call returns (0.01 on an idle machine).
    error = math.sqrt(kernel * (1 - kernel) / samples)
    tolerance = 0.05 if method == "perf" else 0.01 + 5 * error
    print(f"{method}: share {share:.3f}, measured {kernel:.3f}, {samples:.0f} samples, "
          f"tolerance {tolerance:.3f}")
    assert abs(share - kernel) <= tolerance, (share, kernel, samples, tolerance)
