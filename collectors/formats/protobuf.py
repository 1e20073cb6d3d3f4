"""pprof's `profile.proto` on the wire: the protobuf encoder, the decoder, the field numbers.

The pprof exporter (export/pprof.py) and importer (importers/pprof.py) share
this module; the messages are few and flat, so a hand-written codec replaces
the `protobuf` package and its generated module.

Field numbers follow github.com/google/pprof/proto/profile.proto, one
constant per field (Go's runtime/pprof names them the same way).  They are
plain ints rather than IntEnum members: the decoder compares them for every
field it reads, and an IntEnum lookup costs three times a global's.

Varints are decoded by the one base-128 reader, collectors/symbols/leb128.py
(a protobuf varint is an unsigned LEB128 of at most 10 bytes).
"""

from __future__ import annotations

from proftui.collectors.symbols.leb128 import read_uleb128

# Wire types
VARINT, I64, LEN, I32 = 0, 1, 2, 5
MAX_VARINT_BYTES = 10  # 64 bits, 7 a byte

# message Profile
PROFILE_SAMPLE_TYPE = 1  # repeated ValueType
PROFILE_SAMPLE = 2  # repeated Sample
PROFILE_MAPPING = 3  # repeated Mapping
PROFILE_LOCATION = 4  # repeated Location
PROFILE_FUNCTION = 5  # repeated Function
PROFILE_STRING_TABLE = 6  # repeated string; index 0 is ""
PROFILE_DROP_FRAMES = 7  # int64 (string table index)
PROFILE_KEEP_FRAMES = 8  # int64 (string table index)
PROFILE_TIME_NANOS = 9  # int64
PROFILE_DURATION_NANOS = 10  # int64
PROFILE_PERIOD_TYPE = 11  # ValueType
PROFILE_PERIOD = 12  # int64
PROFILE_COMMENT = 13  # repeated int64 (string table indexes)
PROFILE_DEFAULT_SAMPLE_TYPE = 14  # int64 (string table index)

# message ValueType
VALUE_TYPE_TYPE = 1  # int64 (string table index)
VALUE_TYPE_UNIT = 2  # int64 (string table index)

# message Sample
SAMPLE_LOCATION_ID = 1  # repeated uint64, leaf first
SAMPLE_VALUE = 2  # repeated int64, one per sample type

# message Mapping
MAPPING_ID = 1  # uint64
MAPPING_MEMORY_START = 2  # uint64
MAPPING_MEMORY_LIMIT = 3  # uint64
MAPPING_FILE_OFFSET = 4  # uint64
MAPPING_FILENAME = 5  # int64 (string table index)
MAPPING_BUILD_ID = 6  # int64 (string table index)
MAPPING_HAS_FUNCTIONS = 7  # bool
MAPPING_HAS_FILENAMES = 8  # bool
MAPPING_HAS_LINE_NUMBERS = 9  # bool
MAPPING_HAS_INLINE_FRAMES = 10  # bool

# message Location
LOCATION_ID = 1  # uint64
LOCATION_MAPPING_ID = 2  # uint64
LOCATION_ADDRESS = 3  # uint64
LOCATION_LINE = 4  # repeated Line, innermost (inlined) first

# message Line
LINE_FUNCTION_ID = 1  # uint64
LINE_LINE = 2  # int64

# message Function
FUNCTION_ID = 1  # uint64
FUNCTION_NAME = 2  # int64 (string table index)
FUNCTION_SYSTEM_NAME = 3  # int64 (string table index)
FUNCTION_FILENAME = 4  # int64 (string table index)
FUNCTION_START_LINE = 5  # int64

# Profile's fields and the wire types they may use (sniffing a raw, uncompressed file)
PROFILE_WIRE_TYPES = {
    PROFILE_SAMPLE_TYPE: {LEN}, PROFILE_SAMPLE: {LEN}, PROFILE_MAPPING: {LEN},
    PROFILE_LOCATION: {LEN}, PROFILE_FUNCTION: {LEN}, PROFILE_STRING_TABLE: {LEN},
    PROFILE_DROP_FRAMES: {VARINT}, PROFILE_KEEP_FRAMES: {VARINT},
    PROFILE_TIME_NANOS: {VARINT}, PROFILE_DURATION_NANOS: {VARINT},
    PROFILE_PERIOD_TYPE: {LEN}, PROFILE_PERIOD: {VARINT}, PROFILE_COMMENT: {VARINT, LEN},
    PROFILE_DEFAULT_SAMPLE_TYPE: {VARINT},
}

FieldValue = int | bytes  # a varint or fixed-width number, or a LEN field's bytes


class ProtobufError(ValueError):
    """The bytes are not well-formed protobuf."""


# -- encoding ----------------------------------------------------------------------------

def varint(value: int) -> bytes:
    """Base-128 varint; negative int64 values as their 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire: int) -> bytes:
    """A field's key: its number and wire type."""
    return varint(number << 3 | wire)


def int_field(number: int, value: int) -> bytes:
    """A varint field; zero is the proto3 default and is left out."""
    return key(number, VARINT) + varint(value) if value else b""


def len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a message, a string or packed numbers."""
    return key(number, LEN) + varint(len(payload)) + payload


def packed_field(number: int, values: list[int]) -> bytes:
    """A repeated integer field, packed; an empty list is left out."""
    return len_field(number, b"".join(varint(v) for v in values)) if values else b""


# -- decoding ----------------------------------------------------------------------------

def _varint_error(exc: IndexError | OverflowError) -> ProtobufError:
    """read_uleb128's error, worded for a protobuf reader."""
    if isinstance(exc, OverflowError):
        return ProtobufError(f"varint longer than {MAX_VARINT_BYTES} bytes")
    return ProtobufError("truncated varint")


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at `pos`."""
    try:
        return read_uleb128(data, pos, MAX_VARINT_BYTES)
    except (IndexError, OverflowError) as exc:
        raise _varint_error(exc) from None


def fields(data: bytes) -> list[tuple[int, int, FieldValue]]:
    """Every (field number, wire type, value) of one message; LEN values as bytes."""
    out: list[tuple[int, int, FieldValue]] = []
    pos = 0
    # read_uleb128 directly, its errors worded once for the whole message: this loop
    # reads every field of a file, and a wrapper call per varint would cost more.
    try:
        while pos < len(data):
            field_key, pos = read_uleb128(data, pos, MAX_VARINT_BYTES)
            number, wire = field_key >> 3, field_key & 7
            if number == 0:
                raise ProtobufError("field number 0")
            value: FieldValue
            if wire == VARINT:
                value, pos = read_uleb128(data, pos, MAX_VARINT_BYTES)
            elif wire == LEN:
                size, pos = read_uleb128(data, pos, MAX_VARINT_BYTES)
                if pos + size > len(data):
                    raise ProtobufError("truncated message")
                value, pos = data[pos:pos + size], pos + size
            elif wire in (I64, I32):
                size = 8 if wire == I64 else 4
                if pos + size > len(data):
                    raise ProtobufError("truncated message")
                value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
            else:
                raise ProtobufError(f"unsupported wire type {wire}")
            out.append((number, wire, value))
    except (IndexError, OverflowError) as exc:
        raise _varint_error(exc) from None
    return out


def ints(value: FieldValue) -> list[int]:
    """A repeated integer field's values: packed (LEN) or one varint."""
    if isinstance(value, int):
        return [value]
    values, pos = [], 0
    try:
        while pos < len(value):
            number, pos = read_uleb128(value, pos, MAX_VARINT_BYTES)
            values.append(number)
    except (IndexError, OverflowError) as exc:
        raise _varint_error(exc) from None
    return values


def signed(value: int) -> int:
    """int64 from its 64-bit two's complement varint."""
    return value - (1 << 64) if value >= 1 << 63 else value


def as_int(value: FieldValue) -> int:
    """An integer field's value (ProtobufError when it came as bytes)."""
    if not isinstance(value, int):
        raise ProtobufError("expected an integer field")
    return value


def as_bytes(value: FieldValue) -> bytes:
    """A message or string field's bytes (ProtobufError when it came as a number)."""
    if not isinstance(value, bytes):
        raise ProtobufError("expected a message field")
    return value
