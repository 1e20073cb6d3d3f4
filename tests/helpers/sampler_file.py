"""A Python twin of the sampler runtime's writer (csrc/sampler/pt_sampler_file.c,
pt_sampler_handler.c, csrc/common/pt_stacktab.c): exact bytes for the decoder's tests.

The file is sparse, as the runtime's is: the stack table's capacity is a gigabyte of
holes, so only what is written takes space."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from proftui.collectors.runtime.wire import KIND_SAMPLER, FileHeader, encode_header
from proftui.collectors.runtime.wire_maplog import MAP_ENTRY, MAP_LOAD, MAPLOG_ENTRIES
from proftui.collectors.runtime.wire_sampler import NSLOTS, SAMPLER_HEADER, SLOT, SLOTS_OFFSET
from proftui.collectors.runtime.wire_stacks import (
    ENTRIES_CAPACITY,
    FRAMES_CAPACITY,
    INDEX_CAPACITY,
    STACK_ENTRY,
    STACK_READY,
    STACKTAB_HEADER,
    stacktab_size,
)


class SamplerWriter:
    """Writes a sampler file like the runtime: headers, slots, stacks, records, map log."""

    def __init__(self, path: Path, ring_words: int = 16, period_ns: int = 1_000_000,
                 pid: int = 42) -> None:
        self.path = path
        self.ring_words = ring_words
        self.slot_size = SLOT.size + 8 * ring_words
        self.maplog = SLOTS_OFFSET + NSLOTS * self.slot_size
        self.stacks = self.maplog + MAPLOG_ENTRIES * MAP_ENTRY.size
        self.size = self.stacks + stacktab_size()
        self.index = self.stacks + STACKTAB_HEADER.size
        self.entries = self.index + 4 * INDEX_CAPACITY
        self.frames = self.entries + STACK_ENTRY.size * ENTRIES_CAPACITY
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.ftruncate(self.fd, self.size)
        self.put(0, encode_header(FileHeader(KIND_SAMPLER, pid, 1, 0, 0, period_ns, 128,
                                             self.size, 0, 0, 0, "perf task-clock")))
        self.put(128, SAMPLER_HEADER.pack(27, 1, NSLOTS, ring_words, SLOTS_OFFSET,
                                          self.slot_size, self.maplog, MAPLOG_ENTRIES, 0, 0,
                                          period_ns, 5_000, self.stacks, 0))
        self.heads = [0] * NSLOTS
        self.ids: dict[tuple[int, int, tuple[int, ...]], int] = {}
        self.counts: list[list[int]] = []
        self.frames_used = 0
        self._table_header()

    def put(self, offset: int, data: bytes) -> None:
        os.pwrite(self.fd, data, offset)

    def _table_header(self, dropped: int = 0) -> None:
        self.put(self.stacks, STACKTAB_HEADER.pack(
            self.index, INDEX_CAPACITY, STACK_ENTRY.size, self.entries, ENTRIES_CAPACITY,
            len(self.counts), self.frames, FRAMES_CAPACITY, self.frames_used, dropped))

    def slot(self, i: int, tid: int, state: int = 1, gen: int = 1, name: bytes = b"") -> None:
        """Slot `i` as thread `tid` (state 2: it exited, named `name`)."""
        self.put(SLOTS_OFFSET + i * self.slot_size,
                 SLOT.pack(state, tid, self.heads[i], 0, 0, 0, 0, gen, name))

    def stack_id(self, tid: int, ips: list[int], flags: int = 0, ready: bool = True) -> int:
        """The entry of (tid, flags, ips), written on first use (READY unless told)."""
        key = (tid, flags, tuple(ips))
        sid = self.ids.get(key)
        if sid is None:
            sid = self.ids[key] = len(self.counts)
            self.counts.append([0, 0])
            self.put(self.frames + 8 * self.frames_used, struct.pack(f"<{len(ips)}Q", *ips))
            self._entry(sid, tid, flags | (STACK_READY if ready else 0), self.frames_used,
                        len(ips))
            self.frames_used += len(ips)
            self._table_header()
        return sid

    def _entry(self, sid: int, tid: int, flags: int, at: int, n: int) -> None:
        samples, periods = self.counts[sid]
        self.put(self.entries + sid * STACK_ENTRY.size,
                 STACK_ENTRY.pack(0, at, 0, tid, n, flags, 0, samples, periods))

    def sample(self, i: int, tid: int, ips: list[int], weight: int = 1, flags: int = 0,
               time_ns: int = 0, ring: bool = True) -> int:
        """Count one sample in the table and (unless `ring` is False: a full ring) note
        it in slot `i`'s ring, as the handler does.  Returns its stack id."""
        sid = self.stack_id(tid, ips, flags)
        self.counts[sid][0] += 1
        self.counts[sid][1] += weight
        n, p = self.counts[sid]
        self.put(self.entries + sid * STACK_ENTRY.size + 32, struct.pack("<QQ", n, p))
        if ring:
            self.record(i, sid, weight, time_ns)
        return sid

    def record(self, i: int, sid: int, weight: int = 1, time_ns: int = 0) -> None:
        base = SLOTS_OFFSET + i * self.slot_size
        tail = struct.unpack("<Q", os.pread(self.fd, 8, base + 16))[0]
        head = self.heads[i]
        assert self.ring_words - (head - tail) >= 2, "the runtime would drop this record"
        for k, word in enumerate([sid | weight << 32, time_ns]):
            self.put(base + SLOT.size + 8 * ((head + k) % self.ring_words),
                     struct.pack("<Q", word))
        self.heads[i] = head + 2
        self.put(base + 8, struct.pack("<Q", self.heads[i]))

    def ring_lost(self, count: int) -> None:
        self.put(128 + 80, struct.pack("<Q", count))

    def mapping(self, n: int, path: str) -> None:
        self.put(self.maplog + n * MAP_ENTRY.size, MAP_ENTRY.pack(
            0x1000, 0x2000, 0, 0, MAP_LOAD, 3, b"\xab\xcd\xef", path.encode()))
        self.put(128 + 44, struct.pack("<I", n + 1))

    def close(self) -> None:
        os.close(self.fd)
