"""The key a stack of the attach stream is known by, in `--pid`'s table and the agent's."""

from __future__ import annotations

from proftui.collectors.runtime.wire_attach import (
    SAMPLE_DEPTH,
    SAMPLE_NO_STACK,
    SAMPLE_TRUNCATED,
    Stack,
)
from proftui.collectors.symbols.stacks import STACK_CUT, STACK_TOO_DEEP, STACK_UNREADABLE

StackKey = tuple[int, tuple[int, ...]]  # (tid, addresses innermost first)


def stack_key(tid: int, record: Stack) -> StackKey:
    """(tid, addresses): a stack without its outer frames ends in a pseudo-address, so
    it hangs under a root that says why instead of at whatever address it reached."""
    if record.flags & SAMPLE_TRUNCATED:
        why = STACK_UNREADABLE if record.flags & SAMPLE_NO_STACK else STACK_CUT
        return tid, (*record.ips, why)
    if record.flags & SAMPLE_DEPTH:
        return tid, (*record.ips, STACK_TOO_DEEP)
    return tid, record.ips
