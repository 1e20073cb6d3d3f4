"""The notes (meta.warnings) of an attach profile that follow from what the helper
said: its stream header's flags, its buffers, its drops, the rate it reached.

Each function returns whole lines; none reads the stream itself (collector.py does).
"""

from __future__ import annotations

import os

from proftui.collectors.attach import checks as attach_checks
from proftui.collectors.runtime.wire_attach import (
    FLAG_CFI,
    FLAG_KERNEL_TIME,
    FLAG_TARGET_TIMER,
    Buffers,
)
from proftui.collectors.wording import count, verb

MAX_FRAMES = 127  # frames the helper keeps per sample (PT_ATTACH_MAX_FRAMES, pt_attach.h)

def buffer_text(buffers: Buffers | None) -> str:
    """", perf rings 2 x 512 KiB" for the attach note (nothing under ptrace)."""
    if buffers is None or not buffers.ring_bytes:
        return ""
    return f", perf rings {buffers.rings} x {buffers.ring_bytes >> 10} KiB"


def buffer_warnings(buffers: Buffers | None) -> list[str]:
    """What became of --buffer: ignored under ptrace, or cut down by the kernel."""
    if buffers is None or not buffers.asked_bytes:
        return []
    asked_kib = buffers.asked_bytes >> 10
    if not buffers.ring_bytes:
        return [f"--buffer has no effect with the ptrace method: samples are taken "
                f"synchronously, with no kernel ring to size ({asked_kib:,} KiB asked)"]
    got = buffers.ring_bytes * max(1, buffers.rings)
    if 2 * got >= buffers.asked_bytes:  # rounded down to a power of two per CPU
        return []
    try:
        with open("/proc/sys/kernel/perf_event_mlock_kb") as f:
            limit = f"kernel.perf_event_mlock_kb={f.read().strip()}"
    except OSError:
        limit = "kernel.perf_event_mlock_kb"
    return [f"--buffer asked {asked_kib:,} KiB of perf ring buffers; the kernel let the helper "
            f"lock {got >> 10:,} KiB ({limit} per CPU for users without CAP_IPC_LOCK, beyond "
            "it RLIMIT_MEMLOCK): raise either for bigger rings"]


def cut_warnings(cut: int, samples: int, unreadable: int = 0) -> list[str]:
    """How many stacks lack their outer frames (`unreadable` of them because the
    stack's memory could not be read at the sample), and where they are in the tree."""
    if not cut:
        return []
    out = [f"{cut:,} of {count(samples, 'sample')} ({100 * cut / samples:.1f}%) "
           f"{verb(cut, 'has an incomplete stack', 'have incomplete stacks')} (no unwind "
           f"rule or frame pointer past some frame, or more than {MAX_FRAMES} frames): "
           f"{verb(cut, 'it starts', 'they start')} at a [stack cut...] or [deeper than...] "
           "root"]
    if unreadable:
        out.append(f"{unreadable:,} of them ({100 * unreadable / samples:.1f}%) came without "
                   "their stack: its memory could not be read when the sample was taken (a "
                   "page being migrated, swapped out or protected), so only the frames the "
                   "frame-pointer chain reached are known; they start at a [stack "
                   "unreadable...] root")
    return out


def stream_warnings(method: str, flags: int) -> list[str]:
    """What the stream header's flags mean for the user."""
    out = []
    if flags & FLAG_CFI:
        copied = ("the user stack each sample copies (8 KiB, grown as deeper stacks are seen, up "
                  "to 64 KiB; past it, the live stack while the frame at the seam is unchanged)"
                  if method == "perf" else
                  "the 8 KiB of user stack each sample copies (past it, the live stack while "
                  "the frame at the seam is unchanged)" if method == "system" else
                  "as much stack as each walk needs (read while the thread is stopped)")
        out.append(f"stacks unwound with DWARF CFI (.eh_frame) over {copied}, frame pointers "
                   "beyond that")
    elif os.environ.get("PROFTUI_ATTACH_UNWIND") == "fp":
        out.append("stacks unwound through frame pointers only (PROFTUI_ATTACH_UNWIND=fp)")
    # Otherwise the helper said why in a WARN record (PT_ARCH_UNWIND_NOTE).
    if not flags & FLAG_KERNEL_TIME:
        out.append(f"user time only: {attach_checks.kernel_time_denied_reason()}; time spent in "
                   "system calls is not sampled")
    return out


def clock_notes(method: str, flags: int) -> list[str]:
    """What the ptrace method's clock does to blocking system calls, and what to use
    instead (docs/attach-stream.md has the measurements)."""
    if method != "ptrace":
        return []
    if flags & FLAG_TARGET_TIMER:
        how = ("the target's CPU timer (ITIMER_PROF) that picks ptrace's samples is checked "
               "only at the kernel's ticks")
        off = "3-34"
    else:
        how = "ptrace's samples are taken where the helper finds the threads when it looks"
        off = "15-65"
    return [f"ptrace: blocking system calls are under-counted: {how}, so CPU time in "
            "system calls that sleep and wake often (epoll_wait, poll, futex, socket reads "
            "and writes) gets too few samples and the code around them too many (on servers "
            f"measured, shares {off} points off perf's); "
            f"{attach_checks.perf_permission_note()}"]


def lost_warnings(lost: int, lost_table: int, buffers: Buffers | None) -> list[str]:
    """Each dropped sample named once, where it was lost and what helps: `lost` in all,
    `lost_table` of them because the helper's stack table was full, the rest in the
    kernel's perf rings."""
    out = []
    ring = lost - lost_table
    if ring:
        size = (f" ({buffers.ring_bytes >> 10} KiB per CPU)"
                if buffers is not None and buffers.ring_bytes else "")
        out.append(f"{count(ring, 'sample')} {verb(ring, 'was', 'were')} lost in the kernel's "
                   f"perf ring buffers{size}: "
                   "they filled before the attach helper emptied them (a busy machine "
                   "delays it); --buffer MB sets their total size")
    if lost_table:
        out.append(f"{count(lost_table, 'sample')} {verb(lost_table, 'was', 'were')} "
                   "dropped because the attach "
                   "helper's stack table was full (millions of distinct stacks); "
                   "--buffer does not change this")
    return out


def rate_warnings(method: str, period_ns: int | None, flags: int, samples: float,
                  cpu_s: float) -> list[str]:
    """ptrace falls behind the asked rate on busy targets: say so, with the rate
    achieved per second of sampled CPU time."""
    if method != "ptrace" or not period_ns:
        return []
    asked = 1e9 / period_ns
    if cpu_s < 0.2 or samples / cpu_s >= 0.8 * asked:
        return []
    why = ("the target's CPU timer (ITIMER_PROF) is checked once per kernel tick, so a "
           "sample can stand for a whole tick" if flags & FLAG_TARGET_TIMER
           else "it falls behind on busy threads (each sample stops a thread)")
    return [f"ptrace sampled {samples / cpu_s:.0f} times per second of CPU time, not the "
            f"{asked:.0f} asked: {why}; samples are weighted by the CPU time they stand "
            "for; --method perf keeps the rate where allowed"]
