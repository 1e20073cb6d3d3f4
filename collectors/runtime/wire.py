"""Decoder of the runtime's common file header (csrc/common/proftui_wire.h, docs/wire-format.md).

Kind-specific areas are decoded by `wire_hook.py` and `wire_sampler.py`; this
module checks the parts every runtime file shares and reads files with
pread/pwrite, never mmap: a page the runtime has not backed yet reads as
zeros (on a full tmpfs, touching it through a mapping would allocate and
raise SIGBUS in proftui), and a file truncated under us gives a short read,
one clear error, instead of a SIGBUS.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from proftui.collectors.errors import ProftuiError

MAGIC = b"PROFTUI\0"
VERSION = 5
HEADER_SIZE = 128
KIND_HOOK = 1
KIND_SAMPLER = 2
KIND_ATTACH = 3
KIND_HEAP = 4
KIND_NAMES = {KIND_HOOK: "hook", KIND_SAMPLER: "sampler", KIND_ATTACH: "attach",
              KIND_HEAP: "heap"}

FLAG_COUNT_ONLY = 1 << 0
FLAG_WALL_CLOCK = 1 << 1
FLAG_NO_SPACE = 1 << 2  # the run directory could not back part of the file
CONTROL_PAUSED = 1 << 0
STATE_EXITED = 1

# magic, version, kind, header_size, pid, ppid, flags, start_ns, period_ns,
# body_offset, file_size, dropped, control, state, clock
_HEADER = struct.Struct("<8sIIIIIIQQQQQII32s16x")
assert _HEADER.size == HEADER_SIZE
DROPPED_OFFSET = 64
CONTROL_OFFSET = 72
STATE_OFFSET = 76


@dataclass(frozen=True)
class FileHeader:
    """The common header of one runtime file (times in ns)."""

    kind: int
    pid: int
    ppid: int
    flags: int
    start_ns: int
    period_ns: int
    body_offset: int
    file_size: int
    dropped: int
    control: int
    state: int
    clock: str

    @property
    def exited(self) -> bool:
        return self.state == STATE_EXITED


class WireVersionError(ProftuiError):
    """An intact header of another format version: reinstall, never salvage."""


class Source(Protocol):
    """Bytes of a runtime file: `size` in total, `read(offset, length)` exactly."""

    size: int

    def read(self, offset: int, length: int) -> bytes: ...


class BytesSource:
    """A Source over bytes in memory (a copy of a file, tests)."""

    def __init__(self, data: bytes | bytearray | memoryview, name: str = "runtime file") -> None:
        self.data = bytes(data)
        self.size = len(self.data)
        self.name = name

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ProftuiError(f"{self.name}: truncated ({self.size} bytes, a read at "
                               f"{offset}+{length})")
        return self.data[offset:offset + length]


def as_source(data: bytes | bytearray | memoryview | Source, name: str) -> Source:
    """`data` itself if it is a Source, else a BytesSource over it."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return BytesSource(data, name)
    return data


def decode_header(data: bytes | bytearray | memoryview, name: str = "runtime file",
                  kind: int | None = None, size: int | None = None) -> FileHeader:
    """Check and decode the header; ProftuiError names what is wrong.

    `data` holds at least the header; `size` is the file's size (default len(data)).
    """
    present = len(data) if size is None else size
    if len(data) < HEADER_SIZE:
        raise ProftuiError(f"{name}: truncated ({len(data)} bytes, header needs {HEADER_SIZE})")
    (magic, version, file_kind, header_size, pid, ppid, flags, start_ns, period_ns,
     body_offset, file_size, dropped, control, state, clock) = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise ProftuiError(f"{name}: not a proftui runtime file (bad magic)")
    if version != VERSION:
        raise WireVersionError(
            f"{name}: written by runtime format version {version}, this proftui reads "
            f"version {VERSION}; reinstall so the runtime and front end match")
    if header_size != HEADER_SIZE:
        raise ProftuiError(f"{name}: corrupt header (header_size {header_size})")
    if kind is not None and file_kind != kind:
        raise ProftuiError(f"{name}: expected a {KIND_NAMES.get(kind, kind)} file, "
                           f"found kind {file_kind}")
    if not (HEADER_SIZE <= body_offset <= file_size <= present):
        raise ProftuiError(f"{name}: corrupt header (body at {body_offset}, size {file_size}, "
                           f"{present} bytes present)")
    return FileHeader(file_kind, pid, ppid, flags, start_ns, period_ns, body_offset, file_size,
                      dropped, control, state, clock.split(b"\0", 1)[0].decode("ascii", "replace"))


def encode_header(header: FileHeader) -> bytes:
    """Bytes of `header` exactly as the C runtime writes them.  Test seam (tests write
    runtime files with it)."""
    return _HEADER.pack(MAGIC, VERSION, header.kind, HEADER_SIZE, header.pid, header.ppid,
                        header.flags, header.start_ns, header.period_ns, header.body_offset,
                        header.file_size, header.dropped, header.control, header.state,
                        header.clock.encode("ascii")[:31])


class RuntimeFile:
    """A runtime file read with pread, plus writes of the words the front end owns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as exc:
            raise ProftuiError(f"{path.name}: cannot open runtime file ({exc.strerror})") from None
        st = os.fstat(self.fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(self.fd)
            raise ProftuiError(f"{path.name}: not a regular file")
        self.size = st.st_size
        if self.size < HEADER_SIZE:
            os.close(self.fd)
            raise ProftuiError(f"{path.name}: truncated runtime file ({self.size} bytes)")

    def read(self, offset: int, length: int) -> bytes:
        """Exactly `length` bytes at `offset`; ProftuiError if the file is shorter now."""
        try:
            data = os.pread(self.fd, length, offset) if length else b""
        except OSError as exc:
            raise ProftuiError(f"{self.name}: cannot read ({exc.strerror})") from None
        if len(data) != length:
            raise ProftuiError(f"{self.name}: truncated (a read at {offset}+{length} found "
                               f"{len(data)} bytes)")
        return data

    def write(self, offset: int, data: bytes) -> bool:
        """Store `data` at `offset` (a word the front end owns); False if it failed."""
        try:
            return os.pwrite(self.fd, data, offset) == len(data)
        except OSError:
            return False  # no space for the page (it was never backed) or truncated

    def header(self, kind: int | None = None) -> FileHeader:
        return decode_header(self.read(0, HEADER_SIZE), self.name, kind, self.size)

    def set_paused(self, paused: bool) -> None:
        """Ask the runtime to stop (or restart) recording; it polls this word."""
        try:
            control = struct.unpack("<I", self.read(CONTROL_OFFSET, 4))[0]
        except ProftuiError:
            return  # truncated under us: nothing left to pause
        control = control | CONTROL_PAUSED if paused else control & ~CONTROL_PAUSED
        self.write(CONTROL_OFFSET, struct.pack("<I", control))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
