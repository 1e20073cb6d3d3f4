"""The sampler file decoder on exact bytes, written the way csrc/sampler/pt_sampler_file.c
and pt_sampler_handler.c write them (a Python twin of the C writer)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire import KIND_SAMPLER, FileHeader, encode_header
from proftui.collectors.runtime.wire_sampler import (
    MAP_ENTRY,
    MAP_LOAD,
    SAMPLER_HEADER,
    SLOT,
    SREC_TRUNCATED,
    SamplerFile,
)

RING_WORDS = 16
NSLOTS = 2
SLOTS_OFFSET = 256
SLOT_SIZE = 64 + 8 * RING_WORDS
MAPLOG_OFFSET = SLOTS_OFFSET + NSLOTS * SLOT_SIZE
MAPLOG_CAP = 4
SIZE = MAPLOG_OFFSET + MAPLOG_CAP * MAP_ENTRY.size


class Writer:
    """Builds a sampler file like the runtime: header, slots, records, map log."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = bytearray(SIZE)
        self.data[0:128] = encode_header(FileHeader(
            KIND_SAMPLER, 42, 1, 0, 0, 1_000_000, 128, SIZE, 0, 0, 0, "perf task-clock"))
        SAMPLER_HEADER.pack_into(self.data, 128, 27, 1, NSLOTS, RING_WORDS, SLOTS_OFFSET,
                                 SLOT_SIZE, MAPLOG_OFFSET, MAPLOG_CAP, 0, 0, 1_000_000)
        self.heads = [0] * NSLOTS

    def slot(self, i: int, tid: int, state: int = 1, gen: int = 1) -> None:
        SLOT.pack_into(self.data, SLOTS_OFFSET + i * SLOT_SIZE, state, tid, self.heads[i], 0,
                       0, 0, 0, gen)

    def record(self, i: int, ips: list[int], weight: int = 1, flags: int = 0) -> None:
        base = SLOTS_OFFSET + i * SLOT_SIZE
        tail = struct.unpack_from("<Q", self.data, base + 16)[0]
        head = self.heads[i]
        assert RING_WORDS - (head - tail) >= len(ips) + 1, "the runtime would drop this"
        for k, word in enumerate([len(ips) | flags << 16 | weight << 32, *ips]):
            struct.pack_into("<Q", self.data, base + 64 + 8 * ((head + k) % RING_WORDS), word)
        self.heads[i] = head + len(ips) + 1
        struct.pack_into("<Q", self.data, base + 8, self.heads[i])

    def mapping(self, n: int, path: str) -> None:
        MAP_ENTRY.pack_into(self.data, MAPLOG_OFFSET + n * MAP_ENTRY.size, 0x1000, 0x2000, 0,
                            0, MAP_LOAD, 3, b"\xab\xcd\xef", path.encode())
        struct.pack_into("<I", self.data, 128 + 44, n + 1)

    def flush(self) -> None:
        self.path.write_bytes(self.data)

    def sync_from(self, sfile: SamplerFile) -> None:
        """Take the tails the reader stored (shared memory in real life)."""
        for i in range(NSLOTS):
            off = SLOTS_OFFSET + i * SLOT_SIZE + 16
            self.data[off : off + 8] = sfile.file.read(off, 8)


def test_drain_records_wrap_and_tail(tmp_path: Path) -> None:
    w = Writer(tmp_path / "sampler.42.ptw")
    w.slot(0, 100)
    w.slot(1, 101)
    w.record(0, [0x10, 0x20, 0x30], weight=1)
    w.record(0, [0x11, 0x20, 0x30], weight=1)
    w.record(1, [0x40], weight=4, flags=SREC_TRUNCATED)
    w.mapping(0, "/bin/prog")
    w.flush()
    f = SamplerFile(w.path)
    got = f.drain()
    assert [(s.tid, s.weight, s.ips, s.flags) for s in got] == [
        (100, 1, (0x10, 0x20, 0x30), 0), (100, 1, (0x11, 0x20, 0x30), 0),
        (101, 4, (0x40,), SREC_TRUNCATED)]
    assert f.drain() == []  # tail moved to head
    maps = f.new_mappings()
    assert [(m.path, m.build_id, m.start) for m in maps] == [("/bin/prog", "abcdef", 0x1000)]
    assert f.new_mappings() == []
    # More records, words 8..19 of a 16-word ring: they wrap around its end.
    w.sync_from(f)
    f.close()
    for n in range(3):
        w.record(0, [0x100 + n, 0x200, 0x300])
    assert w.heads[0] % RING_WORDS < 8
    w.flush()
    f = SamplerFile(w.path)
    assert [s.ips[0] for s in f.drain()] == [0x100, 0x101, 0x102]
    f.close()


def test_corrupt_record_stops_that_slot(tmp_path: Path) -> None:
    w = Writer(tmp_path / "sampler.42.ptw")
    w.slot(0, 100)
    w.record(0, [0x10])
    w.record(0, [0x20, 0x30])
    base = SLOTS_OFFSET + 64
    struct.pack_into("<Q", w.data, base + 16, 0xFFFF)  # second record claims 65535 frames
    w.flush()
    f = SamplerFile(w.path)
    assert [s.ips for s in f.drain()] == [(0x10,)]
    assert f.corrupt_records == 1
    f.close()


def test_slot_reused_while_reading_is_skipped(tmp_path: Path) -> None:
    w = Writer(tmp_path / "sampler.42.ptw")
    w.slot(0, 100, state=3)  # being claimed: not readable
    w.record(0, [0x10])
    w.flush()
    f = SamplerFile(w.path)
    assert f.drain() == []
    assert f.slots() == []
    f.close()


@pytest.mark.parametrize("field", ["ring", "slot_size", "maplog"])
def test_corrupt_sampler_header(tmp_path: Path, field: str) -> None:
    w = Writer(tmp_path / "sampler.42.ptw")
    values = [27, 1, NSLOTS, RING_WORDS, SLOTS_OFFSET, SLOT_SIZE, MAPLOG_OFFSET, MAPLOG_CAP,
              0, 0, 1]
    if field == "ring":
        values[3] = 12  # not a power of two
    elif field == "slot_size":
        values[5] = 8
    else:
        values[7] = 10_000  # runs past the end of the file
    SAMPLER_HEADER.pack_into(w.data, 128, *values)
    w.flush()
    with pytest.raises(ProftuiError, match="corrupt sampler header"):
        SamplerFile(w.path)


def test_not_a_sampler_file(tmp_path: Path) -> None:
    w = Writer(tmp_path / "sampler.42.ptw")
    struct.pack_into("<I", w.data, 12, 1)  # kind: hook
    w.flush()
    with pytest.raises(ProftuiError, match="expected a sampler file"):
        SamplerFile(w.path)
