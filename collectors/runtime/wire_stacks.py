"""Decoder of a runtime file's stack table (csrc/common/proftui_wire_stacks.h,
docs/wire-format.md "Stack table"; written by csrc/common/pt_stacktab.c).

Each distinct (thread, call stack) is one entry, stored once, with counters
the runtime increments in place.  `StackTableReader.new_stacks()` returns the
entries published since the last call (each read once); `counts()` reads every
entry's counters (the exact totals, whatever the rings dropped).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire import RuntimeFile

# index_offset, index_capacity, entry_size, entries_offset, entries_capacity,
# entry_count, frames_offset, frames_capacity, frames_used, dropped
STACKTAB_HEADER = struct.Struct("<QIIQIIQQQQ")
# hash, frames_at, next, tid, nframes, flags, reserved, samples, periods
STACK_ENTRY = struct.Struct("<QQIIHHIQQ")
assert STACKTAB_HEADER.size == 64 and STACK_ENTRY.size == 48
ENTRY_WORDS = STACK_ENTRY.size // 8
ENTRY_COUNT_OFFSET = 28  # within the table header
DROPPED_OFFSET = 56
STACK_READY = 1 << 15
STACK_NONE = 0xFFFFFFFF  # a record's id when the stack found no room
MAX_FRAMES = 128
MAX_READ = 8 << 20  # bytes of entries read at once
GAP = 64  # counts_of: entries apart that one read still covers
RUN = MAX_READ // 48  # entries in one read at most
# The table's fixed capacities (PT_STACKTAB_*), which size the runtime's file.
INDEX_CAPACITY = 1 << 18
ENTRIES_CAPACITY = 1 << 22
FRAMES_CAPACITY = 1 << 27


def stacktab_size() -> int:
    """Bytes a stack table takes in a runtime file (pt_stacktab_size)."""
    return (STACKTAB_HEADER.size + 4 * INDEX_CAPACITY + STACK_ENTRY.size * ENTRIES_CAPACITY
            + 8 * FRAMES_CAPACITY)


@dataclass(frozen=True, slots=True, eq=False)
class RawStack:
    """One (thread, stack) entry: addresses innermost first (array('Q'): 8 bytes a frame,
    where a tuple of ints took 40; a table's new stacks can be many thousands of 128
    frames), PT_SREC_* flags."""

    id: int
    tid: int
    flags: int
    ips: array


@dataclass(frozen=True)
class StackTableHeader:
    """Where the table's parts are (file offsets) and how full it is."""

    index_offset: int
    index_capacity: int
    entry_size: int
    entries_offset: int
    entries_capacity: int
    entry_count: int
    frames_offset: int
    frames_capacity: int
    frames_used: int
    dropped: int


class StackTableReader:
    """Reads one runtime file's stack table at file offset `offset`, incrementally."""

    def __init__(self, file: RuntimeFile, offset: int, name: str) -> None:
        self.file = file
        self.offset = offset
        self.name = name
        self.header = self._read_header()
        self._seen = 0  # entries [0, _seen) were returned or are pending
        self._pending: list[int] = []  # claimed ids not READY when last looked at

    def _read_header(self) -> StackTableHeader:
        try:
            header = StackTableHeader(*STACKTAB_HEADER.unpack(
                self.file.read(self.offset, STACKTAB_HEADER.size)))
        except struct.error:
            raise ProftuiError(f"{self.name}: truncated stack table header") from None
        end = header.frames_offset + 8 * header.frames_capacity
        if (header.entry_size != STACK_ENTRY.size or header.index_capacity == 0
                or header.entries_offset < header.index_offset
                or header.frames_offset < header.entries_offset
                + header.entries_capacity * STACK_ENTRY.size
                or end > self.file.size):
            raise ProftuiError(f"{self.name}: corrupt stack table header")
        return header

    def entry_count(self) -> int:
        """Entries claimed so far (the last ones may not be READY yet).  The table's
        layout never changes once made: a header whose layout differs from the one
        read first was overwritten (by the target), and its counts mean nothing, so
        ProftuiError (reading millions of entries that a junk count names would take
        the reader minutes)."""
        now = StackTableHeader(*STACKTAB_HEADER.unpack(
            self.file.read(self.offset, STACKTAB_HEADER.size)))
        h = self.header
        if (now.index_offset, now.index_capacity, now.entry_size, now.entries_offset,
                now.entries_capacity, now.frames_offset, now.frames_capacity) != (
                h.index_offset, h.index_capacity, h.entry_size, h.entries_offset,
                h.entries_capacity, h.frames_offset, h.frames_capacity):
            raise ProftuiError(f"{self.name}: stack table header overwritten (by the target)")
        return min(now.entry_count, h.entries_capacity)

    def dropped(self) -> int:
        """Samples whose stack found no room in the table."""
        return struct.unpack("<Q", self.file.read(self.offset + DROPPED_OFFSET, 8))[0]

    def new_stacks(self) -> list[RawStack]:
        """Entries published since the last call (READY ones; the others are looked at
        again next time)."""
        count = self.entry_count()
        ids = self._pending + list(range(self._seen, count))
        self._pending = []
        self._seen = max(self._seen, count)
        if not ids:
            return []
        out: list[RawStack] = []
        # Runs of consecutive ids are read at once (their frames too).
        run_start = 0
        while run_start < len(ids):
            run_end = run_start + 1
            limit = MAX_READ // STACK_ENTRY.size
            while (run_end < len(ids) and ids[run_end] == ids[run_end - 1] + 1
                   and run_end - run_start < limit):
                run_end += 1
            out.extend(self._read_run(ids[run_start], ids[run_end - 1] + 1))
            run_start = run_end
        return out

    def _read_run(self, first: int, end: int) -> list[RawStack]:
        h = self.header
        raw = self.file.read(h.entries_offset + first * STACK_ENTRY.size,
                             (end - first) * STACK_ENTRY.size)
        rows = []
        lo, hi = None, 0
        for i, (_hash, at, _next, tid, n, flags, _r, _s, _p) in enumerate(
                STACK_ENTRY.iter_unpack(raw)):
            if not flags & STACK_READY:
                self._pending.append(first + i)
                continue
            if not 0 < n <= MAX_FRAMES or at + n > h.frames_capacity:
                continue  # corrupt: never referenced by a sound record either
            rows.append((first + i, tid, flags & ~STACK_READY, at, n))
            lo = at if lo is None else min(lo, at)
            hi = max(hi, at + n)
        if lo is None:
            return []
        words = array("Q")
        words.frombytes(self.file.read(h.frames_offset + 8 * lo, 8 * (hi - lo)))
        return [RawStack(sid, tid, flags, words[at - lo:at - lo + n])
                for sid, tid, flags, at, n in rows]

    def counts_of(self, ids: list[int]) -> list[tuple[int, int, int]]:
        """(id, samples, periods) of each of `ids` (sorted, below `entry_count()`), read
        in runs: ids closer than GAP entries share one read."""
        out: list[tuple[int, int, int]] = []
        h = self.header
        i = 0
        while i < len(ids):
            j = i + 1
            while j < len(ids) and ids[j] - ids[j - 1] <= GAP and ids[j] - ids[i] < RUN:
                j += 1
            first, last = ids[i], ids[j - 1]
            words = array("Q")
            words.frombytes(self.file.read(h.entries_offset + first * STACK_ENTRY.size,
                                           (last + 1 - first) * STACK_ENTRY.size))
            for sid in ids[i:j]:
                at = (sid - first) * ENTRY_WORDS
                out.append((sid, words[at + 4], words[at + 5]))
            i = j
        return out

    def counts(self) -> tuple[array, array]:
        """(samples, periods) of every entry id below `entry_count()` (zeros for entries
        not READY), read in one pass: the table's exact totals."""
        count = self.entry_count()
        words = array("Q")
        h = self.header
        for first in range(0, count, MAX_READ // STACK_ENTRY.size):
            end = min(count, first + MAX_READ // STACK_ENTRY.size)
            words.frombytes(self.file.read(h.entries_offset + first * STACK_ENTRY.size,
                                           (end - first) * STACK_ENTRY.size))
        return words[4::ENTRY_WORDS], words[5::ENTRY_WORDS]
