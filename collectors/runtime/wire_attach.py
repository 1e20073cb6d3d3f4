"""Decoder of the attach stream written by csrc/attach/proftui_attach.c (docs/attach-stream.md).

The helper writes a 32-byte header, then records of `type:u32, size:u32,
payload`, each a multiple of 8 bytes, native-endian.  `StreamDecoder.feed`
takes whatever bytes a pipe read returned and yields complete records; a bad
magic, version or record size raises ProftuiError (never a crash).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.thread_names import printable_name

MAGIC = b"PTATTACH"
VERSION = 5
HEADER = struct.Struct("=8sIIIIQ")  # magic, version, method, pid, flags, period_ns
RECORD = struct.Struct("=II")  # type, size (whole record, header included)
MAX_RECORD = 1 << 20
COUNTS_INTERVAL_S = 0.1  # PT_ATTACH_COUNTS_NS: how often the helper sends counts

METHODS = {1: "perf", 2: "ptrace", 3: "system"}
FLAG_CFI = 1  # the helper unwinds with .eh_frame CFI (x86-64); else frame pointers only
FLAG_KERNEL_TIME = 2  # samples count kernel time (else user time only)
FLAG_TARGET_TIMER = 4  # ptrace: the target's own ITIMER_PROF picked the samples
SAMPLE_TRUNCATED = 1  # PT_UNWIND_TRUNCATED: the walk stopped before the outermost frame
SAMPLE_DEPTH = 4  # PT_UNWIND_DEPTH: deeper than the frame limit
SAMPLE_CFI = 256  # PT_UNWIND_CFI: at least one step used a CFI row
SAMPLE_LATE = 1 << 16  # PT_ATTACH_SAMPLE_LATE: outer frames read from the live stack (perf)
SAMPLE_NO_STACK = 1 << 17  # PT_ATTACH_SAMPLE_NO_STACK: the stack was unreadable at the sample
_STACK = struct.Struct("=IIII")  # id, tid, flags, nframes
_COUNT = struct.Struct("=IIQ")  # id, samples, weight_ns

# 1 was SAMPLE (one record per sample) up to version 3
REC_THREAD, REC_MAPS, REC_LOST, REC_EXIT, REC_WARN, REC_ERROR, REC_END = range(2, 9)
REC_BUFFERS, REC_STACK, REC_COUNTS, REC_TASK, REC_PROCESS, REC_FORGET = 9, 10, 11, 12, 13, 14
THREAD_NEW, THREAD_GONE = 1, 2
PROCESS_NEW, PROCESS_MAPS, PROCESS_GONE = 1, 2, 4
LOST_RING, LOST_TABLE = 1, 2  # Lost.where: the kernel's perf ring was full; the helper's table


@dataclass(frozen=True)
class StreamHeader:
    method: str  # "perf" or "ptrace"
    pid: int
    period_ns: int
    flags: int = 0  # FLAG_* bits


@dataclass(frozen=True)
class Stack:
    """A distinct stack, announced once before the first counts that name its id."""

    id: int
    tid: int
    ips: tuple[int, ...]  # innermost first: the pc, then return addresses (unwound by the helper)
    flags: int = 0  # SAMPLE_* bits


@dataclass(frozen=True)
class Counts:
    """The samples of each stack that moved since the previous Counts."""

    time: float  # Unix seconds when the helper sent them
    counts: tuple[tuple[int, int, int], ...]  # (stack id, samples, weight_ns)


@dataclass(frozen=True)
class ThreadEvent:
    tid: int
    flags: int  # THREAD_NEW / THREAD_GONE bits (0: renamed)
    comm: str


@dataclass(frozen=True)
class TaskEvent:
    """System-wide method: task `serial` (the `tid` of its Stack records) is thread `tid`
    of process `pid`, in the address space its last ProcessEvent NEW announced."""

    serial: int
    pid: int
    tid: int
    flags: int  # THREAD_NEW / THREAD_GONE
    comm: str


@dataclass(frozen=True)
class ProcessEvent:
    """System-wide method: a process's address space began (NEW: first sampled, or after
    exec), its executable mappings changed (MAPS) or it exited (GONE)."""

    pid: int
    flags: int  # PROCESS_*
    exe: str  # the executable's path, as /proc/PID/exe read it ("" when GONE or unknown)
    maps: str  # the executable lines of /proc/PID/maps
    mnt_ns: int = 0  # its mount namespace (inode of /proc/PID/ns/mnt), 0 when unknown


@dataclass(frozen=True)
class MapsChanged:
    """The target mapped new executable code: re-read /proc/PID/maps."""


@dataclass(frozen=True)
class Lost:
    count: int
    where: int = LOST_RING  # LOST_RING (kernel ring full) or LOST_STREAM (proftui lagged)


@dataclass(frozen=True)
class Buffers:
    """The helper's buffers: `rings` perf rings of `ring_bytes` each (0 under ptrace),
    its stream buffer, the ring total asked with --buffer (0: the default), and the
    user stack each perf sample copies (0 under ptrace, which reads what it needs)."""

    ring_bytes: int
    rings: int
    stream_bytes: int
    asked_bytes: int
    stack_bytes: int = 0


@dataclass(frozen=True)
class TargetExit:
    status: int | None  # None when the method cannot know it (perf)
    signal: int | None


@dataclass(frozen=True)
class Message:
    fatal: bool  # True for PT_REC_ERROR, False for a warning
    text: str


@dataclass(frozen=True)
class Forget:
    """The helper emptied its stack table (asked with a byte 'f'): every count of the
    `stacks` ids it had given came before this; ids start at 0 again after it."""

    stacks: int


@dataclass(frozen=True)
class End:
    samples: int
    lost: int


Record = (Stack | Counts | ThreadEvent | MapsChanged | Lost | TargetExit | Message | End | Buffers
          | TaskEvent | ProcessEvent | Forget)


class StreamDecoder:
    """Incremental decoder: feed bytes, get the header, then records."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.header: StreamHeader | None = None

    def feed(self, data: bytes) -> Iterator[Record]:
        """Decode every complete record in the bytes seen so far."""
        self._buf += data
        pos = 0
        buf = self._buf
        if self.header is None:
            if len(buf) < HEADER.size:
                return
            magic, version, method, pid, flags, period = HEADER.unpack_from(buf, 0)
            if magic != MAGIC:
                raise ProftuiError("attach helper stream: bad magic (not a proftui-attach stream)")
            if version != VERSION:
                raise ProftuiError(
                    f"attach helper stream version {version}, this proftui reads {VERSION}; "
                    "reinstall proftui")
            self.header = StreamHeader(METHODS.get(method, f"method {method}"), pid, period,
                                       flags)
            pos = HEADER.size
        try:
            while len(buf) - pos >= RECORD.size:
                rtype, size = RECORD.unpack_from(buf, pos)
                if size < RECORD.size or size % 8 or size > MAX_RECORD:
                    raise ProftuiError(f"attach helper stream: corrupt record size {size}")
                if len(buf) - pos < size:
                    break
                record = decode_record(rtype, bytes(buf[pos + 8 : pos + size]))
                pos += size
                if record is not None:
                    yield record
        finally:
            del buf[:pos]


def decode_record(rtype: int, body: bytes) -> Record | None:
    """One record's payload (after type and size); None for unknown types."""
    try:
        if rtype == REC_STACK:
            sid, tid, flags, n = _STACK.unpack_from(body)
            if _STACK.size + 8 * n > len(body):
                raise ProftuiError("attach helper stream: stack record too short")
            return Stack(sid, tid, struct.unpack_from(f"={n}Q", body, _STACK.size), flags)
        if rtype == REC_COUNTS:
            (when,) = struct.unpack_from("=Q", body)
            end = 8 + (len(body) - 8) // _COUNT.size * _COUNT.size
            return Counts(when / 1e9, tuple(_COUNT.iter_unpack(body[8:end])))
        if rtype == REC_THREAD:
            tid, flags, comm = struct.unpack_from("=II16s", body)
            return ThreadEvent(tid, flags, printable_name(comm.split(b"\0", 1)[0]))
        if rtype == REC_MAPS:
            return MapsChanged()
        if rtype == REC_TASK:
            serial, pid, tid, flags, comm = struct.unpack_from("=IIII16s", body)
            return TaskEvent(serial, pid, tid, flags, printable_name(comm.split(b"\0", 1)[0]))
        if rtype == REC_PROCESS:
            pid, flags, exe_len, maps_len, mnt_ns = struct.unpack_from("=IIIIQ", body)
            if 24 + exe_len + maps_len > len(body):
                raise ProftuiError("attach helper stream: process record too short")
            exe = body[24:24 + exe_len].decode(errors="surrogateescape")
            maps = body[24 + exe_len:24 + exe_len + maps_len].decode(errors="surrogateescape")
            return ProcessEvent(pid, flags, exe, maps, mnt_ns)
        if rtype == REC_LOST:
            if len(body) >= 16:
                count, where = struct.unpack_from("=QI", body)
                return Lost(count, where)
            return Lost(struct.unpack_from("=Q", body)[0])  # the short form: the ring's
        if rtype == REC_BUFFERS:
            ring, rings, stack, stream, asked = struct.unpack_from("=QIIQQ", body)
            return Buffers(ring, rings, stream, asked, stack)
        if rtype == REC_EXIT:
            status, sig = struct.unpack_from("=ii", body)
            return TargetExit(None if status < 0 else status, None if sig < 0 else sig)
        if rtype in (REC_WARN, REC_ERROR):
            text = body.split(b"\0", 1)[0].decode(errors="replace")
            return Message(rtype == REC_ERROR, text)
        if rtype == REC_END:
            return End(*struct.unpack_from("=QQ", body))
        if rtype == REC_FORGET:
            return Forget(struct.unpack_from("=I", body)[0])
    except struct.error:
        raise ProftuiError(f"attach helper stream: record type {rtype} too short") from None
    return None  # a newer helper's record type: skip it
