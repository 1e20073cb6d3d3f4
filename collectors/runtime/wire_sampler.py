"""Decoder of the sampler's runtime files (csrc/sampler/proftui_wire_sampler.h,
docs/wire-format.md).

The runtime (LD_PRELOADed csrc/sampler/proftui_sampler.c) writes one file per process:
the common header, a sampler header, one ring per thread slot, the log of the
executable mappings it saw and the stack table (wire_stacks.py) in which every
sample is counted.  A ring record says which stack a sample hit and when.
`SamplerFile.drain()` reads what the rings hold while the target keeps writing:
it reads `head`, copies the records up to it, checks the slot was not reused
meanwhile (`gen`), then stores `tail` so the runtime can reuse the space.
"""

from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.thread_names import printable_name
from proftui.collectors.runtime.wire import (
    HEADER_SIZE,
    KIND_SAMPLER,
    FileHeader,
    RuntimeFile,
    WireVersionError,
)
from proftui.collectors.runtime.wire_maplog import (
    MAP_ENTRY,
    MAPLOG_ENTRIES,
    MapEntry,
    MapLogReader,
)
from proftui.collectors.runtime.wire_stacks import (
    STACKTAB_HEADER,
    RawStack,
    StackTableReader,
    stacktab_size,
)

# signal, sflags, nslots, ring_words, slots_offset, slot_size, maplog_offset,
# maplog_capacity, maplog_count, threads_lost, requested_ns, start_mono_ns,
# stacks_offset, ring_lost
SAMPLER_HEADER = struct.Struct("<IIIIQQQIIQQQQQ40x")
# state, tid, head, tail, samples, dropped, cpu_ns, gen, comm (the name at exit)
SLOT = struct.Struct("<IIQQQQQI12x16s")
assert SAMPLER_HEADER.size == 128 and SLOT.size == 80

SMP_PERF, SMP_TIMER, SMP_SIGNAL_MOVED, SMP_CFI, SMP_FOLLOW, SMP_USER_ONLY = (
    1 << i for i in range(6))
SLOT_FREE, SLOT_ACTIVE, SLOT_EXITED = 0, 1, 2
SREC_TRUNCATED, SREC_OFFSTACK, SREC_DEPTH, SREC_UNREADABLE = 1, 2, 4, 8
RECORD_WORDS = 2  # PT_SAMPLER_RECORD_WORDS: (stack id | weight << 32), time in ns
# The runtime's fixed layout (proftui_wire_sampler.h), from which headers the target
# overwrote are rebuilt (SamplerFile(..., salvage_period_ns=...)).
SLOTS_OFFSET = 256  # PT_SAMPLER_SLOTS_OFFSET
NSLOTS = 128  # PT_SAMPLER_NSLOTS
FILE_NAME = re.compile(r"sampler\.(\d+)(?:\.\d+)?\.ptw")
TAIL_OFFSET = 16  # within a slot
MAPLOG_COUNT_OFFSET = 44  # within the sampler header
RING_LOST_OFFSET = 80


@dataclass(frozen=True)
class SamplerHeader:
    """The sampler area's fixed header (offsets in bytes, periods in ns)."""

    signal: int
    sflags: int
    nslots: int
    ring_words: int
    slots_offset: int
    slot_size: int
    maplog_offset: int
    maplog_capacity: int
    maplog_count: int
    threads_lost: int
    requested_ns: int
    start_mono_ns: int
    stacks_offset: int
    ring_lost: int


@dataclass(frozen=True)
class SlotInfo:
    """One thread slot's counters (cpu_ns is set when the thread exited)."""

    index: int
    state: int
    tid: int
    samples: int
    dropped: int
    cpu_ns: int


@dataclass(frozen=True, slots=True)
class Records:
    """One slot's ring records drained at once: per sample its stack id, weight
    (periods) and CLOCK_MONOTONIC time in ns, index-aligned."""

    tid: int
    ids: array
    weights: array
    times: array
    name: str = ""  # the thread's name when it exited ("" while it runs)


def decode_sampler_header(data: bytes, header: FileHeader, name: str) -> SamplerHeader:
    """Decode and bound-check the sampler header (`data`: its 64 bytes at
    body_offset); ProftuiError when corrupt."""
    try:
        smp = SamplerHeader(*SAMPLER_HEADER.unpack_from(data, 0))
    except struct.error:
        raise ProftuiError(f"{name}: truncated sampler header") from None
    ring = smp.ring_words
    if (ring == 0 or ring & (ring - 1) or smp.slot_size != SLOT.size + 8 * ring
            or smp.slots_offset < HEADER_SIZE + SAMPLER_HEADER.size
            or smp.slots_offset + smp.nslots * smp.slot_size > smp.maplog_offset
            or smp.maplog_offset + smp.maplog_capacity * MAP_ENTRY.size > smp.stacks_offset
            or smp.stacks_offset + STACKTAB_HEADER.size > header.file_size):
        raise ProftuiError(f"{name}: corrupt sampler header")
    return smp


def decode_records(words: array, tid: int, name: str = "") -> Records:
    """The records in a copied run of ring words (an odd word at the end is ignored)."""
    n = len(words) // RECORD_WORDS
    first = words[0:2 * n:2]
    ids = array("Q", (w & 0xFFFFFFFF for w in first))
    weights = array("Q", (w >> 32 or 1 for w in first))
    return Records(tid, ids, weights, words[1:2 * n:2], name)


class SamplerFile:
    """One process's sampler file, read with pread; drain it repeatedly while the target runs."""

    def __init__(self, path: Path, salvage_period_ns: int | None = None) -> None:
        """Map `path`; with `salvage_period_ns`, headers that do not validate (the
        target overwrote them) are rebuilt from the runtime's fixed layout and the
        file's size, with that period, and `salvaged` says why."""
        self.path = path
        self.file = RuntimeFile(path)
        self.salvaged = ""
        try:
            try:
                self.header = self.file.header(KIND_SAMPLER)
                self.sampler = self._read_sampler_header()
            except ProftuiError as exc:
                if salvage_period_ns is None or isinstance(exc, WireVersionError):
                    raise
                self.header, self.sampler = self._rebuilt(salvage_period_ns, str(exc))
                self.salvaged = str(exc)
            self.stacks = StackTableReader(self.file, self.sampler.stacks_offset,
                                           self.path.name)
        except ProftuiError:
            self.file.close()
            raise
        self.maplog = MapLogReader(self.file, self.header.body_offset + MAPLOG_COUNT_OFFSET,
                                   self.sampler.maplog_offset, self.sampler.maplog_capacity)
        self._named: dict[int, int] = {}  # slot -> gen whose exit name was reported

    def _rebuilt(self, period_ns: int, damage: str) -> tuple[FileHeader, SamplerHeader]:
        """Headers for a file of this size as pt_sampler_file_create lays it out."""
        size = self.file.size
        match = FILE_NAME.fullmatch(self.path.name)
        rings = size - SLOTS_OFFSET - MAPLOG_ENTRIES * MAP_ENTRY.size - stacktab_size()
        slot_size = rings // NSLOTS if rings > 0 else 0
        ring = (slot_size - SLOT.size) // 8
        if (match is None or ring <= 0 or ring & (ring - 1)
                or slot_size * NSLOTS != rings or slot_size != SLOT.size + 8 * ring):
            raise ProftuiError(f"{damage}; its size ({size} bytes) fits no sampler layout: "
                               "nothing can be salvaged")
        header = FileHeader(KIND_SAMPLER, int(match.group(1)), 0, 0, 0, period_ns, HEADER_SIZE,
                            size, 0, 0, 0, "unknown (header overwritten)")
        maplog = SLOTS_OFFSET + rings
        stacks = maplog + MAPLOG_ENTRIES * MAP_ENTRY.size
        return header, SamplerHeader(0, 0, NSLOTS, ring, SLOTS_OFFSET, slot_size, maplog,
                                     MAPLOG_ENTRIES, 0, 0, period_ns, 0, stacks, 0)

    def refresh(self) -> tuple[FileHeader, SamplerHeader]:
        """Re-read both headers (counters, clock and signal change while running)."""
        if self.salvaged:
            return self.header, self.sampler  # the rebuilt layout is all there is
        self.header = self.file.header(KIND_SAMPLER)
        self.sampler = self._read_sampler_header()
        return self.header, self.sampler

    def _read_sampler_header(self) -> SamplerHeader:
        raw = self.file.read(self.header.body_offset, SAMPLER_HEADER.size)
        return decode_sampler_header(raw, self.header, self.path.name)

    def _slot_offset(self, index: int) -> int:
        return self.sampler.slots_offset + index * self.sampler.slot_size

    def slots(self) -> list[SlotInfo]:
        """Counters of every slot ever used."""
        out = []
        for i in range(self.sampler.nslots):
            state, tid, _h, _t, samples, dropped, cpu_ns, _gen, _comm = SLOT.unpack(
                self.file.read(self._slot_offset(i), SLOT.size))
            if state in (SLOT_ACTIVE, SLOT_EXITED):
                out.append(SlotInfo(i, state, tid, samples, dropped, cpu_ns))
        return out

    def ring_lost(self) -> int:
        """Records the rings could not take so far (their samples are in the table);
        0 for a salvaged file, whose header holds the target's bytes."""
        if self.salvaged:
            return 0
        return struct.unpack("<Q", self.file.read(self.header.body_offset + RING_LOST_OFFSET,
                                                  8))[0]

    def new_stacks(self) -> list[RawStack]:
        """Stack table entries published since the last call (wire_stacks.py)."""
        return self.stacks.new_stacks()

    def drain(self) -> list[Records]:
        """Every complete record written since the last drain, per slot."""
        out: list[Records] = []
        read = self.file.read
        ring_words = self.sampler.ring_words
        for i in range(self.sampler.nslots):
            off = self._slot_offset(i)
            state, tid, head, tail, _s, _d, _c, gen, comm = SLOT.unpack(read(off, SLOT.size))
            name = ""
            if state == SLOT_EXITED and comm[:1] != b"\0" and self._named.get(i) != gen:
                self._named[i] = gen  # once per thread: the slot is reused only after this
                name = printable_name(comm.split(b"\0", 1)[0])
            if state not in (SLOT_ACTIVE, SLOT_EXITED) or head == tail:
                if name:
                    out.append(Records(tid, array("Q"), array("Q"), array("Q"), name))
                continue
            if head < tail or head - tail > ring_words:
                continue  # mid-reuse (or corrupt): look again next time
            ring = off + SLOT.size
            first, last = tail % ring_words, head % ring_words
            if first < last:
                raw = read(ring + 8 * first, 8 * (last - first))
            else:  # the records wrap around the end of the ring
                raw = read(ring + 8 * first, 8 * (ring_words - first)) + read(ring, 8 * last)
            if SLOT.unpack(read(off, SLOT.size))[7] != gen:
                continue  # the slot was handed to another thread while we copied
            words = array("Q")
            words.frombytes(raw)
            out.append(decode_records(words, tid, name))
            self.file.write(off + TAIL_OFFSET, struct.pack("<Q", head))
        return out

    def new_mappings(self) -> list[MapEntry]:
        """Map log entries published since the last call."""
        return self.maplog.new()

    def close(self) -> None:
        self.file.close()
