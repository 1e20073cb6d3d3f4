"""Recover the caller of a leaf function that set up no frame pointer.

Frame-pointer walks (the kernel's PERF_SAMPLE_CALLCHAIN, or ours under
ptrace) start from %rbp.  GCC at -O2 gives leaf functions no frame even with
-fno-omit-frame-pointer, so %rbp still points at the caller's frame and the
walk skips the caller: main -> att_hot instead of main -> att_middle ->
att_hot.  The helper sends the words at the stack pointer with each sample;
the first of them that is a return address (inside mapped code, right after
a call instruction) is the leaf's return address.  If it is already the
walk's second entry, the leaf had a frame and nothing changes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable


def follows_call(code: bytes) -> bool:
    """Whether the 7 bytes before an address end with an x86-64 call instruction."""
    if len(code) < 7:
        return False
    if code[-5] == 0xE8:  # call rel32
        return True
    # call through a register or memory operand: ff /2, with 0-5 bytes after ModRM
    return any(code[-k] == 0xFF and (code[-k + 1] & 0x38) == 0x10 for k in (2, 3, 6, 7))


class LeafFixer:
    """Inserts the missing caller of frameless leaves, reading code from /proc/PID/mem."""

    def __init__(self, pid: int, resolve: Callable[[int], object | None]) -> None:
        self._resolve = resolve
        self._known: dict[int, bool] = {}  # address -> is a return address
        self._mem: int | None = None
        with contextlib.suppress(OSError):
            self._mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)

    @property
    def available(self) -> bool:
        return self._mem is not None

    def close(self) -> None:
        if self._mem is not None:
            os.close(self._mem)
            self._mem = None

    def is_return_address(self, address: int) -> bool:
        known = self._known.get(address)
        if known is None:
            known = False
            if address > 4096 and self._mem is not None and self._resolve(address) is not None:
                with contextlib.suppress(OSError, OverflowError):
                    known = follows_call(os.pread(self._mem, 7, address - 7))
            self._known[address] = known
        return known

    def fix(self, ips: tuple[int, ...], stack: tuple[int, ...]) -> tuple[int, ...]:
        """`ips` with the leaf's return address inserted when the walk skipped it."""
        if not ips or not stack or self._mem is None:
            return ips
        for word in stack:
            if self.is_return_address(word):
                if len(ips) > 1 and word == ips[1]:
                    return ips
                return (ips[0], word, *ips[1:])
        return ips
