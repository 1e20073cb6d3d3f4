"""The protobuf reader's errors, and the base-128 decoder it shares with DWARF."""

from __future__ import annotations

import pytest
from proftui.collectors.formats.protobuf import (
    ProtobufError,
    fields,
    ints,
    len_field,
    read_varint,
    varint,
)
from proftui.collectors.symbols.leb128 import read_sleb128, read_uleb128


@pytest.mark.parametrize(("data", "message"), [
    (b"\x08", "truncated varint"),  # field 1, varint, no value
    (b"\x08" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    (b"\x0b", "unsupported wire type 3"),  # a group: not in proto3
    (b"\x12\x05ab", "truncated message"),
    (b"\x00\x00", "field number 0"),
])
def test_malformed_messages_are_named(data: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        fields(data)


def test_varint_errors_are_named_wherever_read() -> None:
    with pytest.raises(ProtobufError, match="truncated varint"):
        read_varint(b"\x80", 0)
    with pytest.raises(ProtobufError, match="longer than 10 bytes"):
        ints(b"\x80" * 11)
    assert read_varint(b"\xff" * 9 + b"\x01", 0) == ((1 << 64) - 1, 10)  # 10 bytes: fine


def test_fields_read_what_the_encoder_writes() -> None:
    message = varint(1 << 3) + varint(300) + len_field(2, varint(5) + varint(2**63))
    assert fields(message) == [(1, 0, 300), (2, 2, b"\x05" + varint(2**63))]
    assert ints(fields(message)[1][2]) == [5, 2**63]


def test_dwarf_leb128_is_the_same_decoder() -> None:
    """DWARF's examples (DWARF 5, section 7.6): unsigned, signed, and no length bound."""
    assert read_uleb128(b"\xe5\x8e\x26", 0) == (624485, 3)
    assert read_sleb128(b"\x7f", 0) == (-1, 1)
    assert read_sleb128(b"\x80\x7f", 0) == (-128, 2)
    assert read_sleb128(b"\xc0\xbb\x78", 0) == (-123456, 3)
    assert read_uleb128(b"\x80" * 12 + b"\x01", 0) == (1 << 84, 13)
    with pytest.raises(IndexError):
        read_uleb128(b"\x80", 0)
