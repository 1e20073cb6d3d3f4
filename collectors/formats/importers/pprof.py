"""Import pprof profiles: `profile.proto`, gzip-compressed or raw.

These are what proftui's own `export -f pprof` writes, what Go's runtime/pprof
and `go tool pprof -proto` write, and what perf_data_converter makes of a
perf.data.  The protobuf is decoded by a small hand-written reader (the
message types are few and flat; the `protobuf` package would add a
dependency and a generated module for about 100 lines of decoding).  Field
numbers follow github.com/google/pprof/proto/profile.proto (see the table in
collectors/formats/export/pprof.py).

Mapping into the model: every sample type becomes a metric (the default
sample type first, so the views open on it; time units scaled to ns, size
units to bytes); a Location's Lines are an inline chain, innermost first, so
the outermost Line is the real function and the others are `inlined` frames;
a Function's mapping file is the frame's module.  A sample's leaf line gets
the sample's values as a line cost, and, when the mapping starts at 0
(link-time addresses, as proftui writes), its leaf address an address cost.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CodeSite, Frame, Metric, Profile, ProfileMeta

MAX_DECOMPRESSED = 1 << 31  # a gzip bomb must not take the machine's memory
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

# pprof unit -> (model unit, factor to it)
_UNITS = {
    "nanoseconds": ("ns", 1.0), "microseconds": ("ns", 1e3), "milliseconds": ("ns", 1e6),
    "seconds": ("ns", 1e9), "bytes": ("bytes", 1.0), "kilobytes": ("bytes", 1024.0),
    "megabytes": ("bytes", 1024.0 ** 2), "gigabytes": ("bytes", 1024.0 ** 3),
}
# Profile's fields and the wire types they may use (sniffing a raw, uncompressed file)
_PROFILE_FIELDS = {1: {_LEN}, 2: {_LEN}, 3: {_LEN}, 4: {_LEN}, 5: {_LEN}, 6: {_LEN},
                   7: {_VARINT}, 8: {_VARINT}, 9: {_VARINT}, 10: {_VARINT}, 11: {_LEN},
                   12: {_VARINT}, 13: {_VARINT, _LEN}, 14: {_VARINT}}


class PprofError(ValueError):
    """The bytes are not a well-formed profile.proto."""


# -- protobuf wire format ----------------------------------------------------------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at `pos`."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise PprofError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise PprofError("varint longer than 10 bytes")


def _fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """Every (field number, wire type, value) of one message; LEN values as bytes."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise PprofError("field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise PprofError("truncated message")
            value, pos = data[pos:pos + size], pos + size
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if pos + size > len(data):
                raise PprofError("truncated message")
            value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
        else:
            raise PprofError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _ints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field's values: packed (LEN) or one varint."""
    if isinstance(value, int):
        return [value]
    values, pos = [], 0
    while pos < len(value):
        number, pos = _varint(value, pos)
        values.append(number)
    return values


def _signed(value: int) -> int:
    """int64 from its 64-bit two's complement varint."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _int(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise PprofError("expected an integer field")
    return value


def _msg(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise PprofError("expected a message field")
    return value


# -- the messages ------------------------------------------------------------------------

@dataclass
class _Location:
    mapping_id: int = 0
    address: int = 0
    lines: list[tuple[int, int]] = field(default_factory=list)  # (function id, line)


@dataclass
class _Function:
    name: int = 0
    system_name: int = 0
    filename: int = 0
    start_line: int = 0


@dataclass
class _Mapping:
    memory_start: int = 0
    filename: int = 0
    build_id: int = 0


@dataclass
class Decoded:
    """A profile.proto message, with string indexes still unresolved."""

    sample_types: list[tuple[int, int]] = field(default_factory=list)
    samples: list[tuple[list[int], list[int]]] = field(default_factory=list)
    mappings: dict[int, _Mapping] = field(default_factory=dict)
    locations: dict[int, _Location] = field(default_factory=dict)
    functions: dict[int, _Function] = field(default_factory=dict)
    strings: list[str] = field(default_factory=list)
    time_nanos: int = 0
    duration_nanos: int = 0
    period_type: tuple[int, int] = (0, 0)
    period: int = 0
    comments: list[int] = field(default_factory=list)
    default_sample_type: int = 0

    def string(self, index: int) -> str:
        if not 0 <= index < len(self.strings):
            raise PprofError(f"string index {index} out of range")
        return self.strings[index]


def _value_type(data: bytes) -> tuple[int, int]:
    kind = unit = 0
    for number, _wire, value in _fields(data):
        if number == 1:
            kind = _int(value)
        elif number == 2:
            unit = _int(value)
    return kind, unit


def decode(data: bytes) -> Decoded:
    """Decode an uncompressed profile.proto (PprofError when malformed)."""
    out = Decoded()
    for number, wire, value in _fields(data):
        if number == 1:
            out.sample_types.append(_value_type(_msg(value)))
        elif number == 2:
            locations: list[int] = []
            values: list[int] = []
            for n, w, v in _fields(_msg(value)):
                if n == 1:
                    locations += _ints(w, v)
                elif n == 2:
                    values += [_signed(x) for x in _ints(w, v)]
            out.samples.append((locations, values))
        elif number == 3:
            mapping, mapping_id = _Mapping(), 0
            for n, _w, v in _fields(_msg(value)):
                if n == 1:
                    mapping_id = _int(v)
                elif n == 2:
                    mapping.memory_start = _int(v)
                elif n == 5:
                    mapping.filename = _int(v)
                elif n == 6:
                    mapping.build_id = _int(v)
            out.mappings[mapping_id] = mapping
        elif number == 4:
            location, location_id = _Location(), 0
            for n, _w, v in _fields(_msg(value)):
                if n == 1:
                    location_id = _int(v)
                elif n == 2:
                    location.mapping_id = _int(v)
                elif n == 3:
                    location.address = _int(v)
                elif n == 4:
                    function_id = line = 0
                    for ln, _lw, lv in _fields(_msg(v)):
                        if ln == 1:
                            function_id = _int(lv)
                        elif ln == 2:
                            line = _signed(_int(lv))
                    location.lines.append((function_id, line))
            if location_id == 0:
                raise PprofError("location without an id")
            out.locations[location_id] = location
        elif number == 5:
            function, function_id = _Function(), 0
            for n, _w, v in _fields(_msg(value)):
                if n == 1:
                    function_id = _int(v)
                elif n == 2:
                    function.name = _int(v)
                elif n == 3:
                    function.system_name = _int(v)
                elif n == 4:
                    function.filename = _int(v)
                elif n == 5:
                    function.start_line = _signed(_int(v))
            if function_id == 0:
                raise PprofError("function without an id")
            out.functions[function_id] = function
        elif number == 6:
            out.strings.append(_msg(value).decode("utf-8", errors="surrogateescape"))
        elif number == 9:
            out.time_nanos = _signed(_int(value))
        elif number == 10:
            out.duration_nanos = _signed(_int(value))
        elif number == 11:
            out.period_type = _value_type(_msg(value))
        elif number == 12:
            out.period = _signed(_int(value))
        elif number == 13:
            out.comments += _ints(wire, value)
        elif number == 14:
            out.default_sample_type = _int(value)
    if not out.strings or out.strings[0] != "":
        raise PprofError("string table does not start with the empty string")
    return out


# -- detection ---------------------------------------------------------------------------

def sniff(head: bytes) -> bool:
    """Whether `head` (the first bytes of a file, or of its gunzipped content) starts
    like a profile.proto: known Profile fields with their wire types, the first one
    whole or cut only by the end of `head`."""
    pos, seen = 0, 0
    try:
        while pos < len(head) and seen < 4:
            key, pos = _varint(head, pos)
            number, wire = key >> 3, key & 7
            if wire not in _PROFILE_FIELDS.get(number, set()):
                return False
            if wire == _VARINT:
                _value, pos = _varint(head, pos)
            else:
                size, pos = _varint(head, pos)
                value_type = number in (1, 11) and pos + size <= len(head)
                if value_type and any(n not in (1, 2) or w != _VARINT  # two varints
                                      for n, w, _v in _fields(head[pos:pos + size])):
                    return False
                pos += size
            seen += 1
    except PprofError:
        return seen > 0 and pos >= len(head)  # cut by the end of head, not malformed
    return seen > 0


def gunzip_head(head: bytes, size: int = 256) -> bytes:
    """The first `size` bytes of gzip data `head` (what can be decompressed of them)."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, size)
    except zlib.error:
        return b""


# -- into the model ----------------------------------------------------------------------

def _metrics(decoded: Decoded) -> tuple[list[Metric], list[float], list[int]]:
    """Metrics, their scale factors and their order (default sample type first)."""
    names: list[str] = []
    units: list[tuple[str, float]] = []
    for kind, unit in decoded.sample_types:
        name = decoded.string(kind) or "samples"
        unit_name = decoded.string(unit)
        units.append(_UNITS.get(unit_name, ("count", 1.0)))
        base, n = name, 2
        while name in names:  # metric names must be unique
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    order = list(range(len(names)))
    if decoded.default_sample_type:
        default = decoded.string(decoded.default_sample_type)
        if default in names:
            first = names.index(default)
            order = [first, *[i for i in order if i != first]]
    metrics = [Metric(names[i], units[i][0]) for i in order]
    return metrics, [units[i][1] for i in order], order


def to_profile(decoded: Decoded, source: str) -> Profile:
    """The Profile of a decoded pprof message (PprofError on dangling references)."""
    if not decoded.sample_types:
        raise PprofError("no sample types")
    metrics, scales, order = _metrics(decoded)
    period_ns = None
    if decoded.period > 0:
        _unit, factor = _UNITS.get(decoded.string(decoded.period_type[1]), ("", 0.0))
        period_ns = int(decoded.period * factor) if _unit == "ns" else None
    comments = [decoded.string(i) for i in decoded.comments]
    argv: list[str] = []
    warnings = [f"imported from pprof profile {source}"]
    for comment in comments:
        head, sep, rest = comment.partition(" profile: ")
        if not argv and sep and head.startswith("proftui "):
            argv = rest.split()  # proftui's export names the profiled command this way
        else:
            warnings.append(comment)
    start = decoded.time_nanos / 1e9 if decoded.time_nanos else None
    end = start + decoded.duration_nanos / 1e9 if start and decoded.duration_nanos else None
    meta = ProfileMeta(mode="import", argv=argv, period_ns=period_ns, start_time=start,
                       end_time=end, clock="pprof", warnings=warnings)
    profile = Profile(meta, tuple(metrics))
    assert profile.tree is not None
    n_types = len(decoded.sample_types)

    modules = {mid: (decoded.string(m.filename), decoded.string(m.build_id))
               for mid, m in decoded.mappings.items()}
    frame_ids: dict[tuple[int, int, bool], int] = {}

    def frame_id(function_id: int, mapping_id: int, inlined: bool) -> int:
        key = (function_id, mapping_id, inlined)
        found = frame_ids.get(key)
        if found is None:
            function = decoded.functions.get(function_id)
            if function is None:
                raise PprofError(f"line refers to unknown function {function_id}")
            module, build_id = modules.get(mapping_id, ("", ""))
            name = decoded.string(function.name) or decoded.string(function.system_name)
            raw = decoded.string(function.system_name)
            frame = Frame(function=name or f"function {function_id}", module=module,
                          file=decoded.string(function.filename) or None,
                          line=function.start_line or None,
                          raw_name=raw if raw != name else "", build_id=build_id,
                          inlined=inlined)
            found = frame_ids[key] = profile.frames.intern(frame)
        return found

    location_frames: dict[int, list[int]] = {}  # location id -> frame ids, outermost first

    def frames_of(location_id: int) -> list[int]:
        found = location_frames.get(location_id)
        if found is None:
            location = decoded.locations.get(location_id)
            if location is None:
                raise PprofError(f"sample refers to unknown location {location_id}")
            if location.lines:
                last = len(location.lines) - 1
                found = [frame_id(fid, location.mapping_id, i != last)
                         for i, (fid, _line) in reversed(list(enumerate(location.lines)))]
            else:  # not symbolized: the address is all there is
                module = modules.get(location.mapping_id, ("", ""))[0]
                found = [profile.frames.intern(Frame(f"0x{location.address:x}", module=module,
                                                     address=location.address))]
            location_frames[location_id] = found
        return found

    for location_ids, raw_values in decoded.samples:
        if len(raw_values) != n_types:
            raise PprofError(f"a sample has {len(raw_values)} values for {n_types} sample types")
        values = [raw_values[i] * scales[k] for k, i in enumerate(order)]
        stack: list[int] = []
        for location_id in reversed(location_ids):  # pprof lists the leaf first
            stack += frames_of(location_id)
        profile.tree.add_stack(stack, values)
        if not location_ids:
            continue
        leaf = decoded.locations[location_ids[0]]
        if leaf.lines:
            function = decoded.functions[leaf.lines[0][0]]
            file, line = decoded.string(function.filename), leaf.lines[0][1]
            if file and line > 0:
                cost = profile.line_costs.setdefault((file, line), [0.0] * len(values))
                for i, value in enumerate(values):
                    cost[i] += value
        mapping = decoded.mappings.get(leaf.mapping_id)
        if mapping is not None and mapping.memory_start == 0 and leaf.address:
            where = (modules[leaf.mapping_id][0], leaf.address)
            cost = profile.address_costs.setdefault(where, [0.0] * len(values))
            for i, value in enumerate(values):
                cost[i] += value
            if where not in profile.address_sites and leaf.lines:
                function = decoded.functions[leaf.lines[0][0]]
                profile.address_sites[where] = CodeSite(
                    None, decoded.string(function.filename) or None, leaf.lines[0][1] or None)
    return profile.finalize()


def load_pprof(path: Path, data: bytes | None = None) -> Profile:
    """Read a pprof profile (gzip'd or raw profile.proto) into a Profile (ProftuiError
    with one line when it is corrupt, truncated or empty)."""
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
    if data.startswith(b"\x1f\x8b"):
        try:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = inflater.decompress(data, MAX_DECOMPRESSED)
            if inflater.unconsumed_tail:
                raise ProftuiError(f"{path}: pprof profile larger than "
                                   f"{MAX_DECOMPRESSED >> 30} GiB uncompressed")
            if not inflater.eof:
                raise ProftuiError(f"{path}: truncated pprof profile (gzip data ends early)")
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise ProftuiError(f"{path}: corrupt pprof profile (bad gzip data: {exc})") \
                from None
        data = raw
    try:
        profile = to_profile(decode(data), str(path))
    except PprofError as exc:
        raise ProftuiError(f"{path}: corrupt or truncated pprof profile: {exc}") from None
    except MemoryError:
        raise ProftuiError(f"{path}: pprof profile too big for memory") from None
    if not profile.tree or not profile.tree.root.children:
        raise ProftuiError(f"{path}: pprof profile has no samples")
    return profile
