"""Base-128 integers: DWARF's LEB128 (.debug_*, .eh_frame) and protobuf's varints.

An unsigned LEB128 and a protobuf varint are the same bytes, so there is one
decoder for both.  It lives here, with DWARF, because collectors.symbols may
not import collectors.formats while formats may import symbols:
collectors/formats/protobuf.py reads its varints through `read_uleb128`,
bounded to protobuf's 10 bytes, and words the errors for a pprof file.
"""

from __future__ import annotations


def read_uleb128(data: bytes, pos: int, max_bytes: int = 0) -> tuple[int, int]:
    """The unsigned LEB128 at `pos` and the position after it.

    Raises IndexError when the number runs past the end of `data`, so a
    truncated section ends a decoder cleanly instead of looping, and
    OverflowError when it is longer than `max_bytes` (0: no bound, as in DWARF).
    """
    result = shift = 0
    limit = 7 * max_bytes if max_bytes else -1
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift == limit:
            raise OverflowError(f"LEB128 number longer than {max_bytes} bytes")


def read_sleb128(data: bytes, pos: int) -> tuple[int, int]:
    """The signed LEB128 at `pos` and the position after it (IndexError as above)."""
    value, end = read_uleb128(data, pos)
    if data[end - 1] & 0x40:  # the sign bit of the last byte
        value -= 1 << (7 * (end - pos))
    return value, end
