"""LEB128, the variable-length integers of DWARF (.debug_*, .eh_frame)."""

from __future__ import annotations


def read_leb128(data: bytes, pos: int, signed: bool = False) -> tuple[int, int]:
    """The (U|S)LEB128 at `pos` and the position after it.

    Raises IndexError when the number runs past the end of `data`, so a
    truncated section ends a decoder cleanly instead of looping.
    """
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    if signed and byte & 0x40:
        result -= 1 << shift
    return result, pos
