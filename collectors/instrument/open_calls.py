"""Own time of calls that have not returned yet, read from the target's shadow stacks.

The hook runtime adds a call's time to its node when the call returns, so a
live view would show nothing for main's own loop, or for a function that has
been computing for a minute.  Each thread's open calls are on its shadow stack
in the target's private memory; the thread table gives its address
(`pt_hook_live`, docs/wire-format.md "Calls still open"; their layouts are
wire_hook.LIVE and OPEN_ENTRY, beside the file's).  This reads them
through /proc/<pid>/mem (the target is our child, so ptrace rules allow it),
racing the running thread: an entry that does not make sense (no function, a
node not published yet, older than the file) is skipped for this refresh.  Used for live
views only; a finished call's time comes from its node as before.
"""

from __future__ import annotations

import struct
import time
from collections import defaultdict
from typing import BinaryIO

from proftui.collectors.runtime.wire_hook import LIVE, OPEN_ENTRY, OPEN_UNRECORDED, HookData

MAX_ENTRIES = 4096  # deepest open calls read per thread (a 100,000-deep recursion: the top)


class OpenCallsUnreadable(Exception):
    """The target's memory cannot be read (ptrace rules): the message says why."""


def open_self_ticks(data: HookData, now_ns: int | None = None) -> dict[int, float]:
    """Global node index -> own ticks of its calls still open, over the file's live threads.

    Empty when the process is gone or the file is count-only; OpenCallsUnreadable
    when the kernel refuses to let us read it.  Ticks are the runtime's (see
    `HookHeader.ns_per_tick`).
    """
    hook = data.hook
    if hook.ns_per_tick <= 0:
        return {}
    now_ns = time.monotonic_ns() if now_ns is None else now_ns
    now = hook.tick_start + (now_ns - hook.mono_start_ns) / hook.ns_per_tick
    published = set(data.nodes.index)
    out: dict[int, float] = defaultdict(float)
    path = f"/proc/{data.header.pid}/mem"
    try:
        mem = open(path, "rb", buffering=0)  # noqa: SIM115
    except PermissionError as exc:
        raise OpenCallsUnreadable(f"{path}: {exc.strerror}") from None
    except OSError:
        return {}
    with mem:
        for thread in data.threads.values():
            if thread.exited or not thread.live:
                continue
            try:
                _walk(mem, thread.live, now, hook.tick_start, published, out)
            except (OSError, ValueError, struct.error):
                continue  # unmapped (the thread just ended) or torn: no live time for it
    return dict(out)


def _walk(mem: BinaryIO, live: int, now: float, start: int, published: set[int],
          out: dict[int, float]) -> None:
    """Add one thread's open calls' own ticks to `out`."""
    _guard, depth, cap, stack, setup = LIVE.unpack(_read(mem, live, LIVE.size))
    if not 0 < depth < cap:
        return
    count = min(depth, MAX_ENTRIES)
    first = depth - count + 1
    raw = _read(mem, stack + first * OPEN_ENTRY.size, count * OPEN_ENTRY.size)
    # The hooks publish a new top entry's depth before its fields (a signal handler
    # may nest any time): a read in between pairs the new depth with the last call's
    # timestamp at that index, seconds old.  A top entry that changed while we read
    # is a call that churns (it returns within microseconds): leave it to its caller.
    # One still there with the same call (its `child` grows as its callees return)
    # stands.
    pushed = _pushed_fields(raw[-OPEN_ENTRY.size:])
    again = LIVE.unpack(_read(mem, live, LIVE.size))[1]
    top = depth
    if again < depth or _pushed_fields(_read(mem, stack + depth * OPEN_ENTRY.size,
                                             OPEN_ENTRY.size)) != pushed:
        top = depth - 1
    now_thread = now - setup
    longest = now - start  # no call is older than the file
    pending: dict[int, float] = defaultdict(float)  # entry index -> open callees' time
    for index in range(top, first - 1, -1):
        at = (index - first) * OPEN_ENTRY.size
        fn, ts, child, up, anode, flags = OPEN_ENTRY.unpack_from(raw, at)
        elapsed = max(0.0, now_thread - ts)  # entered after `now` was taken: just begun
        if not fn or elapsed > longest or up >= index:
            continue  # being rewritten by the running thread: skipped this time
        if flags & OPEN_UNRECORDED:
            continue  # its time is its recorded caller's own, counted there
        own = elapsed - child - pending.pop(index, 0.0)
        if own > 0 and anode in published:
            out[anode] += own
        pending[up] += elapsed


def _pushed_fields(entry: bytes) -> tuple[int, int, int, int]:
    """fn, ts, up, anode: what a push writes and nothing changes until the call ends."""
    fn, ts, _child, up, anode, _flags = OPEN_ENTRY.unpack(entry)
    return fn, ts, up, anode


def _read(mem: BinaryIO, address: int, size: int) -> bytes:
    mem.seek(address)
    data = mem.read(size)
    if len(data) != size:
        raise ValueError("short read")
    return data
