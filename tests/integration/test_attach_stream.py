"""The attach stream decoder on exact bytes (a Python twin of pt_attach_out.c),
including split reads and corrupt input."""

from __future__ import annotations

import struct

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire_attach import (
    FLAG_CFI,
    FLAG_KERNEL_TIME,
    PROCESS_GONE,
    PROCESS_NEW,
    REC_COUNTS,
    REC_END,
    REC_ERROR,
    REC_EXIT,
    REC_LOST,
    REC_MAPS,
    REC_PROCESS,
    REC_STACK,
    REC_TASK,
    REC_THREAD,
    REC_WARN,
    SAMPLE_CFI,
    SAMPLE_TRUNCATED,
    THREAD_NEW,
    Counts,
    End,
    Lost,
    MapsChanged,
    Message,
    ProcessEvent,
    Stack,
    StreamDecoder,
    TargetExit,
    TaskEvent,
    ThreadEvent,
)

from tests.helpers.attach_stream import counts, header, record, stack, text

STREAM = (
    header()
    + record(REC_THREAD, struct.pack("=II16s", 1235, 1, b"worker"))
    + stack(0, 1235, [0x401000, 0x401234], SAMPLE_CFI)
    + stack(1, 1235, [0x401000], SAMPLE_TRUNCATED)
    + counts(1_700_000_000_500_000_000, (0, 3, 6_000_000), (1, 1, 1_000_000))
    + record(REC_MAPS, struct.pack("=Q", 0))
    + record(REC_LOST, struct.pack("=Q", 3))
    + text(REC_WARN, "perf_event_open failed; sampling with ptrace instead")
    + record(REC_EXIT, struct.pack("=ii", 7, -1))
    + record(99, b"future")  # unknown types are skipped
    + record(REC_END, struct.pack("=QQ", 1, 3))
)

EXPECTED = [
    ThreadEvent(1235, 1, "worker"),
    Stack(0, 1235, (0x401000, 0x401234), SAMPLE_CFI),
    Stack(1, 1235, (0x401000,), SAMPLE_TRUNCATED),
    Counts(1_700_000_000.5, ((0, 3, 6_000_000), (1, 1, 1_000_000))),
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
    assert decoder.header.flags == FLAG_CFI | FLAG_KERNEL_TIME


@pytest.mark.parametrize("chunk", [1, 3, 8, 13, 64])
def test_split_reads(chunk: int) -> None:
    decoder = StreamDecoder()
    out = []
    for i in range(0, len(STREAM), chunk):
        out.extend(decoder.feed(STREAM[i : i + chunk]))
    assert out == EXPECTED


def test_error_record() -> None:
    data = header() + text(REC_ERROR, "ptrace(PTRACE_SEIZE, 5): Operation not permitted")
    assert list(StreamDecoder().feed(data)) == [
        Message(True, "ptrace(PTRACE_SEIZE, 5): Operation not permitted")]


def test_exit_record_of_an_unknown_end() -> None:
    data = header() + record(REC_EXIT, struct.pack("=ii", -1, -1))
    assert list(StreamDecoder().feed(data)) == [TargetExit(None, None)]


@pytest.mark.parametrize(("data", "message"), [
    (header(magic=b"NOTATTCH"), "bad magic"),
    (header(version=9), "version 9"),
    (header(version=3), "version 3"),  # one record per sample: proftui reads 4 only
    (header() + struct.pack("=II", REC_STACK, 12), "corrupt record size 12"),
    (header() + struct.pack("=II", REC_STACK, 4), "corrupt record size 4"),
    (header() + record(REC_STACK, struct.pack("=IIII", 0, 1, 0, 50)), "too short"),
    (header() + record(REC_STACK, struct.pack("=II", 1, 1)), "too short"),
    (header() + record(REC_COUNTS, b""), "too short"),
    (header() + record(REC_LOST, b""), "too short"),
])
def test_corrupt_input_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(ProftuiError, match=message):
        list(StreamDecoder().feed(data))


def test_system_method_records() -> None:
    """TASK and PROCESS (the system method's): a serial's thread, an address space."""
    maps = "00400000-00401000 r-xp 00000000 08:01 42 /usr/bin/prog\n"
    body = struct.pack("=IIIIQ", 4321, PROCESS_NEW, len("/usr/bin/prog"), len(maps), 77)
    stream = (header(method=3, pid=0)
              + record(REC_PROCESS, body + b"/usr/bin/prog" + maps.encode())
              + record(REC_TASK, struct.pack("=IIII16s", 1, 4321, 4322, THREAD_NEW, b"w\n"))
              + record(REC_PROCESS, struct.pack("=IIIIQ", 4321, PROCESS_GONE, 0, 0, 0)))
    decoder = StreamDecoder()
    assert list(decoder.feed(stream)) == [
        ProcessEvent(4321, PROCESS_NEW, "/usr/bin/prog", maps, 77),
        TaskEvent(1, 4321, 4322, THREAD_NEW, "w\\x0a"),
        ProcessEvent(4321, PROCESS_GONE, "", ""),
    ]
    assert decoder.header is not None and decoder.header.method == "system"
    short = header() + record(REC_PROCESS, struct.pack("=IIIIQ", 1, PROCESS_NEW, 500, 0, 0))
    with pytest.raises(ProftuiError, match="process record too short"):
        list(StreamDecoder().feed(short))
