"""Check a saved profile document field by field while building the `Profile` from it.

A `.proftui` file is JSON, so anything may be in it: strings where numbers
belong, lists for objects, nulls, NaN, negative or 5,000-digit numbers, frame
ids that point nowhere.  Every value is checked for its type and range here,
before any view sees it, so a bad file is refused with one `InvalidProfile`
naming what is wrong and where (`frames[3][4]: expected an integer or null,
got 'abc'`) instead of failing somewhere deep in a view or an exporter.

Keys this version does not know are ignored (forward compatible); `meta`,
`metrics`, `frames` and `tree` are required, the other tables default to
empty; meta fields default to `ProfileMeta`'s defaults, except `mode`.
"""

from __future__ import annotations

import itertools
import sys
from array import array
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from proftui.collectors.model import core
from proftui.collectors.model.profile import (
    CallNode,
    CallTree,
    CodeSite,
    Frame,
    FrameTable,
    FunctionCost,
    LeakFrame,
    LeakStack,
    Metric,
    Profile,
    ProfileMeta,
    Timeline,
    metric_named,
)
from proftui.collectors.model.slices import Slices, StackIndex

T = TypeVar("T")

MAX_COST = float(2**63)  # int64, what pprof and callgrind can carry
MAX_COUNT = 2**63 - 1
MAX_ADDRESS = 2**64 - 1
MAX_LINE = 2**31 - 1
MAX_TIME = 1e11  # Unix seconds (year ~5000); keeps durations finite
MAX_NODES = 2**31 - 1  # node ids are int32 on the wire
UNITS = ("count", "ns", "bytes")


class InvalidProfile(ValueError):
    """A malformed document: `where` (a JSON path such as `tree[4][1]`) and `what`."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}" if where else what)


class NotAProfile(InvalidProfile):
    """Not a proftui profile document at all, or one of another format version."""


def _show(value: Any) -> str:
    """A short, printable, one-line rendering of a bad value."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return "a huge number"
    text = ascii(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fail(where: str, expected: str, value: Any) -> InvalidProfile:
    return InvalidProfile(where, f"expected {expected}, got {_show(value)}")


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(where, f"an integer in {lo}..{hi}", value)
    return value


def _opt_int(value: Any, where: str, lo: int, hi: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(where, f"an integer in {lo}..{hi} or null", value)
    return value


def _number(value: Any, lo: float, hi: float) -> bool:
    """Whether `value` is a JSON number in lo..hi (no NaN; big ints compared exactly)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return lo <= value <= hi  # False for NaN; an int of 400 digits never becomes a float


def _cost(value: Any, where: str) -> float:
    if not _number(value, 0, MAX_COST):
        raise _fail(where, "a finite cost >= 0", value)
    return float(value)


def _opt_time(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if not _number(value, 0, MAX_TIME):
        raise _fail(where, "a time in Unix seconds or null", value)
    return float(value)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, "a string", value)
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _fail(where, "a string or null", value)
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, "true or false", value)
    return value


def _list(value: Any, where: str, length: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "a list" if length is None else f"a list of {length}", value)
    if length is not None and len(value) != length:
        raise InvalidProfile(where, f"expected {length} items, got {len(value)}")
    return value


def _dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    return value


def _costs(value: Any, where: str, n: int) -> list[float]:
    items = _list(value, where, n)
    return [_cost(v, f"{where}[{i}]") for i, v in enumerate(items)]


def _rows(value: Any, where: str, length: int,
          convert: Callable[[list[Any], str], T]) -> list[T]:
    """Each row of a table: a list of `length` items given to `convert(row, where)`."""
    return [convert(_list(row, f"{where}[{i}]", length), f"{where}[{i}]")
            for i, row in enumerate(_list(value, where))]


def _meta(value: Any) -> ProfileMeta:
    doc = _dict(value, "meta")
    if "mode" not in doc:
        raise InvalidProfile("meta", "missing key 'mode'")
    meta = ProfileMeta(mode=_str(doc["mode"], "meta.mode"))

    def get(key: str, convert: Callable[[Any, str], Any]) -> None:
        if key in doc:
            setattr(meta, key, convert(doc[key], f"meta.{key}"))

    get("argv", lambda v, w: [_str(a, f"{w}[{i}]") for i, a in enumerate(_list(v, w))])
    get("pids", lambda v, w: [_int(p, f"{w}[{i}]", 0, 2**31 - 1)
                              for i, p in enumerate(_list(v, w))])
    get("threads", _threads)
    get("period_ns", lambda v, w: _opt_int(v, w, 0, 2**64 * 1000))  # gperftools: us * 1000
    get("clock", _str)
    get("start_time", _opt_time)
    get("end_time", _opt_time)
    get("exit_status", lambda v, w: _opt_int(v, w, -(2**31), 2**31 - 1))
    get("exit_signal", lambda v, w: _opt_int(v, w, 0, 255))
    get("complete", _bool)
    get("dropped", lambda v, w: _int(v, w, 0, MAX_COUNT))
    get("warnings", lambda v, w: [_str(s, f"{w}[{i}]") for i, s in enumerate(_list(v, w))])
    get("lines_note", _str)
    return meta


def _threads(value: Any, where: str) -> dict[int, str]:
    threads: dict[int, str] = {}
    for tid, name in _dict(value, where).items():
        if not (tid.isascii() and tid.isdigit() and len(tid) <= 10):
            raise _fail(f"{where} key", "a thread id", tid)
        threads[int(tid)] = _str(name, f"{where}[{tid}]")
    return threads


def _metric(row: list[Any], where: str) -> Metric:
    name = _str(row[0], f"{where}[0]")
    unit = _str(row[1], f"{where}[1]")
    if unit not in UNITS:
        raise _fail(f"{where}[1]", f"a unit ({', '.join(UNITS)})", unit)
    return metric_named(name, unit)


def _frame(row: list[Any], where: str) -> Frame:
    return Frame(
        function=_str(row[0], f"{where}[0]"),
        module=_str(row[1], f"{where}[1]"),
        file=_opt_str(row[2], f"{where}[2]"),
        line=_opt_int(row[3], f"{where}[3]", 0, MAX_LINE),
        address=_opt_int(row[4], f"{where}[4]", 0, MAX_ADDRESS),
        raw_name=_str(row[5], f"{where}[5]"),
        build_id=_str(row[6], f"{where}[6]"),
        inlined=_bool(row[7], f"{where}[7]"),
    )


def decode_tree(value: Any, where: str, n_metrics: int, n_frames: int) -> CallTree:
    """A CallTree from pre-order rows `[parent_index, frame, [self...], calls]`.

    A parent index must point at an earlier row (or be -1, the root), so parent
    links cannot form cycles.
    """
    tree = CallTree(n_metrics)
    nodes: list[CallNode] = []
    for i, row in enumerate(_list(value, where)):
        at = f"{where}[{i}]"
        parent_index, frame_id, self_cost, calls = _list(row, at, 4)
        parent_index = _int(parent_index, f"{at}[0]", -1, len(nodes) - 1)
        frame_id = _int(frame_id, f"{at}[1]", 0, n_frames - 1)
        costs = _costs(self_cost, f"{at}[2]", n_metrics)
        count = _opt_int(calls, f"{at}[3]", 0, MAX_COUNT)
        parent = tree.root if parent_index == -1 else nodes[parent_index]
        node = parent.child(frame_id)  # a repeated (parent, frame) row adds to the same node
        for m, v in enumerate(costs):
            node.self_cost[m] += v
        if count is not None:
            node.add_calls(count)
        nodes.append(node)
    return tree.finalize()


class Blobs(Protocol):
    """The binary area after a version 2 document: `read(offset, length)` gives the
    bytes there in pieces of whole items (fewer in all when the area ends first)."""

    def read(self, offset: int, length: int) -> Iterator[bytes]: ...


MAX_BLOB_OFFSET = 2**62  # references beyond this are corrupt whatever the file's size


def _blob(value: Any, where: str, blobs: Blobs, typecode: str, count: int) -> array:
    """The array a column reference `[offset, length]` names in the blob area: `count`
    items of `typecode` (little-endian on the wire), read in pieces (a column is never
    in memory twice)."""
    offset, length = (_int(v, f"{where}[{i}]", 0, MAX_BLOB_OFFSET)
                      for i, v in enumerate(_list(value, where, 2)))
    column = array(typecode)
    if length != count * column.itemsize:
        raise InvalidProfile(where, f"expected {count} items in the blob area, got "
                                    f"{length} bytes at {offset}")
    got = 0
    for piece in blobs.read(offset, length):
        whole = len(piece) - len(piece) % column.itemsize  # short only where the area ends
        column.frombytes(piece[:whole] if whole < len(piece) else piece)
        got += len(piece)
        if whole < len(piece) or got >= length:
            break
    if got != length:
        raise InvalidProfile(where, f"expected {count} items in the blob area, got "
                                    f"{got} of {length} bytes at {offset}: the area ends")
    if sys.byteorder == "big":
        column.byteswap()
    return column


def decode_tree_columns(value: Any, where: str, blobs: Blobs, n_metrics: int,
                        n_frames: int) -> CallTree:
    """A CallTree from a version 2 column description: `nodes` (the root included),
    `parents`, `frames`, `selfs` (one per metric) and `calls` (or null) as references
    into the blob area.  Node 0 is the root; each parent is an earlier node."""
    doc = _dict(value, where)
    n = _int(doc.get("nodes"), f"{where}.nodes", 1, MAX_NODES)
    parents = _blob(doc.get("parents"), f"{where}.parents", blobs, "i", n)
    frames = _blob(doc.get("frames"), f"{where}.frames", blobs, "i", n)
    if parents[0] != -1 or frames[0] != -1:
        raise InvalidProfile(f"{where}.parents[0]", "node 0 must be the root (-1, -1)")
    if core.check(frames, 0, n_frames - 1, 1) >= 0:
        raise InvalidProfile(f"{where}.frames", f"expected frame ids in 0..{n_frames - 1}")
    selfs = []
    for m, ref in enumerate(_list(doc.get("selfs"), f"{where}.selfs", n_metrics)):
        column = _blob(ref, f"{where}.selfs[{m}]", blobs, "d", n)
        if core.check(column, 0.0, MAX_COST, 0) >= 0:  # NaN and infinities fail too
            raise InvalidProfile(f"{where}.selfs[{m}]", "expected finite costs >= 0")
        selfs.append(column)
    calls = None
    if doc.get("calls") is not None:
        calls = _blob(doc.get("calls"), f"{where}.calls", blobs, "q", n)
        if core.check(calls, -1, 2**63 - 1, 0) >= 0:
            raise InvalidProfile(f"{where}.calls", "expected counts >= 0 (-1: unknown)")
    try:
        tree = CallTree.from_columns(n_metrics, parents, frames, selfs, calls, finalized=True)
    except ValueError as exc:
        raise InvalidProfile(f"{where}.parents", str(exc)) from None
    return tree


def decode_slices(value: Any, blobs: Blobs, n_metrics: int, tree: CallTree,
                  parts: dict[str, CallTree]) -> Slices | None:
    """The timeline of a version 2 file (None when absent), every index checked."""
    if value is None:
        return None
    doc = _dict(value, "slices")
    start = _opt_time(doc.get("start"), "slices.start")
    width = _cost(doc.get("width"), "slices.width")
    if start is None or not width > 0:
        raise InvalidProfile("slices", "expected a start time and a width > 0")
    idoc = _dict(doc.get("index"), "slices.index")
    n = _int(idoc.get("stacks"), "slices.index.stacks", 0, MAX_NODES)
    labels = [_str(label, f"slices.index.labels[{i}]")
              for i, label in enumerate(_list(idoc.get("labels"), "slices.index.labels"))]
    keys = [(_str(k[0], f"slices.index.code_keys[{i}][0]"),
             _int(k[1], f"slices.index.code_keys[{i}][1]", 0, MAX_ADDRESS))
            for i, k in enumerate(_rows(idoc.get("code_keys"), "slices.index.code_keys", 2,
                                        lambda r, w: r))]
    leaf = _blob(idoc.get("leaf"), "slices.index.leaf", blobs, "q", n)
    part = _blob(idoc.get("part"), "slices.index.part", blobs, "q", n)
    part_leaf = _blob(idoc.get("part_leaf"), "slices.index.part_leaf", blobs, "q", n)
    code = _blob(idoc.get("code"), "slices.index.code", blobs, "q", n)
    if n and not (min(leaf) >= 1 and max(leaf) < len(tree)):
        raise InvalidProfile("slices.index.leaf", "expected nodes of the tree")
    if n and not (min(part) >= 0 and max(part) < len(labels)):
        raise InvalidProfile("slices.index.part", "expected indexes of labels")
    if n and not (min(code) >= -1 and max(code) < len(keys)):
        raise InvalidProfile("slices.index.code", "expected indexes of code_keys or -1")
    for s in range(n):
        owner = parts.get(labels[part[s]], tree)
        if not 1 <= part_leaf[s] < len(owner):
            raise InvalidProfile(f"slices.index.part_leaf[{s}]", "expected a node of its part")
    offsets_ref = _list(doc.get("offsets"), "slices.offsets", 2)
    count = _int(offsets_ref[1], "slices.offsets[1]", 8, 8 * MAX_NODES) // 8
    offsets = _blob(offsets_ref, "slices.offsets", blobs, "q", count)
    entries = offsets[-1]
    if offsets[0] != 0 or any(b < a for a, b in itertools.pairwise(offsets)):
        raise InvalidProfile("slices.offsets", "expected growing entry offsets from 0")
    stacks = _blob(doc.get("stacks"), "slices.stacks", blobs, "q", entries)
    if core.check(stacks, 0, n - 1, 0) >= 0:
        raise InvalidProfile("slices.stacks", "expected stack numbers of the index")
    costs = [_blob(ref, f"slices.costs[{m}]", blobs, "d", entries)
             for m, ref in enumerate(_list(doc.get("costs"), "slices.costs", n_metrics))]
    for m, column in enumerate(costs):
        if core.check(column, -sys.float_info.max, sys.float_info.max, 0) >= 0:
            raise InvalidProfile(f"slices.costs[{m}]", "expected finite costs")
    index = StackIndex(labels, leaf, part, part_leaf, code, keys)
    return Slices(start, width, index, offsets, stacks, costs)


def _sources(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    return {path: _str(text, f"sources[{ascii(path)[:40]}]")
            for path, text in _dict(value, "sources").items()}


def _timeline(value: Any) -> Timeline | None:
    if value is None:
        return None
    doc = _dict(value, "timeline")
    names = [_str(name, f"timeline.names[{i}]")
             for i, name in enumerate(_list(doc.get("names", []), "timeline.names"))]
    times = [_cost(t, f"timeline.times[{i}]")
             for i, t in enumerate(_list(doc.get("times", []), "timeline.times"))]
    rows = _list(doc.get("values", []), "timeline.values", len(times))
    values = [_costs(row, f"timeline.values[{i}]", len(names)) for i, row in enumerate(rows)]
    return Timeline(names, times, values)


def _leak_frame(r: list[Any], w: str) -> LeakFrame:
    return LeakFrame(_str(r[0], f"{w}[0]"), _str(r[1], f"{w}[1]"), _opt_str(r[2], f"{w}[2]"),
                     _opt_int(r[3], f"{w}[3]", 0, MAX_LINE), _bool(r[4], f"{w}[4]"))


def _leaks(value: Any) -> list[LeakStack]:
    return _rows(value or [], "leaks", 3, lambda r, w: LeakStack(
        _cost(r[0], f"{w}[0]"), _cost(r[1], f"{w}[1]"),
        tuple(_rows(r[2], f"{w}[2]", 5, _leak_frame))))


def _function_table(value: Any, n: int, nf: int) -> dict[int, FunctionCost] | None:
    if value is None:
        return None
    functions: dict[int, FunctionCost] = {}
    for row in _rows(value, "functions", 4, lambda r, w: (
            _int(r[0], f"{w}[0]", 0, nf - 1), _costs(r[1], f"{w}[1]", n),
            _costs(r[2], f"{w}[2]", n), _opt_int(r[3], f"{w}[3]", 0, MAX_COUNT))):
        functions[row[0]] = FunctionCost(row[1], row[2], row[3])
    return functions


def profile_from_document(doc: Any, format_name: str, versions: tuple[int, ...],
                          blobs: Blobs | None = None) -> Profile:
    """The Profile a saved document describes (InvalidProfile if anything is malformed).

    Version 1 documents hold trees as node lists; version 2 as column references into
    `blobs` (the binary area after the document)."""
    doc = _dict(doc, "top level")
    if doc.get("format") != format_name:
        raise NotAProfile("", f"not a proftui profile (format is {_show(doc.get('format'))})")
    version = doc.get("version")
    if version not in versions or (version >= 2) != (blobs is not None):
        raise NotAProfile("", f"format version {_show(version)} "
                                 f"(this proftui reads versions {', '.join(map(str, versions))})")
    for key in ("meta", "metrics", "frames", "tree"):
        if key not in doc:
            raise InvalidProfile("top level", f"missing key {key!r}")
    meta = _meta(doc["meta"])
    metrics = tuple(_rows(doc["metrics"], "metrics", 2, _metric))
    if not metrics:
        raise InvalidProfile("metrics", "no metric")
    frames = FrameTable()
    for i, frame in enumerate(_rows(doc["frames"], "frames", 8, _frame)):
        if frames.intern(frame) != i:
            raise InvalidProfile(f"frames[{i}]", "duplicate of an earlier frame")
    n, nf = len(metrics), len(frames)

    def tree_of(value: Any, where: str) -> CallTree:
        if blobs is None:
            return decode_tree(value, where, n, nf)
        return decode_tree_columns(value, where, blobs, n, nf)

    tree = tree_of(doc["tree"], "tree")
    parts = {label: tree if value == "tree" else tree_of(value, f"parts[{ascii(label)[:40]}]")
             for label, value in _dict(doc.get("parts", {}), "parts").items()}
    arcs: dict[tuple[int, int], int] = {}
    for caller, callee, count in _rows(doc.get("arcs", []), "arcs", 3, lambda r, w: (
            _int(r[0], f"{w}[0]", 0, nf - 1), _int(r[1], f"{w}[1]", 0, nf - 1),
            _int(r[2], f"{w}[2]", 0, MAX_COUNT))):
        arcs[(caller, callee)] = arcs.get((caller, callee), 0) + count
    line_costs = {(file, line): costs for file, line, costs in _rows(
        doc.get("line_costs", []), "line_costs", 3, lambda r, w: (
            _str(r[0], f"{w}[0]"), _int(r[1], f"{w}[1]", 0, MAX_LINE),
            _costs(r[2], f"{w}[2]", n)))}
    address_costs = {(module, address): costs for module, address, costs in _rows(
        doc.get("address_costs", []), "address_costs", 3, lambda r, w: (
            _str(r[0], f"{w}[0]"), _int(r[1], f"{w}[1]", 0, MAX_ADDRESS),
            _costs(r[2], f"{w}[2]", n)))}
    sites_doc = doc.get("address_sites")  # absent in files written before sites existed
    address_sites = {} if sites_doc is None else {
        (module, address): site for module, address, site in _rows(
            sites_doc, "address_sites", 5, lambda r, w: (
                _str(r[0], f"{w}[0]"), _int(r[1], f"{w}[1]", 0, MAX_ADDRESS),
                CodeSite(_opt_int(r[2], f"{w}[2]", 0, MAX_ADDRESS), _opt_str(r[3], f"{w}[3]"),
                         _opt_int(r[4], f"{w}[4]", 0, MAX_LINE))))}
    return Profile(
        meta=meta,
        metrics=metrics,
        frames=frames,
        tree=tree,
        parts=parts,
        arcs=arcs,
        line_costs=line_costs,
        address_costs=address_costs,
        functions=_function_table(doc.get("functions"), n, nf),
        sources=_sources(doc.get("sources")),
        address_sites=address_sites,
        timeline=_timeline(doc.get("timeline")),
        leaks=_leaks(doc.get("leaks")),
        slices=None if blobs is None else decode_slices(doc.get("slices"), blobs, n, tree,
                                                        parts),
    )
