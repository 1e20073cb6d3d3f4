"""What the runtimes' per-thread clocks (csrc/common/pt_timer.c) did, in words.

The sampler and the hook runtime share one clock implementation and describe
it the same way in their headers (clock name, period, signal, PT_TIMER_*
flags); this turns that description into the profile's clock line and notes
for both collectors.
"""

from __future__ import annotations

import signal

MAX_FREQUENCY = 10_000  # the runtime clamps to this too
TIMER_TICK_HZ = 250  # what POSIX CPU timers deliver at most here (kernel tick)

# PT_TIMER_* (csrc/common/pt_timer.h); the sampler's PT_SMP_* and the hook's timer_flags
# carry the same bits.
TIMER_PERF = 1 << 0
TIMER_POSIX = 1 << 1
TIMER_SIGNAL_MOVED = 1 << 2
TIMER_USER_ONLY = 1 << 5


def signal_name(sig: int) -> str:
    """SIGPROF, SIGRTMIN+8, ... for a signal number."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        if signal.SIGRTMIN <= sig <= signal.SIGRTMAX:
            return f"SIGRTMIN+{sig - signal.SIGRTMIN}"
        return f"signal {sig}"


def user_time_only_warning() -> str:
    """Why perf_event counted user time only, and what that hides."""
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = f.read().strip()
    except OSError:
        paranoid = "?"
    return (f"user time only: kernel.perf_event_paranoid={paranoid} lets perf_event count "
            "kernel time only at <= 1 or with CAP_PERFMON (or PROFTUI_SAMPLER_KERNEL=0 was "
            "set); time spent in system calls is not sampled")


def describe_clock(name: str, period_ns: int, sig: int, flags: int,
                   wall: bool) -> tuple[str, list[str]]:
    """The clock line ("perf task-clock, 1000 Hz, signal SIGPROF, user time only") and
    the notes a clock of this description calls for."""
    notes: list[str] = []
    clock = name + (f", {1e9 / period_ns:.0f} Hz" if period_ns else "")
    if sig:
        clock += f", signal {signal_name(sig)}"
    if flags & TIMER_PERF and flags & TIMER_USER_ONLY:
        clock += ", user time only"
        notes.append(user_time_only_warning())
    if flags & TIMER_SIGNAL_MOVED:
        notes.append(f"the target uses SIGPROF itself: proftui sampled with "
                     f"{signal_name(sig)} instead")
    if sig and not flags & TIMER_PERF and not wall:
        rate = 1e9 / period_ns if period_ns else 0
        if rate > TIMER_TICK_HZ:
            notes.append(
                f"perf_event is not available: POSIX CPU timers deliver about "
                f"{TIMER_TICK_HZ} samples/s per thread, not {rate:.0f} (each sample "
                f"is weighted by the periods it stands for)")
    return clock, notes
