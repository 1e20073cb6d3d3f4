"""A Python twin of the attach helper's writer (csrc/attach/pt_attach_out.c): the exact
bytes of a stream's header and records, for the decoder's tests."""

from __future__ import annotations

import struct

from proftui.collectors.runtime.wire_attach import REC_COUNTS, REC_STACK, VERSION


def header(method: int = 2, pid: int = 1234, period_ns: int = 10_000_000,
           version: int = VERSION, magic: bytes = b"PTATTACH", flags: int = 3) -> bytes:
    """The stream's header."""
    return struct.pack("=8sIIIIQ", magic, version, method, pid, flags, period_ns)


def record(rtype: int, payload: bytes) -> bytes:
    """A record of type `rtype`: its header, then `payload` padded to 8 bytes."""
    payload += b"\0" * (-len(payload) % 8)
    return struct.pack("=II", rtype, 8 + len(payload)) + payload


def stack(sid: int, tid: int, ips: list[int], flags: int = 0) -> bytes:
    """A REC_STACK record: stack `sid` of thread `tid`, its addresses innermost first."""
    body = struct.pack("=IIII", sid, tid, flags, len(ips))
    body += struct.pack(f"={len(ips)}Q", *ips)
    return record(REC_STACK, body)


def counts(time_ns: int, *entries: tuple[int, int, int]) -> bytes:
    """A REC_COUNTS record: (stack id, samples, ns) entries at `time_ns`."""
    body = struct.pack("=Q", time_ns)
    for entry in entries:
        body += struct.pack("=IIQ", *entry)
    return record(REC_COUNTS, body)


def text(rtype: int, message: str) -> bytes:
    """A record of a NUL-terminated message (REC_WARN, REC_ERROR)."""
    return record(rtype, message.encode() + b"\0")
