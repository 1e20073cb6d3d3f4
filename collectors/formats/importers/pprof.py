"""Import pprof profiles: `profile.proto`, gzip-compressed or raw.

These are what proftui's own `export -f pprof` writes, what Go's runtime/pprof
and `go tool pprof -proto` write, and what perf_data_converter makes of a
perf.data.  The protobuf is read with collectors/formats/protobuf.py, which
the exporter writes with too, and which names profile.proto's field numbers.

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
from proftui.collectors.formats import protobuf as pb
from proftui.collectors.formats.importers.files import read_profile
from proftui.collectors.model.profile import (
    CodeSite,
    Frame,
    Metric,
    Profile,
    ProfileMeta,
    metric_named,
)

MAX_DECOMPRESSED = 1 << 31  # a gzip bomb must not take the machine's memory

# pprof unit -> (model unit, factor to it)
_UNITS = {
    "nanoseconds": ("ns", 1.0), "microseconds": ("ns", 1e3), "milliseconds": ("ns", 1e6),
    "seconds": ("ns", 1e9), "bytes": ("bytes", 1.0), "kilobytes": ("bytes", 1024.0),
    "megabytes": ("bytes", 1024.0 ** 2), "gigabytes": ("bytes", 1024.0 ** 3),
}


class PprofError(pb.ProtobufError):
    """Well-formed protobuf that is not a well-formed profile.proto."""


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


def _numbers(data: bytes, *numbers: int) -> list[int]:
    """The integer fields `numbers` of a flat message, in that order: 0 when absent,
    the last occurrence when repeated (as protobuf merges a message's fields)."""
    values = [0] * len(numbers)
    for number, _wire, value in pb.fields(data):
        if number in numbers:
            values[numbers.index(number)] = pb.as_int(value)
    return values


def _value_type(data: bytes) -> tuple[int, int]:
    kind, unit = _numbers(data, pb.VALUE_TYPE_TYPE, pb.VALUE_TYPE_UNIT)
    return kind, unit


def decode(data: bytes) -> Decoded:
    """Decode an uncompressed profile.proto (ProtobufError, or its PprofError, when
    malformed)."""
    out = Decoded()
    for number, _wire, value in pb.fields(data):
        if number == pb.PROFILE_SAMPLE_TYPE:
            out.sample_types.append(_value_type(pb.as_bytes(value)))
        elif number == pb.PROFILE_SAMPLE:
            locations: list[int] = []
            values: list[int] = []
            for n, _w, v in pb.fields(pb.as_bytes(value)):
                if n == pb.SAMPLE_LOCATION_ID:
                    locations += pb.ints(v)
                elif n == pb.SAMPLE_VALUE:
                    values += [pb.signed(x) for x in pb.ints(v)]
            out.samples.append((locations, values))
        elif number == pb.PROFILE_MAPPING:
            mapping_id, start, filename, build_id = _numbers(
                pb.as_bytes(value), pb.MAPPING_ID, pb.MAPPING_MEMORY_START, pb.MAPPING_FILENAME,
                pb.MAPPING_BUILD_ID)
            out.mappings[mapping_id] = _Mapping(start, filename, build_id)
        elif number == pb.PROFILE_LOCATION:
            location, location_id = _Location(), 0
            for n, _w, v in pb.fields(pb.as_bytes(value)):
                if n == pb.LOCATION_ID:
                    location_id = pb.as_int(v)
                elif n == pb.LOCATION_MAPPING_ID:
                    location.mapping_id = pb.as_int(v)
                elif n == pb.LOCATION_ADDRESS:
                    location.address = pb.as_int(v)
                elif n == pb.LOCATION_LINE:
                    function_id, line = _numbers(pb.as_bytes(v), pb.LINE_FUNCTION_ID,
                                                 pb.LINE_LINE)
                    location.lines.append((function_id, pb.signed(line)))
            if location_id == 0:
                raise PprofError("location without an id")
            out.locations[location_id] = location
        elif number == pb.PROFILE_FUNCTION:
            function_id, name, system_name, filename, start_line = _numbers(
                pb.as_bytes(value), pb.FUNCTION_ID, pb.FUNCTION_NAME, pb.FUNCTION_SYSTEM_NAME,
                pb.FUNCTION_FILENAME, pb.FUNCTION_START_LINE)
            if function_id == 0:
                raise PprofError("function without an id")
            out.functions[function_id] = _Function(name, system_name, filename,
                                                   pb.signed(start_line))
        elif number == pb.PROFILE_STRING_TABLE:
            out.strings.append(pb.as_bytes(value).decode("utf-8", errors="surrogateescape"))
        elif number == pb.PROFILE_TIME_NANOS:
            out.time_nanos = pb.signed(pb.as_int(value))
        elif number == pb.PROFILE_DURATION_NANOS:
            out.duration_nanos = pb.signed(pb.as_int(value))
        elif number == pb.PROFILE_PERIOD_TYPE:
            out.period_type = _value_type(pb.as_bytes(value))
        elif number == pb.PROFILE_PERIOD:
            out.period = pb.signed(pb.as_int(value))
        elif number == pb.PROFILE_COMMENT:
            out.comments += pb.ints(value)
        elif number == pb.PROFILE_DEFAULT_SAMPLE_TYPE:
            out.default_sample_type = pb.as_int(value)
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
            field_key, pos = pb.read_varint(head, pos)
            number, wire = field_key >> 3, field_key & 7
            if wire not in pb.PROFILE_WIRE_TYPES.get(number, set()):
                return False
            if wire == pb.VARINT:
                _value, pos = pb.read_varint(head, pos)
            else:
                size, pos = pb.read_varint(head, pos)
                value_type = number in (pb.PROFILE_SAMPLE_TYPE, pb.PROFILE_PERIOD_TYPE) \
                    and pos + size <= len(head)
                if value_type and any(  # a ValueType: two varints
                        n not in (pb.VALUE_TYPE_TYPE, pb.VALUE_TYPE_UNIT) or w != pb.VARINT
                        for n, w, _v in pb.fields(head[pos:pos + size])):
                    return False
                pos += size
            seen += 1
    except pb.ProtobufError:
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
    metrics = [metric_named(names[i], units[i][0]) for i in order]
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
        data = read_profile(path)
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
    except pb.ProtobufError as exc:  # PprofError too
        raise ProftuiError(f"{path}: corrupt or truncated pprof profile: {exc}") from None
    except MemoryError:
        raise ProftuiError(f"{path}: pprof profile too big for memory") from None
    if not profile.tree or not profile.tree.root.children:
        raise ProftuiError(f"{path}: pprof profile has no samples")
    return profile
