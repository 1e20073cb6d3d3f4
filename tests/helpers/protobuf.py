"""Protobuf messages read back in tests, by field number (profile.proto's numbers are
written out in the tests, so a wrong constant in the encoder fails)."""

from __future__ import annotations

from collections import defaultdict

from proftui.collectors.formats.protobuf import LEN, VARINT, fields


def decode(data: bytes) -> dict[int, list]:
    """field number -> list of values (ints, or bytes for length-delimited fields)."""
    grouped: dict[int, list] = defaultdict(list)
    for number, wire, value in fields(data):
        assert wire in (VARINT, LEN), f"unexpected wire type {wire}"
        grouped[number].append(value)
    return grouped
