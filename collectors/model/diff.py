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

from collections.abc import Sequence
from dataclasses import replace

from proftui.collectors.model.lines import add_cost_tables
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
        """The id standing for `frame`'s function (added to the table when new): the same
        frame if the table has it (two snapshots of one run), else by name and module."""
        same = self.frames.find(frame)
        if same is not None:
            return same
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
    out = tree.remapped(ids, order)
    out.cut_depth = tree.cut_depth
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
    tree = _remap_tree(base.tree, ids, order)
    parts = {label: tree if t is base.tree else _remap_tree(t, ids, order)
             for label, t in base.parts.items()}
    return Profile(
        meta=base.meta, metrics=onto.metrics, frames=matcher.frames,
        tree=tree, parts=parts,
        arcs=arcs,
        line_costs=add_cost_tables({}, base.line_costs, metric_map=order),
        address_costs=add_cost_tables({}, base.address_costs, metric_map=order),
        address_sites=dict(base.address_sites), functions=functions,
        sources=base.sources, timeline=base.timeline, leaks=base.leaks)


def counterpart(node: CallNode, tree: CallTree) -> CallNode | None:
    """The node of `tree` at `node`'s path of frame ids (trees aligned by `align`), or None."""
    found: CallNode | None = tree.root
    for frame_id in node.path():
        if found is None:
            return None
        found = found.children.get(frame_id)
    return found if node.frame_id != ROOT_FRAME else tree.root


def _subtract_tree(current: CallTree, mark: CallTree, ids: list[int],
                   order: list[int | None]) -> CallTree:
    """`current` minus `mark`, whose frame ids map through `ids` and costs through `order`
    (`align`'s mapping): a copy of `current` with the mark folded in negatively (siblings
    that map to one id subtract from one node, as they merge in `align`)."""
    out = current.copy()
    out.add_tree(0, mark, sign=-1.0, frame_map=ids, metric_map=order)
    return out.finalize()


def _subtract_costs(current: dict, mark: dict, order: list[int | None]) -> dict:
    out = {k: list(v) for k, v in current.items()}
    add_cost_tables(out, mark, sign=-1.0, metric_map=order)
    return out


def subtract(current: Profile, mark: Profile) -> Profile:
    """What `current` holds beyond `mark`: the costs since a baseline was marked, or
    since the counters were reset (`r`): both keys use this one subtraction.

    Both are snapshots of one run (or any two profiles; `mark` is matched onto
    `current`'s frames as `align` does: the same frame where it is there, else by
    name and module).  The rule, one for every use: nothing is clamped.  Counters
    that only grow give the cost of the phase after the mark; heap metrics such as
    live bytes may come out negative (memory freed since), and that is the answer.
    """
    mark = same_program(mark, current)
    matcher = FrameMatcher(current.frames)
    ids = [matcher.match(frame) for frame in mark.frames]
    order = _metric_map(mark.metrics, current.metrics)
    tree = _subtract_tree(current.tree, mark.tree, ids, order)
    empty = CallTree(len(order))
    parts = {label: tree if part is current.tree and mark.parts.get(label) is mark.tree
             else _subtract_tree(part, mark.parts.get(label, empty), ids, order)
             for label, part in current.parts.items()}
    arcs = dict(current.arcs)
    for (caller, callee), count in mark.arcs.items():
        key = (ids[caller] if caller >= 0 else caller, ids[callee])
        arcs[key] = arcs.get(key, 0) - count
    start = mark.meta.end_time if mark.meta.end_time is not None else current.meta.start_time
    return Profile(
        meta=replace(current.meta, start_time=start,
                     dropped=current.meta.dropped - mark.meta.dropped),
        metrics=current.metrics,
        frames=matcher.frames, tree=tree, parts=parts,
        arcs={k: v for k, v in arcs.items() if v},
        line_costs=_subtract_costs(current.line_costs, mark.line_costs, order),
        address_costs=_subtract_costs(current.address_costs, mark.address_costs, order),
        address_sites={**mark.address_sites, **current.address_sites},
        functions=None, sources=current.sources, timeline=current.timeline,
        leaks=current.leaks)


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
