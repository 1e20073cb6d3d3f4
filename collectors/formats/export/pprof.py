"""pprof export: the gzip-compressed `profile.proto` that `go tool pprof` reads.

The protobuf is encoded by hand (a few message types, no dependency).  Field
numbers follow github.com/google/pprof/proto/profile.proto:

    Profile   1 sample_type  2 sample  3 mapping  4 location  5 function
              6 string_table  9 time_nanos  10 duration_nanos
              11 period_type  12 period  13 comment  14 default_sample_type
    ValueType 1 type  2 unit                       (string table indexes)
    Sample    1 location_id (packed, leaf first)  2 value (packed, per sample_type)
    Mapping   1 id  2 memory_start  3 memory_limit  4 file_offset  5 filename
              6 build_id  7 has_functions  8 has_filenames  9 has_line_numbers
              10 has_inline_frames
    Location  1 id  2 mapping_id  3 address  4 line
    Line      1 function_id  2 line
    Function  1 id  2 name  3 system_name  4 filename  5 start_line

One sample per call-tree node with self cost, one location and one function
per proftui frame.  Every mapping says it already has functions, file names,
line numbers and inline frames, so pprof never tries to re-symbolize.
Values are int64: costs are rounded to integers in the metric's unit.
"""

from __future__ import annotations

import gzip

from proftui.collectors.model.profile import Profile

UNITS = {"ns": "nanoseconds", "count": "count", "bytes": "bytes"}

_VARINT, _LEN = 0, 2


def _varint(value: int) -> bytes:
    """Base-128 varint; negative int64 values as their 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field_number: int, wire_type: int) -> bytes:
    return _varint(field_number << 3 | wire_type)


def _int(field_number: int, value: int) -> bytes:
    """A varint field; zero is the proto3 default and is left out."""
    return _key(field_number, _VARINT) + _varint(value) if value else b""


def _bytes(field_number: int, payload: bytes) -> bytes:
    return _key(field_number, _LEN) + _varint(len(payload)) + payload


def _packed(field_number: int, values: list[int]) -> bytes:
    return _bytes(field_number, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    """The profile's string table; index 0 must be the empty string."""

    def __init__(self) -> None:
        self.table: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.table)
            self.table.append(text)
        return index


def encode_profile(profile: Profile) -> bytes:
    """The uncompressed profile.proto message for `profile`."""
    assert profile.tree is not None
    strings = _Strings()
    out = bytearray()
    for metric in profile.metrics:
        out += _bytes(1, _int(1, strings(metric.name)) +
                      _int(2, strings(UNITS.get(metric.unit, metric.unit))))

    for node in profile.tree.nodes():
        if not any(node.self_cost):
            continue
        path = node.path()
        path.reverse()  # pprof wants the leaf first
        values = [round(v) for v in node.self_cost]
        out += _bytes(2, _packed(1, [fid + 1 for fid in path]) + _packed(2, values))

    mapping_ids: dict[str, int] = {}
    limits: dict[str, int] = {}
    for frame in profile.frames:
        mapping_ids.setdefault(frame.module, len(mapping_ids) + 1)
        limits[frame.module] = max(limits.get(frame.module, 0), (frame.address or 0) + 1)
    build_ids = {f.module: f.build_id for f in profile.frames if f.build_id}
    for module, mapping_id in mapping_ids.items():
        out += _bytes(3, _int(1, mapping_id) + _int(3, limits[module])
                      + _int(5, strings(module)) + _int(6, strings(build_ids.get(module, "")))
                      + _int(7, 1) + _int(8, 1) + _int(9, 1) + _int(10, 1))

    for fid, frame in enumerate(profile.frames):
        line = _bytes(4, _int(1, fid + 1) + _int(2, frame.line or 0))
        out += _bytes(4, _int(1, fid + 1) + _int(2, mapping_ids[frame.module])
                      + _int(3, frame.address or 0) + line)
    for fid, frame in enumerate(profile.frames):
        name = frame.function or f"0x{frame.address or 0:x}"
        out += _bytes(5, _int(1, fid + 1) + _int(2, strings(name))
                      + _int(3, strings(frame.raw_name or name))
                      + _int(4, strings(frame.file or "")) + _int(5, frame.line or 0))

    meta = profile.meta
    tail = bytearray()
    if meta.start_time is not None:
        tail += _int(9, int(meta.start_time * 1e9))
        if meta.end_time is not None:
            tail += _int(10, int((meta.end_time - meta.start_time) * 1e9))
    if meta.period_ns and profile.metrics:
        first = profile.metrics[0]
        tail += _bytes(11, _int(1, strings("cpu" if first.name == "samples" else first.name))
                       + _int(2, strings("nanoseconds")))
        tail += _int(12, meta.period_ns)
    comments = [f"proftui {meta.mode} profile: {' '.join(meta.argv)}", *meta.warnings]
    tail += _packed(13, [strings(c) for c in comments])
    if profile.metrics:  # pprof would otherwise show the last sample type first
        tail += _int(14, strings(profile.metrics[0].name))
    # the string table goes last: every string above has been interned by now
    out += b"".join(_bytes(6, s.encode("utf-8", errors="replace")) for s in strings.table)
    out += tail
    return bytes(out)


def export_pprof(profile: Profile) -> bytes:
    """gzip-compressed profile.proto, as `go tool pprof` and pprof-format read it."""
    return gzip.compress(encode_profile(profile), compresslevel=6, mtime=0)
