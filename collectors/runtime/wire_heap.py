"""Decoder of the heap runtime's files (csrc/heap/proftui_wire_heap.h, docs/wire-format.md).

The runtime (LD_PRELOADed csrc/heap/proftui_heap.c) writes one file per process:
the common header, a heap header with whole-process counters, a table of
buckets (one per allocating call stack, with its counters), the frames of
those stacks and a log of the executable mappings it saw.  `HeapFile.read()`
copies the published buckets with pread while the target keeps counting: each
counter is a word the runtime updates atomically, so a copy is a consistent
value per counter (not a snapshot across counters).
"""

from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire import HEADER_SIZE, KIND_HEAP, FileHeader, RuntimeFile
from proftui.collectors.runtime.wire_maplog import MAP_ENTRY, MapEntry, MapLogReader

# hflags, max_frames, sample_bytes, count_scale, index_offset, index_capacity,
# bucket_capacity, buckets_offset, bucket_size, bucket_count, frames_offset,
# frames_capacity, frames_used, maplog_offset, maplog_capacity, maplog_count,
# live_bytes, peak_bytes, peak_snapshot, peak_time_ns, live_blocks, allocs, frees,
# untracked_frees, ptr_dropped, stack_dropped, boot_bytes, ptr_capacity
HEAP_HEADER = struct.Struct("<IIQQQIIQIIQQQQII12Q16x")
# hash, frames_index, nframes, bflags, alloc_bytes, allocs, live_bytes, live_blocks,
# frees, temporary, peak_bytes, peak_blocks
BUCKET = struct.Struct("<QIHH8Q")
assert HEAP_HEADER.size == 208 and BUCKET.size == 80

HEAP_SAMPLED, HEAP_CFI, HEAP_FOLLOW = 1, 2, 4
BUCKET_READY, BUCKET_TRUNCATED, BUCKET_DEPTH, BUCKET_OVERFLOW = 1, 2, 4, 8
MAX_FRAMES = 64
FILE_NAME = re.compile(r"heap\.(\d+)(?:\.\d+)?\.ptw")
MAPLOG_COUNT_OFFSET = 92  # within the heap header


@dataclass(frozen=True)
class HeapHeader:
    """The heap area's fixed header: layout and whole-process counters (bytes, counts)."""

    hflags: int
    max_frames: int
    sample_bytes: int
    count_scale: int
    index_offset: int
    index_capacity: int
    bucket_capacity: int
    buckets_offset: int
    bucket_size: int
    bucket_count: int
    frames_offset: int
    frames_capacity: int
    frames_used: int
    maplog_offset: int
    maplog_capacity: int
    maplog_count: int
    live_bytes: int
    peak_bytes: int
    peak_snapshot: int
    peak_time_ns: int
    live_blocks: int
    allocs: int
    frees: int
    untracked_frees: int
    ptr_dropped: int
    stack_dropped: int
    boot_bytes: int
    ptr_capacity: int

    @property
    def sampled(self) -> bool:
        return bool(self.hflags & HEAP_SAMPLED)


@dataclass(frozen=True)
class Bucket:
    """One allocating call stack (innermost first) and its counters.

    Counts are real counts (divided by count_scale); in sampled mode bytes and
    counts are unbiased estimates, hence floats.
    """

    index: int
    ips: tuple[int, ...]
    flags: int
    alloc_bytes: float
    allocs: float
    live_bytes: float
    live_blocks: float
    frees: float
    temporary: float
    peak_bytes: float
    peak_blocks: float


def decode_heap_header(data: bytes, header: FileHeader, name: str) -> HeapHeader:
    """Decode and bound-check the heap header (`data`: its bytes at body_offset)."""
    try:
        heap = HeapHeader(*HEAP_HEADER.unpack_from(data, 0))
    except struct.error:
        raise ProftuiError(f"{name}: truncated heap header") from None
    cap = heap.index_capacity
    if (cap == 0 or cap & (cap - 1) or heap.bucket_size != BUCKET.size or heap.count_scale == 0
            or heap.max_frames == 0 or heap.max_frames > 1024
            or heap.index_offset < HEADER_SIZE + HEAP_HEADER.size
            or heap.index_offset + 4 * cap > heap.buckets_offset
            or heap.buckets_offset + heap.bucket_capacity * BUCKET.size > heap.frames_offset
            or heap.frames_offset + 8 * heap.frames_capacity > heap.maplog_offset
            or heap.maplog_offset + heap.maplog_capacity * MAP_ENTRY.size > header.file_size):
        raise ProftuiError(f"{name}: corrupt heap header")
    return heap


class HeapFile:
    """One process's heap file; read it repeatedly while the target runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = RuntimeFile(path)
        try:
            self.header = self.file.header(KIND_HEAP)
            self.heap = self._read_heap_header()
        except ProftuiError:
            self.file.close()
            raise
        self.maplog = MapLogReader(self.file, self.header.body_offset + MAPLOG_COUNT_OFFSET,
                                   self.heap.maplog_offset, self.heap.maplog_capacity)
        self._frames: dict[int, tuple[int, ...]] = {}  # bucket index -> frames (immutable)
        self.corrupt_buckets = 0
        self._moved_bytes = b""  # the bucket bytes moved_buckets() saw last

    def _read_heap_header(self) -> HeapHeader:
        raw = self.file.read(self.header.body_offset, HEAP_HEADER.size)
        return decode_heap_header(raw, self.header, self.path.name)

    def refresh(self) -> tuple[FileHeader, HeapHeader]:
        """Re-read both headers (the counters change while the target runs)."""
        self.header = self.file.header(KIND_HEAP)
        self.heap = self._read_heap_header()
        return self.header, self.heap

    def buckets(self) -> list[Bucket]:
        """Every published bucket with its counters now (refresh() first for new ones)."""
        raw = self._bucket_bytes()
        found = (self._bucket(raw, i) for i in range(len(raw) // BUCKET.size))
        return [b for b in found if b is not None]

    def moved_buckets(self) -> list[Bucket]:
        """The buckets whose counters changed since the last call (every one the first
        time): a byte comparison per bucket, so an interval costs what moved."""
        raw = self._bucket_bytes()
        last, self._moved_bytes = self._moved_bytes, raw
        size, out = BUCKET.size, []
        for i in range(len(raw) // size):
            at = i * size
            if raw[at:at + size] != last[at:at + size]:
                bucket = self._bucket(raw, i)
                if bucket is not None:  # not ready: its bytes differ again next time
                    out.append(bucket)
        return out

    def _bucket_bytes(self) -> bytes:
        heap = self.heap
        count = min(heap.bucket_count, heap.bucket_capacity)
        return self.file.read(heap.buckets_offset, count * BUCKET.size) if count else b""

    def _bucket(self, raw: bytes, i: int) -> Bucket | None:
        """Bucket `i` of the bucket bytes `raw`; None while it is being filled or corrupt."""
        heap = self.heap
        (_h, first, nframes, flags, alloc_bytes, allocs, live_bytes, live_blocks, frees,
         temporary, peak_bytes, peak_blocks) = BUCKET.unpack_from(raw, i * BUCKET.size)
        if not flags & BUCKET_READY:
            return None  # being filled: next time
        ips = self._frames.get(i)
        if ips is None:
            if nframes > heap.max_frames or first + nframes > heap.frames_capacity:
                self.corrupt_buckets += 1
                return None
            words = array("Q")
            if nframes:
                words.frombytes(self.file.read(heap.frames_offset + 8 * first, 8 * nframes))
            ips = self._frames[i] = tuple(words)
        scale = float(heap.count_scale)
        return Bucket(i, ips, flags, float(_signed(alloc_bytes)), _signed(allocs) / scale,
                      float(_signed(live_bytes)), _signed(live_blocks) / scale,
                      _signed(frees) / scale, _signed(temporary) / scale,
                      float(_signed(peak_bytes)), _signed(peak_blocks) / scale)

    def new_mappings(self) -> list[MapEntry]:
        """Map log entries published since the last call."""
        return self.maplog.new()

    def close(self) -> None:
        self.file.close()


def _signed(value: int) -> int:
    """A counter read mid-update by two threads may dip below zero: clamp at 0."""
    return value if value < 1 << 63 else 0
