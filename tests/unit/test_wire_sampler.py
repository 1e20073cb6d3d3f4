"""The sampler file decoder on exact bytes, written the way csrc/sampler/pt_sampler_file.c,
pt_sampler_handler.c and csrc/common/pt_stacktab.c write them (tests/helpers/sampler_file.py,
a Python twin of the C writer)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire_sampler import (
    SAMPLER_HEADER,
    SLOTS_OFFSET,
    SREC_TRUNCATED,
    SamplerFile,
)

from tests.helpers.sampler_file import SamplerWriter


def test_records_name_stacks_and_their_time(tmp_path: Path) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.slot(0, 100)
    w.slot(1, 101)
    a = w.sample(0, 100, [0x10, 0x20, 0x30], time_ns=7)
    w.sample(0, 100, [0x10, 0x20, 0x30], time_ns=8)
    b = w.sample(1, 101, [0x40], weight=4, flags=SREC_TRUNCATED, time_ns=9)
    w.mapping(0, "/bin/prog")
    f = SamplerFile(w.path)
    got = [(r.tid, list(r.ids), list(r.weights), list(r.times)) for r in f.drain()]
    assert got == [(100, [a, a], [1, 1], [7, 8]), (101, [b], [4], [9])]
    stacks = {s.id: (s.tid, s.flags, tuple(s.ips)) for s in f.new_stacks()}
    assert stacks == {a: (100, 0, (0x10, 0x20, 0x30)), b: (101, SREC_TRUNCATED, (0x40,))}
    assert f.new_stacks() == []  # each stack is read once
    assert f.stacks.counts_of([a, b]) == [(a, 2, 2), (b, 1, 4)]
    samples, periods = f.stacks.counts()
    assert list(samples) == [2, 1] and list(periods) == [2, 4]
    assert f.drain() == []  # tail moved to head
    maps = f.new_mappings()
    assert [(m.path, m.build_id, m.start) for m in maps] == [("/bin/prog", "abcdef", 0x1000)]
    assert f.new_mappings() == []
    f.close()
    w.close()


def test_records_wrap_around_the_ring(tmp_path: Path) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw", ring_words=8)
    w.slot(0, 100)
    for n in range(3):
        w.sample(0, 100, [0x100 + n])
    f = SamplerFile(w.path)
    assert [list(r.ids) for r in f.drain()] == [[0, 1, 2]]
    for n in range(3):  # words 6..11 of an 8-word ring
        w.sample(0, 100, [0x200 + n])
    assert [list(r.ids) for r in f.drain()] == [[3, 4, 5]]
    f.close()
    w.close()


def test_a_stack_not_ready_is_read_later(tmp_path: Path) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.slot(0, 100)
    w.stack_id(100, [0x10])
    late = w.stack_id(100, [0x20], ready=False)  # claimed, fields still being written
    w.stack_id(100, [0x30])
    f = SamplerFile(w.path)
    assert [tuple(s.ips) for s in f.new_stacks()] == [(0x10,), (0x30,)]
    entry = w.entries + late * 48 + 26  # its flags
    w.put(entry, struct.pack("<H", 1 << 15))  # READY now
    assert [(s.id, tuple(s.ips)) for s in f.new_stacks()] == [(late, (0x20,))]
    f.close()
    w.close()


def test_slot_reused_while_reading_is_skipped(tmp_path: Path) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.slot(0, 100, state=3)  # being claimed: not readable
    w.sample(0, 100, [0x10])
    f = SamplerFile(w.path)
    assert f.drain() == []
    assert f.slots() == []
    f.close()
    w.close()


@pytest.mark.parametrize("field", ["ring", "slot_size", "maplog", "stacks"])
def test_corrupt_sampler_header(tmp_path: Path, field: str) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    values = list(SAMPLER_HEADER.unpack(SAMPLER_HEADER.pack(
        27, 1, 128, w.ring_words, SLOTS_OFFSET, w.slot_size, w.maplog, 1024, 0, 0, 1, 0,
        w.stacks, 0)))
    if field == "ring":
        values[3] = 12  # not a power of two
    elif field == "slot_size":
        values[5] = 8
    elif field == "maplog":
        values[7] = 10_000_000  # runs into the stack table
    else:
        values[12] = w.size  # the table's header past the end of the file
    w.put(128, SAMPLER_HEADER.pack(*values))
    with pytest.raises(ProftuiError, match="corrupt sampler header"):
        SamplerFile(w.path)
    w.close()


def test_not_a_sampler_file(tmp_path: Path) -> None:
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.put(12, struct.pack("<I", 1))  # kind: hook
    with pytest.raises(ProftuiError, match="expected a sampler file"):
        SamplerFile(w.path)
    w.close()


def test_an_exited_thread_keeps_its_name(tmp_path: Path) -> None:
    """A thread that ends between two drains is gone from /proc when the front end
    looks: the runtime writes its name into the slot at exit, reported once."""
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.slot(0, 101)
    w.sample(0, 101, [0x401000])
    w.slot(0, 101, state=2, name=b"worker-1")
    w.slot(1, 102, state=2, name=b"idle\x1b[31m")  # exited with nothing left to read
    sfile = SamplerFile(w.path)
    records = sfile.drain()
    assert [(r.tid, r.name, len(r.ids)) for r in records] == [
        (101, "worker-1", 1), (102, "idle\\x1b[31m", 0)]
    assert sfile.drain() == []  # once per thread


def test_stack_table_header_overwritten_after_opening(tmp_path: Path) -> None:
    """The target overwrites the stack table's header once the reader has it: a junk
    count (0x5a5a5a5a, clamped to 4 M entries) had the reader read and keep pending
    millions of entries at every drain (20 s for a 0.3 s target).  The layout never
    changes, so a header whose layout moved is one error, at once."""
    w = SamplerWriter(tmp_path / "sampler.42.ptw")
    w.slot(0, 100)
    a = w.sample(0, 100, [0x10, 0x20])
    f = SamplerFile(w.path)
    assert [s.id for s in f.new_stacks()] == [a]
    w.put(w.stacks, bytes([0x5A]) * 64)
    with pytest.raises(ProftuiError, match="stack table header overwritten"):
        f.new_stacks()
    with pytest.raises(ProftuiError, match="stack table header overwritten"):
        f.stacks.counts()
    f.close()
    w.close()
