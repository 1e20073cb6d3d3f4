"""Parse gmon.out, the profile a `gcc -pg` program writes at exit.

Layout (glibc gmon/gmon.c, binutils gprof/gmon_out.h), in the target's byte
order, addresses as wide as its pointers:

    header      "gmon", u32 version (1), 12 spare bytes
    records     each starts with a one-byte tag:
      0 TIME_HIST  low_pc, high_pc, u32 bins, u32 prof_rate, char dimen[15],
                   char abbrev, then `bins` u16 sample counters
      1 CG_ARC     from_pc, self_pc, u32 count
      2 BB_COUNT   u32 n, then n x (addr, count) pointer-sized pairs

glibc writes link-time addresses (it subtracts the load base of a PIE), so
they compare directly with ELF symbol values.  Every malformed input raises
`GmonError` with one line saying what is wrong and where.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from proftui.collectors.errors import ProftuiError

MAGIC = b"gmon"
HEADER_SIZE = 20
TAG_TIME_HIST = 0
TAG_CG_ARC = 1
TAG_BB_COUNT = 2
MAX_BINS = 1 << 28  # far beyond any real text segment (2 bytes per bin)


class GmonError(ProftuiError):
    """A gmon.out file that cannot be parsed."""


@dataclass(frozen=True)
class Histogram:
    """One TIME_HIST record: `counts[i]` samples in bin i of [low_pc, high_pc)."""

    low_pc: int
    high_pc: int
    prof_rate: int  # samples per second of `dimension`
    dimension: str  # "seconds" for the profiling timer
    abbrev: str
    counts: tuple[int, ...]


@dataclass
class GmonData:
    """Everything in one gmon.out: histograms, arcs (from_pc, self_pc) -> count, bb counts."""

    histograms: list[Histogram] = field(default_factory=list)
    arcs: dict[tuple[int, int], int] = field(default_factory=dict)
    basic_blocks: dict[int, int] = field(default_factory=dict)

    @property
    def prof_rate(self) -> int:
        return self.histograms[0].prof_rate if self.histograms else 100

    def merge(self, other: GmonData) -> GmonData:
        """Sum of two profiles of the same binary (gprof -s); returns self."""
        for hist in other.histograms:
            self._add_histogram(hist, "merged profile")
        for key, count in other.arcs.items():
            self.arcs[key] = self.arcs.get(key, 0) + count
        for addr, count in other.basic_blocks.items():
            self.basic_blocks[addr] = self.basic_blocks.get(addr, 0) + count
        return self

    def _add_histogram(self, hist: Histogram, name: str) -> None:
        for i, old in enumerate(self.histograms):
            if (old.low_pc, old.high_pc) == (hist.low_pc, hist.high_pc):
                if len(old.counts) != len(hist.counts):
                    raise GmonError(f"{name}: histograms of one range have different sizes")
                summed = tuple(a + b for a, b in zip(old.counts, hist.counts, strict=True))
                self.histograms[i] = Histogram(old.low_pc, old.high_pc, old.prof_rate,
                                               old.dimension, old.abbrev, summed)
                return
            if hist.low_pc < old.high_pc and old.low_pc < hist.high_pc:
                raise GmonError(f"{name}: overlapping histogram records")
        self.histograms.append(hist)


def parse_gmon(data: bytes, name: str = "gmon.out", pointer_size: int = 8,
               little_endian: bool = True) -> GmonData:
    """Decode gmon.out bytes; `pointer_size`/`little_endian` come from the profiled ELF."""
    if pointer_size not in (4, 8):
        raise GmonError(f"{name}: unsupported address size {pointer_size}")
    order = "<" if little_endian else ">"
    addr_fmt = "Q" if pointer_size == 8 else "I"
    hist_header = struct.Struct(f"{order}{addr_fmt}{addr_fmt}II15sc")
    arc_record = struct.Struct(f"{order}{addr_fmt}{addr_fmt}I")
    bb_pair = struct.Struct(f"{order}{addr_fmt}{addr_fmt}")
    u32 = struct.Struct(f"{order}I")

    if len(data) < HEADER_SIZE:
        raise GmonError(f"{name}: too short for a gmon.out header ({len(data)} bytes)")
    if data[:4] != MAGIC:
        raise GmonError(f"{name}: not a gmon.out file (bad magic {data[:4]!r})")
    version = u32.unpack_from(data, 4)[0]
    if version != 1:
        raise GmonError(f"{name}: unsupported gmon.out version {version} (expected 1)")

    result = GmonData()
    pos = HEADER_SIZE
    end = len(data)
    while pos < end:
        tag = data[pos]
        at = pos
        pos += 1
        if tag == TAG_TIME_HIST:
            if pos + hist_header.size > end:
                raise GmonError(f"{name}: truncated histogram header at byte {at}")
            low, high, bins, rate, dimen, abbrev = hist_header.unpack_from(data, pos)
            pos += hist_header.size
            if high <= low or bins == 0 or bins > MAX_BINS:
                raise GmonError(f"{name}: corrupt histogram at byte {at} "
                                f"(range 0x{low:x}-0x{high:x}, {bins} bins)")
            if rate == 0:
                raise GmonError(f"{name}: corrupt histogram at byte {at} (sampling rate 0)")
            if pos + 2 * bins > end:
                raise GmonError(f"{name}: truncated histogram at byte {at} "
                                f"({bins} bins need {2 * bins} bytes, {end - pos} left)")
            counts = struct.unpack_from(f"{order}{bins}H", data, pos)
            pos += 2 * bins
            text = dimen.split(b"\0", 1)[0].decode("ascii", "replace")
            result._add_histogram(Histogram(low, high, rate, text,
                                            abbrev.decode("ascii", "replace"), counts), name)
        elif tag == TAG_CG_ARC:
            if pos + arc_record.size > end:
                raise GmonError(f"{name}: truncated call-graph arc at byte {at}")
            from_pc, self_pc, count = arc_record.unpack_from(data, pos)
            pos += arc_record.size
            key = (from_pc, self_pc)
            result.arcs[key] = result.arcs.get(key, 0) + count
        elif tag == TAG_BB_COUNT:
            if pos + 4 > end:
                raise GmonError(f"{name}: truncated basic-block record at byte {at}")
            n = u32.unpack_from(data, pos)[0]
            pos += 4
            if pos + n * bb_pair.size > end:
                raise GmonError(f"{name}: truncated basic-block record at byte {at} "
                                f"({n} blocks)")
            for _ in range(n):
                addr, count = bb_pair.unpack_from(data, pos)
                pos += bb_pair.size
                result.basic_blocks[addr] = result.basic_blocks.get(addr, 0) + count
        else:
            raise GmonError(f"{name}: corrupt record tag {tag} at byte {at}")
    return result


def read_gmon(path: Path, pointer_size: int = 8, little_endian: bool = True) -> GmonData:
    """`parse_gmon` on a file; GmonError when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GmonError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_gmon(data, str(path), pointer_size, little_endian)
