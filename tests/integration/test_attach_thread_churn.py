"""ptrace attach to targets that start many threads (issue 32, item 9).

What went wrong, each in several of a dozen attaches: the helper ran its system calls
(the CPU timer's setitimer, rt_sigaction) in a thread stopped inside clone(), whose
result then replaced the call's number and whose single-step trap was handed to the
target (killed by SIGTRAP); a thread starting threads was taken for one that runs with
SIGPROF blocked, the timer was removed and SIGPROF's default action put back while a
thread had already taken the timer's last signal, which was then passed on (killed by
SIGPROF, "Profiling timer expired"); and a thread that exited while the helper attached
was reported before the stream's header ("attach helper stream: bad magic", no
profile).  Each test attaches several times: the target must end as it would have,
and every attach must keep a profile with the target's exit status.
"""

from __future__ import annotations

import subprocess
import time

from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import attach
from tests.helpers.costs import self_costs
from tests.helpers.targets import ReadyTarget

FLAGS = ["-O2", "-g", "-pthread"]
# Before the fix, 3-4 of 12 spawn attaches harmed the target and every churn attach
# lost its profile: 6 and 2 attaches fail then with a chance above 0.99.
SPAWN_ATTACHES = 6
SPAWN_ROUNDS = 2  # of 200 threads each, as in the issue
# An attach that detaches 0.1 s into the spawning needs spawning left to detach from:
# beside two busy loops, 2 rounds once ended first (the profile rightly said "exited").
DETACH_ROUNDS = 12
CHURN_ATTACHES = 2


def churn_target(mode: str, *args: str) -> ReadyTarget:
    return ReadyTarget([build_fixture("att_churn.c", FLAGS), mode, *args],
                       stdin=subprocess.PIPE)


def say(target: ReadyTarget, line: str) -> None:
    assert target.proc.stdin is not None
    target.proc.stdin.write(line + "\n")
    target.proc.stdin.flush()


def target_wrong(status: int, out: str, expected: str | None) -> list[str]:
    """What the target shows of harm: its status and output."""
    if status != 0 or not out.endswith("\n") or not out.splitlines()[-1].startswith(
            "churn done threads="):
        return [f"target ended with status {status}, output {out!r}"]
    if expected is not None and out != expected:
        return [f"target output {out!r}, not {expected!r}"]
    return []


def profile_wrong(profile: Profile, exited: bool) -> list[str]:
    """What is wrong with one attach's profile (`exited`: the target exited, status 0,
    while attached)."""
    wrong = []
    said = any("target exited" in w for w in profile.meta.warnings)
    if said != exited:
        wrong.append(f"the profile {'does not say' if exited else 'says'} the target "
                     f"exited: {profile.meta.warnings}")
    if profile.meta.exit_status != (0 if exited else None):
        wrong.append(f"meta.exit_status {profile.meta.exit_status}")
    broken = [w for w in profile.meta.warnings if "attach helper" in w]
    if broken:
        wrong.append(f"helper trouble: {broken}")
    if profile.total(0) <= 0:
        wrong.append("no samples")
    return wrong


def test_attach_to_a_target_that_starts_hundreds_of_threads() -> None:
    """Attached while it burns, the target then starts and joins 200 threads, round
    after round.  Every other attach detaches while threads are being started (the
    timer is removed through a thread that is starting one); the others stay to the
    target's exit."""
    wrong: list[str] = []
    for attempt in range(SPAWN_ATTACHES):
        to_the_end = attempt % 2 == 0
        rounds = SPAWN_ROUNDS if to_the_end else DETACH_ROUNDS
        with churn_target("spawn", "0.2", str(rounds)) as target:
            collector = attach(target.pid, "ptrace", frequency_hz=1000, duration_s=30)
            say(target, "go")
            assert target.proc.stdout is not None
            assert target.proc.stdout.readline() == "spawning\n"
            if not to_the_end:
                time.sleep(0.1)  # a few rounds of pthread_create under the attach
                collector.detach()
            profile = collector.wait()
            collector.stop()
            out, status = target.finish(timeout=30)
        problems = target_wrong(status, out, f"churn done threads={200 * rounds}\n")
        problems += profile_wrong(profile, to_the_end)
        wrong += [f"attach {attempt}: {p}" for p in problems]
    assert not wrong, "\n".join(wrong)


def test_attach_while_threads_come_and_go() -> None:
    """Attached while threads start and exit all the time (some exit while the helper
    seizes the others): the stream is whole, the profile kept, the target unharmed."""
    wrong: list[str] = []
    for attempt in range(CHURN_ATTACHES):
        with churn_target("churn", "20") as target:
            collector = attach(target.pid, "ptrace", frequency_hz=1000, duration_s=30)
            # Churn on under the attach for a while (work, not synchronisation): at
            # least 0.5 s and until the churning threads' own function was sampled
            # (beside two busy loops, 0.5 s once gave the target too little CPU for
            # a sample; a full suite beside them once stopped at the main thread's
            # first, in its join), at most 20 s.
            began = time.monotonic()
            time.sleep(0.5)
            while "att_ch_work" not in self_costs(collector.snapshot()) \
                    and time.monotonic() - began < 20:
                time.sleep(0.2)
            say(target, "stop")
            profile = collector.wait()
            collector.stop()
            out, status = target.finish(timeout=30)
        problems = target_wrong(status, out, None) + profile_wrong(profile, True)
        if not problems and "att_ch_work" not in self_costs(profile):
            problems.append(f"att_ch_work not sampled: {sorted(self_costs(profile))}")
        wrong += [f"attach {attempt}: {p}" for p in problems]
    assert not wrong, "\n".join(wrong)
