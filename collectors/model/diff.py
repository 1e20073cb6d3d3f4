"""Compare two profiles: match frames across builds, align one onto the other, subtract.

Two profiles of different builds (or runs) share no frame ids and maybe no
addresses, so frames match by function name and module base name
(`frame_key`), as pprof's `-diff_base` and Gregg's difffolded.pl match them.
`align(base, onto)` re-expresses `base` in `onto`'s frame ids and metric order;
after that, the same path of frame ids names the same calling context in both
trees (`counterpart`), and per-function views of the two line up by frame id.
`subtract(current, mark)` is the live A/B case: what happened since `mark`.

Pure functions, no I/O; every walk is iterative (trees can be 100,000 deep).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from proftui.collectors.model.profile import (
    ROOT_FRAME,
    CallNode,
    CallTree,
    Frame,
    FrameTable,
    FunctionCost,
    Metric,
    Profile,
)

FrameKey = tuple[str, str]


def frame_key(frame: Frame) -> FrameKey:
    """What makes two frames of different builds the same function: name and module base name."""
    return frame.function, frame.module_name


class FrameMatcher:
    """Maps frames of another profile onto ids of `frames`, extending it for unmatched ones.

    An inlined copy matches an inlined copy first, then the function itself (a build may
    inline what the other did not); the first frame of a key stands for it.
    """

    def __init__(self, frames: FrameTable) -> None:
        self.frames = FrameTable(list(frames))  # same ids for the same frames
        self._exact: dict[tuple[str, str, bool], int] = {}
        self._loose: dict[FrameKey, int] = {}
        for frame_id, frame in enumerate(self.frames):
            self._remember(frame_id, frame)

    def _remember(self, frame_id: int, frame: Frame) -> None:
        key = frame_key(frame)
        self._exact.setdefault((*key, frame.inlined), frame_id)
        if not frame.inlined or key not in self._loose:
            self._loose.setdefault(key, frame_id)

    def match(self, frame: Frame) -> int:
        """The id standing for `frame`'s function (added to the table when new)."""
        key = frame_key(frame)
        found = self._exact.get((*key, frame.inlined))
        if found is None:
            found = self._loose.get(key)
        if found is None:
            found = self.frames.intern(frame)
            self._remember(found, frame)
        return found


def _metric_map(source: Sequence[Metric], target: Sequence[Metric]) -> list[int | None]:
    """For each target metric, its index in `source` (matched by name), or None."""
    names = {m.name: i for i, m in enumerate(source)}
    return [names.get(m.name) for m in target]


def _reorder(values: Sequence[float], order: list[int | None]) -> list[float]:
    return [0.0 if i is None else values[i] for i in order]


def _remap_tree(tree: CallTree, ids: list[int], order: list[int | None]) -> CallTree:
    """`tree` with frame ids mapped through `ids` and costs through `order` (finalized).

    Siblings that map to one id merge, as their costs add up in the other profile."""
    out = CallTree(len(order))
    out.cut_depth = tree.cut_depth
    pairs: list[tuple[CallNode, CallNode]] = [(tree.root, out.root)]
    while pairs:
        theirs, mine = pairs.pop()
        for i, value in enumerate(_reorder(theirs.self_cost, order)):
            mine.self_cost[i] += value
        if theirs.calls is not None and theirs.index != 0:
            mine.add_calls(theirs.calls)
        pairs.extend((child, mine.child(ids[fid])) for fid, child in theirs.children.items())
    return out.finalize()


def align(base: Profile, onto: Profile) -> Profile:
    """`base` expressed in `onto`'s frame ids and metric order.

    The result's frame table is `onto`'s (same ids) plus `base`'s frames that match
    none of them; its costs follow `onto.metrics` (a metric `base` lacks is zero).
    The programs' own frames match even when the two builds are named differently
    (`same_program`).  Trees, parts, arcs and per-function totals are remapped; line
    and address costs, sources and the timeline are `base`'s own (their keys do not
    depend on frame ids).
    """
    base = same_program(base, onto)
    matcher = FrameMatcher(onto.frames)
    ids = [matcher.match(frame) for frame in base.frames]
    order = _metric_map(base.metrics, onto.metrics)
    assert base.tree is not None
    functions: dict[int, FunctionCost] | None = None
    if base.functions is not None:
        functions = {}
        for fid, cost in base.functions.items():
            slot = functions.setdefault(ids[fid], FunctionCost([0.0] * len(order),
                                                               [0.0] * len(order)))
            for i, (s, t) in enumerate(zip(_reorder(cost.self_cost, order),
                                           _reorder(cost.total_cost, order), strict=True)):
                slot.self_cost[i] += s
                slot.total_cost[i] += t
            if cost.calls is not None:
                slot.calls = (slot.calls or 0) + cost.calls
    arcs: dict[tuple[int, int], int] = {}
    for (caller, callee), count in base.arcs.items():
        key = (ids[caller] if caller >= 0 else caller, ids[callee])
        arcs[key] = arcs.get(key, 0) + count
    with _bulk_nodes():
        tree = _remap_tree(base.tree, ids, order)
        parts = {label: _remap_tree(t, ids, order) for label, t in base.parts.items()}
    return Profile(
        meta=base.meta, metrics=onto.metrics, frames=matcher.frames,
        tree=tree, parts=parts,
        arcs=arcs,
        line_costs={k: _reorder(v, order) for k, v in base.line_costs.items()},
        address_costs={k: _reorder(v, order) for k, v in base.address_costs.items()},
        address_sites=dict(base.address_sites), functions=functions,
        sources=base.sources, timeline=base.timeline)


def counterpart(node: CallNode, tree: CallTree) -> CallNode | None:
    """The node of `tree` at `node`'s path of frame ids (trees aligned by `align`), or None."""
    found: CallNode | None = tree.root
    for frame_id in node.path():
        if found is None:
            return None
        found = found.children.get(frame_id)
    return found if node.frame_id != ROOT_FRAME else tree.root


@contextmanager
def _bulk_nodes() -> Iterator[None]:
    """No cyclic garbage collection while a tree of new nodes is built.

    Every node links to its parent (a cycle), so each allocation counts towards the
    collector's threshold: building 200,000 nodes ran many full passes over the whole
    heap and took 5x the walk itself.  Nothing built here is garbage until it is
    dropped, so the collector has nothing to find meanwhile; it runs again after.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _subtract_tree(current: CallTree, mark: CallTree, ids: list[int],
                   order: list[int | None]) -> CallTree:
    """`current` minus `mark`, whose frame ids map through `ids` and costs through `order`
    (`align`'s mapping): a walk of the mark's own nodes over a copy of `current`, not
    an aligned copy of the mark merged in (the same sums; siblings that map to one
    id subtract from one node, as they merge in `align`)."""
    out = current.copy()
    identity = order == list(range(len(order)))
    pairs: list[tuple[CallNode, CallNode]] = [(mark.root, out.root)]
    pop, push = pairs.pop, pairs.append
    while pairs:
        theirs, mine = pop()
        values = theirs.self_cost if identity else _reorder(theirs.self_cost, order)
        own = mine.self_cost
        for i, value in enumerate(values):
            own[i] -= value
        if theirs.calls is not None and mine.calls is not None and theirs.index != 0:
            mine.calls -= theirs.calls
        for fid, child in theirs.children.items():
            push((child, mine.child(ids[fid])))
    return out.finalize()


def _subtract_costs(current: dict, mark: dict, order: list[int | None]) -> dict:
    out = {k: list(v) for k, v in current.items()}
    for key, values in mark.items():
        slot = out.setdefault(key, [0.0] * len(order))
        for i, value in enumerate(_reorder(values, order)):
            slot[i] -= value
    return out


def subtract(current: Profile, mark: Profile) -> Profile:
    """What `current` holds beyond `mark`: the costs since a baseline was marked.

    Both are snapshots of one run (or any two profiles; `mark` is matched onto
    `current`'s frames as `align` does).  Counters that only grow give the cost of the
    phase after the mark; heap metrics such as live bytes may come out negative
    (memory freed since).
    """
    mark = same_program(mark, current)
    matcher = FrameMatcher(current.frames)
    ids = [matcher.match(frame) for frame in mark.frames]
    order = _metric_map(mark.metrics, current.metrics)
    assert current.tree is not None and mark.tree is not None
    with _bulk_nodes():
        empty = CallTree(len(order))
        parts = {label: _subtract_tree(tree, mark.parts.get(label, empty), ids, order)
                 for label, tree in current.parts.items()}
        tree = _subtract_tree(current.tree, mark.tree, ids, order)
    arcs = dict(current.arcs)
    for (caller, callee), count in mark.arcs.items():
        key = (ids[caller] if caller >= 0 else caller, ids[callee])
        arcs[key] = arcs.get(key, 0) - count
    start = mark.meta.end_time if mark.meta.end_time is not None else current.meta.start_time
    return Profile(
        meta=replace(current.meta, start_time=start), metrics=current.metrics,
        frames=matcher.frames, tree=tree, parts=parts,
        arcs={k: v for k, v in arcs.items() if v},
        line_costs=_subtract_costs(current.line_costs, mark.line_costs, order),
        address_costs=_subtract_costs(current.address_costs, mark.address_costs, order),
        address_sites={**mark.address_sites, **current.address_sites},
        functions=None, sources=current.sources, timeline=current.timeline)


def _program_module(profile: Profile) -> str | None:
    """The module path of the profiled program's own frames (named by argv[0]), if any."""
    if not profile.meta.argv:
        return None
    wanted = profile.meta.argv[0].rsplit("/", 1)[-1]
    return next((f.module for f in profile.frames if f.module_name == wanted), None)


def same_program(base: Profile, new: Profile) -> Profile:
    """`base` with its program's frames moved to NEW's program module when the two
    programs have different names (prog-v1, prog-v2): they are two builds of one
    program, and their functions should match.  Libraries keep their names."""
    mine, theirs = _program_module(base), _program_module(new)
    if mine is None or theirs is None:
        return base
    mine_name, theirs_name = mine.rsplit("/", 1)[-1], theirs.rsplit("/", 1)[-1]
    if mine_name == theirs_name or any(f.module_name == theirs_name for f in base.frames):
        return base
    frames = FrameTable([replace(f, module=theirs) if f.module == mine else f
                         for f in base.frames])
    if len(frames) != len(base.frames):  # two frames became one: ids would shift
        return base
    return replace(base, frames=frames)
