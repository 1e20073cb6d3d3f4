"""pprof export: the gzip-compressed `profile.proto` that `go tool pprof` reads.

The protobuf is encoded with collectors/formats/protobuf.py (the importer
reads with it too), which names profile.proto's field numbers.

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

from proftui.collectors.formats import protobuf as pb
from proftui.collectors.formats.export.paths import CUT_LABEL, costed_paths
from proftui.collectors.model.lines import function_addresses
from proftui.collectors.model.profile import CallNode, Profile
from proftui.collectors.model.textsafe import encode_text

UNITS = {"ns": "nanoseconds", "count": "count", "bytes": "bytes"}

# Go's heap sample types, in Go's order: (type, unit, proftui metrics that give it, best first).
# A profile written at exit without a live count still knows its live blocks: the leaks.
HEAP_SAMPLE_TYPES = (
    ("alloc_objects", "count", ("allocs",)),
    ("alloc_space", "bytes", ("alloc_bytes",)),
    ("inuse_objects", "count", ("live_allocs", "leaks")),
    ("inuse_space", "bytes", ("live_bytes", "leaked_bytes")),
)


def sample_columns(profile: Profile) -> tuple[list[tuple[str, str, int]], list[str]]:
    """The pprof sample types of `profile` as (type, unit, metric index), and the Go
    heap sample types it cannot fill.  Non-heap profiles: one type per metric."""
    names = [m.name for m in profile.metrics]
    if not any(m.heap for m in profile.metrics):
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


def _value_type(type_index: int, unit_index: int) -> bytes:
    """A ValueType message (string table indexes)."""
    return (pb.int_field(pb.VALUE_TYPE_TYPE, type_index)
            + pb.int_field(pb.VALUE_TYPE_UNIT, unit_index))


def _sample(location_ids: list[int], values: list[int]) -> bytes:
    """A Profile.sample field: location ids leaf first, one value per sample type."""
    return pb.len_field(pb.PROFILE_SAMPLE, pb.packed_field(pb.SAMPLE_LOCATION_ID, location_ids)
                        + pb.packed_field(pb.SAMPLE_VALUE, values))


def _function(function_id: int, name: int, system_name: int, filename: int = 0,
              start_line: int = 0) -> bytes:
    """A Profile.function field (names as string table indexes)."""
    return pb.len_field(pb.PROFILE_FUNCTION, pb.int_field(pb.FUNCTION_ID, function_id)
                        + pb.int_field(pb.FUNCTION_NAME, name)
                        + pb.int_field(pb.FUNCTION_SYSTEM_NAME, system_name)
                        + pb.int_field(pb.FUNCTION_FILENAME, filename)
                        + pb.int_field(pb.FUNCTION_START_LINE, start_line))


def encode_profile(profile: Profile) -> bytes:
    """The uncompressed profile.proto message for `profile`."""
    strings = _Strings()
    out = bytearray()
    columns, missing = sample_columns(profile)
    for name, unit, _index in columns:
        out += pb.len_field(pb.PROFILE_SAMPLE_TYPE, _value_type(strings(name), strings(unit)))
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
            out += _sample([cut_id, locations._group_location(chain), *callers],
                           pick([round(v) for v in costs]))
            continue
        for leaf_id, values in locations.leaf_parts(node):
            out += _sample([leaf_id, *callers], pick(values))

    mapping_ids: dict[str, int] = {}
    limits: dict[str, int] = {}
    for frame in profile.frames:
        mapping_ids.setdefault(frame.module, len(mapping_ids) + 1)
        limits[frame.module] = max(limits.get(frame.module, 0), (frame.address or 0) + 1)
    for module, address, _lines in locations.table:
        limits[module] = max(limits.get(module, 0), address + 1)
    build_ids = {f.module: f.build_id for f in profile.frames if f.build_id}
    for module, mapping_id in mapping_ids.items():
        # already symbolized: pprof must not try to re-symbolize
        out += pb.len_field(pb.PROFILE_MAPPING, pb.int_field(pb.MAPPING_ID, mapping_id)
                            + pb.int_field(pb.MAPPING_MEMORY_LIMIT, limits[module])
                            + pb.int_field(pb.MAPPING_FILENAME, strings(module))
                            + pb.int_field(pb.MAPPING_BUILD_ID,
                                           strings(build_ids.get(module, "")))
                            + pb.int_field(pb.MAPPING_HAS_FUNCTIONS, 1)
                            + pb.int_field(pb.MAPPING_HAS_FILENAMES, 1)
                            + pb.int_field(pb.MAPPING_HAS_LINE_NUMBERS, 1)
                            + pb.int_field(pb.MAPPING_HAS_INLINE_FRAMES, 1))

    for location_id, (module, address, lines) in enumerate(locations.table, start=1):
        encoded = b"".join(pb.len_field(pb.LOCATION_LINE,
                                        pb.int_field(pb.LINE_FUNCTION_ID, function_id)
                                        + pb.int_field(pb.LINE_LINE, line or 0))
                           for function_id, line in lines)
        out += pb.len_field(pb.PROFILE_LOCATION, pb.int_field(pb.LOCATION_ID, location_id)
                            + pb.int_field(pb.LOCATION_MAPPING_ID, mapping_ids.get(module, 0))
                            + pb.int_field(pb.LOCATION_ADDRESS, address) + encoded)
    function_ids = profile.frames.function_ids()
    for fid, frame in enumerate(profile.frames):
        if function_ids[fid] != fid:
            continue  # an inlined copy: its function is the one it stands for
        name = frame.function or f"0x{frame.address or 0:x}"
        out += _function(fid + 1, strings(name), strings(frame.raw_name or name),
                         strings(frame.file or ""), frame.line or 0)
    if "cut" in locations.by_key:
        out += _function(cut_function, strings(CUT_LABEL), strings(CUT_LABEL))

    meta = profile.meta
    tail = bytearray()
    if meta.start_time is not None:
        tail += pb.int_field(pb.PROFILE_TIME_NANOS, int(meta.start_time * 1e9))
        if meta.end_time is not None:
            tail += pb.int_field(pb.PROFILE_DURATION_NANOS,
                                 int((meta.end_time - meta.start_time) * 1e9))
    # A CPU profile, or CPU and heap side by side (--heap): its first metric is CPU.
    cpu = bool(profile.metrics) and not profile.metrics[0].heap
    if meta.period_ns and cpu:  # a CPU sampling period
        first = profile.metrics[0]
        kind = strings("cpu" if first.name == "samples" else first.name)
        tail += pb.len_field(pb.PROFILE_PERIOD_TYPE, _value_type(kind, strings("nanoseconds")))
        tail += pb.int_field(pb.PROFILE_PERIOD, meta.period_ns)
    comments = [f"proftui {meta.mode} profile: {' '.join(meta.argv)}", *meta.warnings]
    if missing:
        comments.append(f"not in this profile: {', '.join(missing)}")
    tail += pb.packed_field(pb.PROFILE_COMMENT, [strings(c) for c in comments])
    if columns:  # pprof would otherwise show the last sample type first
        names = [name for name, _unit, _index in columns]
        # CPU first where there is CPU (pprof's own default is the last type); the Go
        # heap types stay one -sample_index away.
        default = profile.metrics[0].name if cpu and profile.metrics[0].name in names else \
            "inuse_space" if "inuse_space" in names else \
            profile.metrics[0].name if profile.metrics[0].name in names else names[0]
        tail += pb.int_field(pb.PROFILE_DEFAULT_SAMPLE_TYPE, strings(default))
    # the string table goes last: every string above has been interned by now
    out += b"".join(pb.len_field(pb.PROFILE_STRING_TABLE, encode_text(s))
                    for s in strings.table)
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
