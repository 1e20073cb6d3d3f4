"""The attach stream decoder on exact bytes (a Python twin of pt_attach_out.c),
including split reads and corrupt input."""

from __future__ import annotations

import struct

import pytest
from proftui.collectors.attach.collector import _join_chains
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire_attach import (
    REC_END,
    REC_ERROR,
    REC_EXIT,
    REC_LOST,
    REC_MAPS,
    REC_SAMPLE,
    REC_THREAD,
    REC_WARN,
    End,
    Lost,
    MapsChanged,
    Message,
    Sample,
    StreamDecoder,
    TargetExit,
    ThreadEvent,
)


def header(method: int = 2, pid: int = 1234, period_ns: int = 10_000_000,
           version: int = 2, magic: bytes = b"PTATTACH") -> bytes:
    return struct.pack("=8sIIIIQ", magic, version, method, pid, 0, period_ns)


def record(rtype: int, payload: bytes) -> bytes:
    payload += b"\0" * (-len(payload) % 8)
    return struct.pack("=II", rtype, 8 + len(payload)) + payload


def sample(tid: int, weight: int, ips: list[int], stack: list[int], sp: int = 0x7FFC0000,
           bp: int = 0x7FFC0040) -> bytes:
    body = struct.pack("=IIQIIQQ", tid, len(ips), weight, len(stack), 0, sp, bp)
    body += struct.pack(f"={len(ips)}Q", *ips) + struct.pack(f"={len(stack)}Q", *stack)
    return record(REC_SAMPLE, body)


def text(rtype: int, message: str) -> bytes:
    return record(rtype, message.encode() + b"\0")


STREAM = (
    header()
    + record(REC_THREAD, struct.pack("=II16s", 1235, 1, b"worker"))
    + sample(1235, 2_000_000, [0x401000, 0x401234], [7, 0x401234])
    + record(REC_MAPS, struct.pack("=Q", 0))
    + record(REC_LOST, struct.pack("=Q", 3))
    + text(REC_WARN, "perf_event_open failed; sampling with ptrace instead")
    + record(REC_EXIT, struct.pack("=ii", 7, -1))
    + record(99, b"future")  # unknown types are skipped
    + record(REC_END, struct.pack("=QQ", 1, 3))
)

EXPECTED = [
    ThreadEvent(1235, 1, "worker"),
    Sample(1235, 2_000_000, (0x401000, 0x401234), 0x7FFC0000, 0x7FFC0040,
           struct.pack("=2Q", 7, 0x401234)),
    MapsChanged(),
    Lost(3),
    Message(False, "perf_event_open failed; sampling with ptrace instead"),
    TargetExit(7, None),
    End(1, 3),
]


def test_whole_stream() -> None:
    decoder = StreamDecoder()
    assert list(decoder.feed(STREAM)) == EXPECTED
    assert decoder.header is not None
    assert (decoder.header.method, decoder.header.pid, decoder.header.period_ns) == (
        "ptrace", 1234, 10_000_000)


@pytest.mark.parametrize("chunk", [1, 3, 8, 13, 64])
def test_split_reads(chunk: int) -> None:
    decoder = StreamDecoder()
    out = []
    for i in range(0, len(STREAM), chunk):
        out.extend(decoder.feed(STREAM[i : i + chunk]))
    assert out == EXPECTED


def test_error_record_and_unknown_exit() -> None:
    data = header() + text(REC_ERROR, "ptrace(PTRACE_SEIZE, 5): Operation not permitted")
    data += record(REC_EXIT, struct.pack("=ii", -1, -1))
    assert list(StreamDecoder().feed(data)) == [
        Message(True, "ptrace(PTRACE_SEIZE, 5): Operation not permitted"),
        TargetExit(None, None),
    ]


@pytest.mark.parametrize(("data", "message"), [
    (header(magic=b"NOTATTCH"), "bad magic"),
    (header(version=9), "version 9"),
    (header() + struct.pack("=II", REC_SAMPLE, 12), "corrupt record size 12"),
    (header() + struct.pack("=II", REC_SAMPLE, 4), "corrupt record size 4"),
    (header() + record(REC_SAMPLE, struct.pack("=IIQII", 1, 50, 0, 0, 0)), "too short"),
    (header() + record(REC_LOST, b""), "too short"),
])
def test_corrupt_input_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(ProftuiError, match=message):
        list(StreamDecoder().feed(data))


def test_cfi_chain_is_continued_by_the_frame_pointer_chain() -> None:
    # CFI found the caller the fp walk skipped (0x10), then ran out of copied stack at 0x30.
    assert _join_chains([0x1, 0x10, 0x20, 0x30], (0x1, 0x20, 0x30, 0x40, 0x50)) == [
        0x1, 0x10, 0x20, 0x30, 0x40, 0x50]
    assert _join_chains([0x1], (0x1, 0x20)) == [0x1, 0x20]  # no rule at the pc: fp only
    assert _join_chains([0x1, 0x10], (0x1, 0x99)) == [0x1, 0x10]  # nothing shared
