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

Samples come from the call tree's nodes with self cost (paths deeper than
`paths.EXPORT_MAX_DEPTH` end in one "calls deeper" pseudo function).  A function and the
frames the compiler inlined into it share one Location whose Lines list the
inline chain, innermost first (pprof's convention).  A leaf's self cost is
split over the instruction addresses its function was charged at collection
time (`Profile.address_costs`), one Location per address whose innermost Line
carries that instruction's source line, so `go tool pprof -list` puts the
cost on the lines that took it.  A function's inlined copies and its body are
one pprof Function.  Every mapping says it already has functions, file names,
line numbers and inline frames, so pprof never tries to re-symbolize.
Values are int64: costs are rounded to integers in the metric's unit, with
the rounding of a split carried so a node's parts add up to its own value.

Heap profiles get the sample types Go writes for heap profiles, in Go's order
(alloc_objects/count, alloc_space/bytes, inuse_objects/count,
inuse_space/bytes; default inuse_space), each from the proftui metric that
means it (`HEAP_SAMPLE_TYPES`); those the profile cannot fill are left out
and named in a comment, and the other heap metrics follow under their own names.
"""

from __future__ import annotations

import gzip

from proftui.collectors.formats.export.paths import CUT_LABEL, costed_paths
from proftui.collectors.model.lines import function_addresses
from proftui.collectors.model.profile import HEAP_METRICS, LIVE_ALLOCS, CallNode, Profile
from proftui.collectors.model.textsafe import encode_text

UNITS = {"ns": "nanoseconds", "count": "count", "bytes": "bytes"}

_VARINT, _LEN = 0, 2

# Go's heap sample types, in Go's order: (type, unit, proftui metrics that give it, best first).
# A profile written at exit without a live count still knows its live blocks: the leaks.
HEAP_SAMPLE_TYPES = (
    ("alloc_objects", "count", ("allocs",)),
    ("alloc_space", "bytes", ("alloc_bytes",)),
    ("inuse_objects", "count", ("live_allocs", "leaks")),
    ("inuse_space", "bytes", ("live_bytes", "leaked_bytes")),
)
_HEAP_NAMES = {m.name for m in HEAP_METRICS} | {LIVE_ALLOCS.name}


def sample_columns(profile: Profile) -> tuple[list[tuple[str, str, int]], list[str]]:
    """The pprof sample types of `profile` as (type, unit, metric index), and the Go
    heap sample types it cannot fill.  Non-heap profiles: one type per metric."""
    names = [m.name for m in profile.metrics]
    if not any(name in _HEAP_NAMES for name in names):
        return [(m.name, UNITS.get(m.unit, m.unit), i) for i, m in enumerate(profile.metrics)], []
    columns: list[tuple[str, str, int]] = []
    missing: list[str] = []
    used: set[int] = set()
    # Leaks stand for live blocks only where everything live is leaked (a profile at exit).
    leaks_are_live = "live_bytes" not in names or (
        "leaked_bytes" in names
        and profile.total(names.index("live_bytes")) == profile.total(names.index("leaked_bytes")))
    for go_type, unit, sources in HEAP_SAMPLE_TYPES:
        found = next((names.index(n) for n in sources if n in names
                      and (n != "leaks" or leaks_are_live)), None)
        if found is None:
            missing.append(go_type)
            continue
        columns.append((go_type, unit, found))
        used.add(found)
    for i, metric in enumerate(profile.metrics):
        if i not in used:
            columns.append((metric.name, UNITS.get(metric.unit, metric.unit), i))
    return columns, missing


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
    columns, missing = sample_columns(profile)
    for name, unit, _index in columns:
        out += _bytes(1, _int(1, strings(name)) + _int(2, strings(unit)))
    order = [index for _name, _unit, index in columns]

    def pick(values: list[int]) -> list[int]:
        return [values[i] for i in order]

    locations = _Locations(profile)
    cut_function = len(profile.frames) + 1  # pprof id of the "calls deeper" pseudo function
    for node, cut, costs in costed_paths(profile.tree):
        callers = locations.path_ids(node)
        if cut:  # the calls below a node at the depth limit: one sample under it
            _holder, chain = locations._group(node)
            cut_id = locations._location("cut", "", 0, [(cut_function, None)])
            out += _bytes(2, _packed(1, [cut_id, locations._group_location(chain), *callers])
                          + _packed(2, pick([round(v) for v in costs])))
            continue
        for leaf_id, values in locations.leaf_parts(node):
            out += _bytes(2, _packed(1, [leaf_id, *callers]) + _packed(2, pick(values)))

    mapping_ids: dict[str, int] = {}
    limits: dict[str, int] = {}
    for frame in profile.frames:
        mapping_ids.setdefault(frame.module, len(mapping_ids) + 1)
        limits[frame.module] = max(limits.get(frame.module, 0), (frame.address or 0) + 1)
    for module, address, _lines in locations.table:
        limits[module] = max(limits.get(module, 0), address + 1)
    build_ids = {f.module: f.build_id for f in profile.frames if f.build_id}
    for module, mapping_id in mapping_ids.items():
        out += _bytes(3, _int(1, mapping_id) + _int(3, limits[module])
                      + _int(5, strings(module)) + _int(6, strings(build_ids.get(module, "")))
                      + _int(7, 1) + _int(8, 1) + _int(9, 1) + _int(10, 1))

    for location_id, (module, address, lines) in enumerate(locations.table, start=1):
        encoded = b"".join(_bytes(4, _int(1, function_id) + _int(2, line or 0))
                           for function_id, line in lines)
        out += _bytes(4, _int(1, location_id) + _int(2, mapping_ids.get(module, 0))
                      + _int(3, address) + encoded)
    function_ids = profile.frames.function_ids()
    for fid, frame in enumerate(profile.frames):
        if function_ids[fid] != fid:
            continue  # an inlined copy: its function is the one it stands for
        name = frame.function or f"0x{frame.address or 0:x}"
        out += _bytes(5, _int(1, fid + 1) + _int(2, strings(name))
                      + _int(3, strings(frame.raw_name or name))
                      + _int(4, strings(frame.file or "")) + _int(5, frame.line or 0))
    if "cut" in locations.by_key:
        out += _bytes(5, _int(1, cut_function) + _int(2, strings(CUT_LABEL))
                      + _int(3, strings(CUT_LABEL)))

    meta = profile.meta
    tail = bytearray()
    if meta.start_time is not None:
        tail += _int(9, int(meta.start_time * 1e9))
        if meta.end_time is not None:
            tail += _int(10, int((meta.end_time - meta.start_time) * 1e9))
    # A CPU profile, or CPU and heap side by side (--heap): its first metric is CPU.
    cpu = bool(profile.metrics) and profile.metrics[0].name not in _HEAP_NAMES
    if meta.period_ns and cpu:  # a CPU sampling period
        first = profile.metrics[0]
        tail += _bytes(11, _int(1, strings("cpu" if first.name == "samples" else first.name))
                       + _int(2, strings("nanoseconds")))
        tail += _int(12, meta.period_ns)
    comments = [f"proftui {meta.mode} profile: {' '.join(meta.argv)}", *meta.warnings]
    if missing:
        comments.append(f"not in this profile: {', '.join(missing)}")
    tail += _packed(13, [strings(c) for c in comments])
    if columns:  # pprof would otherwise show the last sample type first
        names = [name for name, _unit, _index in columns]
        # CPU first where there is CPU (pprof's own default is the last type); the Go
        # heap types stay one -sample_index away.
        default = profile.metrics[0].name if cpu and profile.metrics[0].name in names else \
            "inuse_space" if "inuse_space" in names else \
            profile.metrics[0].name if profile.metrics[0].name in names else names[0]
        tail += _int(14, strings(default))
    # the string table goes last: every string above has been interned by now
    out += b"".join(_bytes(6, encode_text(s)) for s in strings.table)
    out += tail
    return bytes(out)


Line = tuple[int, int | None]  # (pprof function id, source line)


class _Locations:
    """pprof Locations of a profile: inline groups along paths, and per-address leaves."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.function_ids = profile.frames.function_ids()
        self.table: list[tuple[str, int, list[Line]]] = []  # id - 1 -> (module, address, lines)
        self.by_key: dict[object, int] = {}
        self._addresses: dict[int, dict[int, list[float]]] = {}

    def _location(self, key: object, module: str, address: int, lines: list[Line]) -> int:
        found = self.by_key.get(key)
        if found is None:
            self.table.append((module, address, lines))
            found = self.by_key[key] = len(self.table)
        return found

    def _line(self, frame_id: int, line: int | None) -> Line:
        return (self.function_ids[frame_id] + 1, line)

    def _group(self, node: CallNode) -> tuple[CallNode, list[int]]:
        """The node's container (nearest non-inlined ancestor) and the frame ids from
        `node` up to it, innermost first."""
        frames = self.profile.frames
        chain = [node.frame_id]
        holder = node
        while frames[holder.frame_id].inlined and holder.parent is not None \
                and holder.parent.parent is not None:
            holder = holder.parent
            chain.append(holder.frame_id)
        return holder, chain

    def _group_location(self, chain: list[int]) -> int:
        frames = self.profile.frames
        outer = frames[chain[-1]]
        lines = [self._line(fid, frames[fid].line) for fid in chain]
        return self._location(("path", tuple(chain)), outer.module, outer.address or 0, lines)

    def path_ids(self, node: CallNode) -> list[int]:
        """Location ids of the callers of `node`'s inline group, innermost caller first."""
        holder, _ = self._group(node)
        ids = []
        caller = holder.parent
        while caller is not None and caller.parent is not None:
            caller, chain = self._group(caller)
            ids.append(self._group_location(chain))
            caller = caller.parent
        return ids

    def leaf_parts(self, node: CallNode) -> list[tuple[int, list[int]]]:
        """(location id, values) pieces of `node`'s self cost, one per costed address."""
        holder, chain = self._group(node)
        container = self.profile.frames[holder.frame_id]
        costs = self._addresses.get(holder.frame_id)
        if costs is None:
            costs = self._addresses[holder.frame_id] = function_addresses(self.profile,
                                                                          container)
        innermost = self.profile.frames[node.frame_id]
        if innermost.file:  # an inlined callee's lines are in its own file, usually
            sites = self.profile.address_sites
            mine = {a: c for a, c in costs.items()
                    if (site := sites.get((container.module, a))) is not None
                    and site.file == innermost.file}
            costs = mine or costs
        n = len(node.self_cost)
        # Each metric splits by its own costs at the addresses (a heap function's lines
        # differ: one allocates what leaks, another what is freed); a metric with none
        # there splits like the first metric that has some.
        weights = {a: c for a, c in costs.items() if c and any(v > 0 for v in c[:n])}
        wholes = [sum(max(c[i], 0.0) for c in weights.values()) for i in range(n)]
        basis = next((i for i in range(n) if wholes[i] > 0), None)
        if basis is None:
            return [(self._group_location(chain), [round(v) for v in node.self_cost])]
        parts: list[tuple[int, list[int]]] = []
        carried = [0.0] * n  # rounding carried from address to address
        for address in sorted(weights):
            values = []
            for i, value in enumerate(node.self_cost):
                by = i if wholes[i] > 0 else basis
                share = max(weights[address][by], 0.0) / wholes[by]
                exact = value * share + carried[i]
                values.append(round(exact))
                carried[i] = exact - values[-1]
            if not any(values):
                continue
            site = self.profile.address_sites.get((container.module, address))
            line = site.line if site is not None else None
            lines = [self._line(chain[0], line)]
            lines += [self._line(fid, self.profile.frames[fid].line) for fid in chain[1:]]
            key = ("leaf", container.module, address, tuple(chain))
            parts.append((self._location(key, container.module, address, lines), values))
        if any(round(c) for c in carried) and parts:  # what rounding left over stays counted
            last_id, last_values = parts[-1]
            parts[-1] = (last_id, [v + round(c) for v, c in zip(last_values, carried,
                                                                strict=True)])
        return parts or [(self._group_location(chain), [round(v) for v in node.self_cost])]


def export_pprof(profile: Profile) -> bytes:
    """gzip-compressed profile.proto, as `go tool pprof` and pprof-format read it."""
    return gzip.compress(encode_profile(profile), compresslevel=6, mtime=0)
