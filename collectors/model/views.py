"""Derived views of a `Profile`: pure functions, no I/O, no Textual.

Flat profile, callers/callees of a function, function-focused trees
(callees top-down, callers bottom-up), the bottom-up tree and the hot path.
Per-function views treat a function's inlined copies and its out-of-line
body as one function (`FrameTable.function_ids`); trees keep them apart.
All walks are iterative so 100,000-deep trees work.  Trees must have been
finalized (`Profile.finalize`) so node totals are filled in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from proftui.collectors.model import core
from proftui.collectors.model.parts import PartInfo, list_parts, part_total, part_tree
from proftui.collectors.model.parts import describe_part as describe
from proftui.collectors.model.parts import parse_label as _parse
from proftui.collectors.model.profile import (
    CallNode,
    CallTree,
    Frame,
    FrameTable,
    FunctionCost,
    Profile,
)


class FlatEntry(NamedTuple):
    """One row of the flat profile; costs per metric, percents of the whole.  (A named
    tuple: a profile has tens of thousands of rows, built on every refresh.)"""

    frame_id: int
    frame: Frame
    self_cost: tuple[float, ...]
    total_cost: tuple[float, ...]
    calls: int | None
    self_percent: float  # of the primary metric's whole-profile total
    total_percent: float


# A row's function name, for C-level maps over every row (`map(function_of, rows)`).
function_of = attrgetter("frame.function")


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A caller or callee of a focused function, with the cost through that arc."""

    frame_id: int  # ROOT_FRAME for "called from the program's entry"
    cost: tuple[float, ...]
    calls: int | None


def select_tree(profile: Profile, part: str | None = None) -> CallTree:
    """The merged tree, or one process/thread part of it (parts.part_tree: a process
    merged from its threads; an empty tree for a part this snapshot lacks)."""
    return part_tree(profile, part)


def outermost_nodes(tree: CallTree, frame_id: int,
                    function_ids: list[int] | None = None) -> Iterator[CallNode]:
    """Nodes of `frame_id`'s function with no ancestor of the same function.

    Summing totals over these counts recursive time once.  With
    `function_ids` (FrameTable.function_ids), inlined copies count as the function.
    """
    for node in core.outermost_of(tree, function_mask(frame_id, function_ids)):
        yield CallNode(tree, node)


def function_mask(frame_id: int, function_ids: list[int] | None) -> bytes:
    """Per frame id, 1 where the frame is `frame_id`'s function (its inlined copies and
    body, with `function_ids`; else `frame_id` alone)."""
    if function_ids is None or frame_id >= len(function_ids):
        mask = bytearray(frame_id + 1)
        mask[frame_id] = 1
        return bytes(mask)
    wanted = function_ids[frame_id]
    return bytes(fid == wanted for fid in function_ids)


def function_costs(tree: CallTree, function_ids: list[int] | None = None
                   ) -> dict[int, FunctionCost]:
    """Aggregate self, total (recursion counted once) and calls per function.

    Keys are frame ids, or with `function_ids` the ids standing for functions.
    One pass over the tree's columns (`CallTree.function_sums`); a node's total counts
    for its function only where no ancestor is the same function.
    """
    sums = tree.function_sums(function_ids)
    selfs, totals = sums.selfs, sums.totals
    return {key: FunctionCost([column[key] for column in selfs],
                              [column[key] for column in totals], sums.calls_of(key))
            for key, here in enumerate(sums.present) if here}


def flat_profile(
    profile: Profile, part: str | None = None, metric: int = 0
) -> list[FlatEntry]:
    """Every function with its self/total cost, sorted by self cost (descending)."""
    tree = select_tree(profile, part)
    if profile.functions is not None and part is None:
        costs = profile.functions
    else:
        costs = function_costs(tree, profile.frames.function_ids())
    whole = part_total(profile, part, metric)
    entries = []
    for fid, cost in costs.items():
        self_value = cost.self_cost[metric] if cost.self_cost else 0.0
        total_value = cost.total_cost[metric] if cost.total_cost else 0.0
        entries.append(
            FlatEntry(
                frame_id=fid,
                frame=profile.frames[fid],
                self_cost=tuple(cost.self_cost),
                total_cost=tuple(cost.total_cost),
                calls=cost.calls,
                self_percent=100.0 * self_value / whole if whole else 0.0,
                total_percent=100.0 * total_value / whole if whole else 0.0,
            )
        )
    entries.sort(key=lambda e: (-e.self_cost[metric] if e.self_cost else 0.0,
                                -e.total_cost[metric] if e.total_cost else 0.0,
                                e.frame.function))
    return entries


def _neighbours(tree: CallTree, mask: bytes, callees: bool, metric: int,
                arcs: dict[tuple[int, int], int], arc_of: Callable[[int], tuple[int, int]]
                ) -> list[Neighbour]:
    """Callers or callees of the nodes of the frames `mask` flags (core.neighbours), their
    costs summed per frame; exact arc counts, when the profile has them, replace calls."""
    keys, sums, calls = core.neighbours(tree, tree.totals, mask, callees)
    rows = []
    for k, fid in enumerate(keys):
        count = calls[k] if calls[k] >= 0 else None
        if arcs:
            count = arcs.get(arc_of(fid), count)
        rows.append(Neighbour(fid, tuple(column[k] for column in sums), count))
    rows.sort(key=lambda r: -r.cost[metric] if r.cost else 0.0)
    return rows


def callers(
    profile: Profile, frame_id: int, part: str | None = None, metric: int = 0
) -> list[Neighbour]:
    """Who calls `frame_id`: cost is the callee's total under that caller."""
    mask = function_mask(frame_id, profile.frames.function_ids())
    return _neighbours(select_tree(profile, part), mask, False, metric, profile.arcs,
                       lambda fid: (fid, frame_id))


def callees(
    profile: Profile, frame_id: int, part: str | None = None, metric: int = 0
) -> list[Neighbour]:
    """What `frame_id` calls: cost is each callee's total under it."""
    mask = function_mask(frame_id, profile.frames.function_ids())
    return _neighbours(select_tree(profile, part), mask, True, metric, profile.arcs,
                       lambda fid: (frame_id, fid))


def callee_tree(profile: Profile, frame_id: int, part: str | None = None) -> CallTree:
    """Top-down tree rooted at `frame_id`: all its outermost calls merged."""
    tree = select_tree(profile, part)
    focused = CallTree(tree.n_metrics)
    function_ids = profile.frames.function_ids()
    nodes = core.outermost_of(tree, function_mask(frame_id, function_ids))
    if nodes:  # all of them folded under one root, in order
        top = focused.child(0, function_ids[frame_id])
        core.fold(focused, top, tree, nodes, 1.0, None, [(m, m) for m in range(tree.n_metrics)])
    return focused.finalize()


INVERTED_MAX_DEPTH = 64
"""Bottom-up and caller trees keep at most this many levels of callers per path.

Inverting a tree costs O(paths x depth): a 100,000-deep recursion would take
minutes and gigabytes.  Deeper callers are cut (the costs stay, at the levels
shown) and the tree's `cut_depth` says so."""


def caller_tree(profile: Profile, frame_id: int, part: str | None = None,
                max_depth: int = INVERTED_MAX_DEPTH) -> CallTree:
    """Bottom-up tree of `frame_id`: its callers, their callers, up to the entry.

    Each path is weighted by the total cost of `frame_id` on that path
    (outermost occurrences only, so recursion is counted once).  Paths keep
    `max_depth` levels at most (`CallTree.cut_depth` is set when one was cut).
    """
    tree = select_tree(profile, part)
    inverted = CallTree(tree.n_metrics)
    function_ids = profile.frames.function_ids()
    nodes = core.outermost_of(tree, function_mask(frame_id, function_ids))
    # inlined copies and the body are one root
    if core.callers(tree, tree.totals, inverted, nodes, function_ids[frame_id], max_depth):
        inverted.cut_depth = max_depth
    return inverted.finalize()


def bottom_up_tree(profile: Profile, part: str | None = None,
                   max_depth: int = INVERTED_MAX_DEPTH) -> CallTree:
    """Inverted tree: leaves (self cost) at the top, their callers below.

    Paths keep `max_depth` levels at most (`CallTree.cut_depth` is set when one was cut).
    """
    tree = select_tree(profile, part)
    inverted = CallTree(tree.n_metrics)
    if core.invert(tree, inverted, max_depth):
        inverted.cut_depth = max_depth
    return inverted.finalize()


GROUP_KINDS = ("[process]", "[thread]")
"""How the `Frame.raw_name` of a `threads_as_roots` row starts; its part label follows."""


def is_group_frame(frame: Frame) -> bool:
    """Is `frame` a process or thread row made by `threads_as_roots` (not code)?"""
    return frame.address is None and frame.raw_name.split(" ", 1)[0] in GROUP_KINDS


def group_part(frame: Frame) -> str | None:
    """The part label ("pid 12 tid 13") of a `threads_as_roots` row, else None."""
    return frame.raw_name.split(" ", 1)[1] if is_group_frame(frame) else None


def _group_frame(info: PartInfo) -> Frame:
    return Frame(info.title(), raw_name=f"[{info.kind}] {info.label}")


def threads_as_roots(profile: Profile, part: str | None = None, inverted: bool = False,
                     max_depth: int = INVERTED_MAX_DEPTH) -> tuple[Profile, CallTree]:
    """One root per thread of `part` (None: all) with that thread's tree below, as perf
    report --sort pid and hotspot's thread grouping show it; with several processes, one
    root per process and its threads below.  `inverted`: each thread's bottom-up tree.

    Returns a profile sharing `profile`'s data but with a frame table extended by the
    process/thread frames (`is_group_frame`), and the grouped tree (finalized).
    """
    frames = FrameTable(list(profile.frames))  # same ids for the same frames
    grouped = CallTree(len(profile.metrics))
    infos = [i for i in list_parts(profile) if i.kind != "all"]
    processes = {i.pid: i for i in infos if i.kind == "process"}
    wanted_pid, wanted_tid = (None, None) if part is None else _parse(part)
    several = len({i.pid for i in infos if i.pid is not None}) > 1 and part is None
    if part is not None and wanted_pid is None:  # a part labelled in no known form
        wanted_pid = wanted_tid = -1  # matches no process or thread below
    by_pid: dict[int | None, list[PartInfo]] = {}
    for info in infos:
        if info.kind == "thread" and (wanted_pid is None or info.pid == wanted_pid) and (
                wanted_tid is None or info.tid == wanted_tid):
            by_pid.setdefault(info.pid, []).append(info)
    for info in infos:  # parts labelled in no known form (a saved file's own): one root each
        if info.kind == "other" and part in (None, info.label):
            by_pid.setdefault(None, []).append(info)
    for info in infos:  # processes known only as a whole (gprof, imports): one root each
        if info.kind == "process" and info.pid not in by_pid and info.label in profile.parts \
                and (wanted_pid is None or info.pid == wanted_pid):
            by_pid[info.pid] = [info]
    if not processes:  # one process: list_parts leaves it out, but a lone "pid P" is a root
        for label in profile.parts:
            pid, tid = _parse(label)
            if pid is not None and tid is None and pid not in by_pid and \
                    wanted_pid in (None, pid):
                by_pid[pid] = [describe(profile, label)]
    for pid, members in sorted(by_pid.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        parent = grouped.root
        if several and pid in processes and members[0].kind == "thread":
            parent = parent.child(frames.intern(_group_frame(processes[pid])))
        for info in members:
            assert info.label is not None
            tree = (bottom_up_tree(profile, info.label, max_depth) if inverted
                    else part_tree(profile, info.label))
            if tree.cut_depth is not None:
                grouped.cut_depth = tree.cut_depth
            parent.child(frames.intern(_group_frame(info))).add_tree(tree.root)
    derived = Profile(meta=profile.meta, metrics=profile.metrics, frames=frames, tree=grouped,
                      parts=profile.parts, arcs=profile.arcs, line_costs=profile.line_costs,
                      address_costs=profile.address_costs, address_sites=profile.address_sites,
                      functions=profile.functions, sources=profile.sources,
                      timeline=profile.timeline, leaks=profile.leaks)
    grouped.finalize()
    return derived, grouped
