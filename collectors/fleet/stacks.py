"""Stable 64-bit hashes of symbolized stacks, and their rows in the stacks table.

A stack is its frames (outermost first: function, module, build-id, file, line,
address, raw name, inlined) plus the code site of its leaf (module, instruction
address, enclosing function, file:line), so a fleet profile keeps line and address
costs.  The hash is blake2b over a canonical encoding: every host that saw the same
stack computes the same value, so the server stores it once.  Each frame is encoded
and hashed once per process (`StackHasher` caches by Frame); a stack's hash chains
its frames' digests from the outermost down, then adds the site.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from proftui.collectors.model.profile import CodeSite, Frame

# A leaf's code site: (module, link-time address, CodeSite), as StackProfile keeps it.
Site = tuple[str, int, CodeSite]


@dataclass(frozen=True, slots=True)
class StackRecord:
    """One distinct stack: what the stacks table holds for its hash."""

    frames: tuple[Frame, ...]  # outermost first
    site: Site | None = None


def _frame_bytes(frame: Frame) -> bytes:
    fields = (frame.function, frame.module, frame.build_id,
              "\0" if frame.file is None else frame.file,
              "" if frame.line is None else str(frame.line),
              "" if frame.address is None else str(frame.address),
              frame.raw_name, "1" if frame.inlined else "0")
    return "\x1f".join(fields).encode("utf-8", "surrogateescape")


def _site_bytes(site: Site | None) -> bytes:
    if site is None:
        return b""
    module, address, code = site
    fields = (module, str(address), "" if code.function is None else str(code.function),
              "\0" if code.file is None else code.file,
              "" if code.line is None else str(code.line))
    return b"\x1d" + "\x1f".join(fields).encode("utf-8", "surrogateescape")


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=8).digest()


class StackHasher:
    """Hashes stacks; each distinct Frame is encoded once."""

    __slots__ = ("_frames",)

    def __init__(self) -> None:
        self._frames: dict[Frame, bytes] = {}

    def frame_digest(self, frame: Frame) -> bytes:
        found = self._frames.get(frame)
        if found is None:
            found = self._frames[frame] = _digest(_frame_bytes(frame))
        return found

    def stack(self, frames: Sequence[Frame], site: Site | None) -> int:
        """The stack's hash, an unsigned 64-bit integer (ClickHouse UInt64)."""
        return self.stack_of_digests([self.frame_digest(f) for f in frames], site)

    @staticmethod
    def stack_of_digests(digests: Sequence[bytes], site: Site | None) -> int:
        """`stack` for frames whose digests the caller has: a chain from the outermost
        frame down (so a tree walk extends its parent's prefix), then the leaf site."""
        prefix = b""
        for d in digests:
            prefix = _digest(prefix + d)
        return StackHasher.finish(prefix, site)

    @staticmethod
    def extend(prefix: bytes, frame_digest: bytes) -> bytes:
        """The chain value of a path one frame longer than `prefix`'s."""
        return _digest(prefix + frame_digest)

    @staticmethod
    def finish(prefix: bytes, site: Site | None) -> int:
        return int.from_bytes(_digest(prefix + _site_bytes(site)), "little")


def series_hash(labels: dict[str, str]) -> int:
    """The fingerprint of a label set (order does not matter)."""
    data = "\x1e".join(f"{k}\x1f{v}" for k, v in sorted(labels.items()))
    return int.from_bytes(_digest(data.encode("utf-8", "surrogateescape")), "little")
