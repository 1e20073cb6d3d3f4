"""The JSON report (`proftui report --json`), written as it is made.

One object: `meta`, `flat` (one function a line) and `tree`: the call tree as
nested nodes, one node a line, without indentation, so the text grows with the
nodes, never with nodes x depth (indentation made a 1.6-million-node tree of
128-frame stacks a 1.7 GB document).  The tree is walked over the columns and
written in chunks: memory beyond the profile's own is the path being walked.
Nodes deeper than `JSON_TREE_MAX_DEPTH` are left out (nested JSON that deep is
refused by parsers' recursion limits); the node above them carries
`"truncated": true`, and `meta` says how many nodes were left out and why.
README.md, "The JSON report", documents the format.
"""

from __future__ import annotations

import io
import json
import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, TextIO

from proftui.collectors.formats.export.text import flat_by_process
from proftui.collectors.model.byprocess import grouped_profile, processes
from proftui.collectors.model.calltree import CallTree
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import FlatEntry, flat_profile

JSON_TREE_MAX_DEPTH = 200  # deeper nodes are left out (parsers' recursion limits)
_CHUNK = 2048  # nodes formatted and written at a time
_TRUNCATED = 0x8000  # flag in _preorder's depths: the children are left out


def _number(value: float) -> str:
    """A cost as `json.dumps` writes it (NaN and infinities as JavaScript spells them)."""
    if math.isfinite(value):
        return repr(value)
    return json.dumps(value)


def _costs(profile: Profile, values: Sequence[float]) -> dict[str, float]:
    return {m.name: v for m, v in zip(profile.metrics, values, strict=False)}


def _flat_row(profile: Profile, e: FlatEntry, pid: int | None, by_process: bool
              ) -> dict[str, Any]:
    row: dict[str, Any] = {
        "function": e.frame.function,
        "module": e.frame.module,
        "file": e.frame.file,
        "line": e.frame.line,
        "calls": e.calls,
        "self": _costs(profile, e.self_cost),
        "total": _costs(profile, e.total_cost),
        "self_percent": round(e.self_percent, 4),
        "total_percent": round(e.total_percent, 4),
    }
    if by_process:
        row["pid"] = pid
    return row


def _meta(profile: Profile, by: str, left_out: int) -> dict[str, Any]:
    meta = profile.meta
    warnings = list(meta.warnings)
    if left_out:
        warnings.append(f"call tree: {left_out:,} nodes deeper than {JSON_TREE_MAX_DEPTH} levels "
                        "left out of the JSON tree (their costs are in the totals of the "
                        "nodes marked \"truncated\"; the flat profile has every function)")
    doc: dict[str, Any] = {
        "mode": meta.mode,
        "argv": meta.argv,
        "pids": meta.pids,
        "exit_status": meta.exit_status,
        "exit_signal": meta.exit_signal,
        "complete": meta.complete,
        "sample_period_ns": meta.period_ns,
        "clock": meta.clock,
        "metrics": {m.name: m.unit for m in profile.metrics},
        "dropped": meta.dropped,
        "warnings": warnings,
        "by": by,
        "tree_max_depth": JSON_TREE_MAX_DEPTH,
        "tree_nodes_left_out": left_out,
    }
    if by == "process":
        doc["processes"] = [{"pid": p.pid, "name": p.name, "label": p.label,
                             "total": _costs(profile, p.tree.root.total_cost)}
                            for p in processes(profile)]
    return doc


def write_json(profile: Profile, out: TextIO, by: str = "all") -> None:
    """Write the JSON report of `profile` to `out` as it is made (README: "The JSON
    report").  `by`: "all" merges every process; "process" puts one root per process
    at the top of the tree and the pid on every flat row."""
    shown = grouped_profile(profile) if by == "process" else profile
    left_out = depth_cut(shown.tree, JSON_TREE_MAX_DEPTH)
    meta = json.dumps(_meta(profile, by, left_out), indent=1).replace("\n", "\n ")
    out.write('{\n "meta": ' + meta + ',\n "flat": [')
    rows = flat_by_process(profile, processes(profile)) if by == "process" and \
        profile.metrics else [(None, e) for e in flat_profile(profile)]
    flat = [_flat_row(profile, e, pid, by == "process") for pid, e in rows]
    out.write(",".join("\n  " + json.dumps(row) for row in flat))
    out.write('\n ],\n "tree": [')
    _write_tree(shown, out, by == "process")
    out.write('\n ]\n}\n')


def depth_cut(tree: CallTree, max_depth: int) -> int:
    """How many nodes lie deeper than `max_depth` (the root's children are depth 1):
    one pass over the parents column, depths saturating at 255 (a byte a node)."""
    parents = tree.parents
    depths = bytearray(len(parents))
    deeper = 0
    for i in range(1, len(parents)):
        d = depths[parents[i]] + 1
        if d > max_depth:
            deeper += 1
        depths[i] = d if d < 255 else 255
    return deeper


def _preorder(tree: CallTree, order: array | None) -> Iterator[tuple[list[int], list[int]]]:
    """Node ids in pre-order, children costliest first (by `order`, the first metric's
    totals), with their depths, at most `JSON_TREE_MAX_DEPTH` deep, `_CHUNK` at a time;
    a node at that depth whose children are left out has `_TRUNCATED` added to its
    depth.  Memory: the chunk and the pending siblings of the path."""
    first, sibling = tree.first_child, tree.next_sibling
    nodes: list[int] = []
    depths: list[int] = []
    stack: list[int] = []  # node << 8 | depth (depths stay under 256)
    pop, push = stack.pop, stack.append
    node, depth = 0, 0  # the root, not written: its children are depth 1
    while True:
        child = first[node]
        if child >= 0:
            if depth >= JSON_TREE_MAX_DEPTH:
                depths[-1] |= _TRUNCATED
            elif sibling[child] < 0:  # one child: no sort
                push(child << 8 | (depth + 1))
            else:
                kids = []
                while child >= 0:
                    kids.append(child)
                    child = sibling[child]
                if order is not None:  # ascending, ties latest first: popped costliest first,
                    kids.sort(key=lambda c: (order[c], -c))  # then the oldest
                else:
                    kids.reverse()
                below = depth + 1
                stack.extend(c << 8 | below for c in kids)
        if not stack:
            break
        if len(nodes) >= _CHUNK:
            yield nodes, depths
            nodes, depths = [], []
        entry = pop()
        node, depth = entry >> 8, entry & 0xFF
        nodes.append(node)
        depths.append(depth)
    if nodes:
        yield nodes, depths


_OPEN = ', "children": ['
_CLOSERS = [', "children": []}' + "]}" * n for n in range(JSON_TREE_MAX_DEPTH + 1)]


def _write_tree(profile: Profile, out: TextIO, process_roots: bool) -> None:
    """The tree's nodes (`_preorder`), one a line; the closing brackets of a subtree end
    the line of its last node.  Formatting goes a chunk of nodes at a time through C
    loops (itemgetter, map, comprehensions), not node by node."""
    tree = profile.tree
    names = [json.dumps(f.function) + ', "module": ' + json.dumps(f.module)
             + (', "inlined": true' if f.inlined else "") for f in profile.frames]
    keys = [json.dumps(m.name) + ": " for m in profile.metrics]
    head = '{"function": %s, "self": {' + ", ".join(k + "%s" for k in keys) + \
        '}, "total": {' + ", ".join(k + "%s" for k in keys) + '}, "calls": %s'
    columns = [*tree.selfs, *tree.totals]
    calls = tree.known_calls()
    pids = _root_pids(profile) if process_roots else {}
    previous = 0  # depth of the node written before (0: none yet)
    pending: tuple[list[int], list[int]] | None = None
    # A chunk is written once the next one's first depth is known: its last node's
    # closing brackets go down to it (to the top after the last chunk).
    for chunk in _preorder(tree, tree.totals[0] if tree.totals else None):
        if pending is not None:
            previous = _write_chunk(out, tree, *pending, chunk[1][0] & ~_TRUNCATED,
                                    previous, head, names, columns, calls, pids)
        pending = chunk
    if pending is not None:
        _write_chunk(out, tree, *pending, 1, previous, head, names, columns, calls, pids)


def _write_chunk(out: TextIO, tree: CallTree, ids: list[int], deep: list[int], after: int,
                 previous: int, head: str, names: list[str], columns: list[array],
                 calls: array | None, pids: dict[int, int]) -> int:
    """Write the nodes `ids` at depths `deep` (`_preorder`'s), the node before them at
    depth `previous`, the one after at depth `after` (`calls`: the count column, None
    when no count is known); returns the depth of the last."""
    flagged = [k for k, d in enumerate(deep) if d & _TRUNCATED] if max(deep) & _TRUNCATED \
        else []
    for k in flagged:
        deep[k] &= ~_TRUNCATED
    deep.append(after)
    gather = itemgetter(*ids) if len(ids) > 1 else (lambda c, i=ids[0]: (c[i],))
    fields: list[Any] = [map(names.__getitem__, gather(tree.frames))]
    fields += [_numbers(gather(c)) for c in columns]
    fields.append(("null" if c < 0 else str(c) for c in gather(calls)) if calls is not None
                  else repeat("null", len(ids)))
    heads = list(map(head.__mod__, zip(*fields, strict=True)))
    for k in flagged:
        heads[k] += ', "truncated": true'
    if pids:
        for k, node in enumerate(ids):
            if node in pids and deep[k] == 1:
                heads[k] += f', "pid": {pids[node]}'
    before = [previous, *deep[:len(ids) - 1]]
    out.write("".join([("\n" if d > p else "\n,") + h + (_OPEN if a > d else _CLOSERS[d - a])
                       for h, d, a, p in zip(heads, deep[:-1], deep[1:], before, strict=True)]))
    return deep[len(ids) - 1]


def _numbers(values: Sequence[float]) -> Iterable[str]:
    """Costs as `json.dumps` writes them; a C loop unless one is NaN or infinite."""
    if all(map(math.isfinite, values)):
        return map(repr, values)
    return map(_number, values)


def _root_pids(profile: Profile) -> dict[int, int]:
    """The process roots of a `grouped_profile` tree -> their pids (where known)."""
    tree = profile.tree
    out = {}
    for node in tree.children(0):
        raw = profile.frames[tree.frames[node]].raw_name
        tail = raw.removeprefix("[process] pid ")
        if tail != raw and tail.isdigit():
            out[node] = int(tail)
    return out


def render_json(profile: Profile, by: str = "all") -> dict[str, Any]:
    """The JSON report as an object (for small profiles and tests; `write_json`
    streams it)."""
    text = io.StringIO()
    write_json(profile, text, by)
    doc: dict[str, Any] = json.loads(text.getvalue())
    return doc
