"""Decoder of the runtime's common file header (csrc/common/proftui_wire.h, docs/wire-format.md).

Kind-specific areas are decoded by `wire_hook.py` and `wire_sampler.py`; this
module checks the parts every runtime file shares and maps files read-only.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from proftui.collectors.errors import ProftuiError

MAGIC = b"PROFTUI\0"
VERSION = 1
HEADER_SIZE = 128
KIND_HOOK = 1
KIND_SAMPLER = 2
KIND_ATTACH = 3
KIND_NAMES = {KIND_HOOK: "hook", KIND_SAMPLER: "sampler", KIND_ATTACH: "attach"}

FLAG_COUNT_ONLY = 1 << 0
FLAG_WALL_CLOCK = 1 << 1
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


def decode_header(data: bytes | mmap.mmap | memoryview, name: str = "runtime file",
                  kind: int | None = None) -> FileHeader:
    """Check and decode the header; ProftuiError names what is wrong."""
    if len(data) < HEADER_SIZE:
        raise ProftuiError(f"{name}: truncated ({len(data)} bytes, header needs {HEADER_SIZE})")
    (magic, version, file_kind, header_size, pid, ppid, flags, start_ns, period_ns,
     body_offset, file_size, dropped, control, state, clock) = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise ProftuiError(f"{name}: not a proftui runtime file (bad magic)")
    if version != VERSION:
        raise ProftuiError(
            f"{name}: written by runtime format version {version}, this proftui reads "
            f"version {VERSION}; reinstall so the runtime and front end match")
    if header_size != HEADER_SIZE:
        raise ProftuiError(f"{name}: corrupt header (header_size {header_size})")
    if kind is not None and file_kind != kind:
        raise ProftuiError(f"{name}: expected a {KIND_NAMES.get(kind, kind)} file, "
                           f"found kind {file_kind}")
    if not (HEADER_SIZE <= body_offset <= file_size <= len(data)):
        raise ProftuiError(f"{name}: corrupt header (body at {body_offset}, size {file_size}, "
                           f"{len(data)} bytes present)")
    return FileHeader(file_kind, pid, ppid, flags, start_ns, period_ns, body_offset, file_size,
                      dropped, control, state, clock.split(b"\0", 1)[0].decode("ascii", "replace"))


def encode_header(header: FileHeader) -> bytes:
    """Bytes of `header` exactly as the C runtime writes them (tests mirror the writer)."""
    return _HEADER.pack(MAGIC, VERSION, header.kind, HEADER_SIZE, header.pid, header.ppid,
                        header.flags, header.start_ns, header.period_ns, header.body_offset,
                        header.file_size, header.dropped, header.control, header.state,
                        header.clock.encode("ascii")[:31])


class RuntimeFile:
    """A runtime file mapped read-only, plus a writable view of the control word."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ProftuiError(f"{path.name}: cannot open runtime file ({exc.strerror})") from None
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_SIZE:
                raise ProftuiError(f"{path.name}: truncated runtime file ({size} bytes)")
            self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)

    def header(self, kind: int | None = None) -> FileHeader:
        return decode_header(self.map, self.path.name, kind)

    def set_paused(self, paused: bool) -> None:
        """Ask the runtime to stop (or restart) recording; it polls this word."""
        control = struct.unpack_from("<I", self.map, CONTROL_OFFSET)[0]
        control = control | CONTROL_PAUSED if paused else control & ~CONTROL_PAUSED
        struct.pack_into("<I", self.map, CONTROL_OFFSET, control)

    def close(self) -> None:
        self.map.close()
