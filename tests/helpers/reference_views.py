"""The pure-Python derivations the native core replaced (views.py, slices.py, flame.py
before csrc/core/), over the reference CallTree (tests/helpers/reference_calltree.py):
what tests/unit/test_core.py compares the native ones with, bit for bit."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence

from proftui.collectors.model.lines import add_cost_tables
from proftui.collectors.model.profile import FunctionCost
from proftui.collectors.model.slices import Slices

from tests.helpers.reference_calltree import CallTree


def from_model(tree: object) -> CallTree:
    """A reference tree with the same columns as a model tree."""
    parents = array("q", tree.parents)  # type: ignore[attr-defined]
    out = CallTree.from_columns(tree.n_metrics, parents,  # type: ignore[attr-defined]
                                array("q", tree.frames),  # type: ignore[attr-defined]
                                [array("d", c) for c in tree.selfs],  # type: ignore[attr-defined]
                                array("q", tree.calls))  # type: ignore[attr-defined]
    return out.finalize()


def _same_function(frame_id: int, function_ids: list[int] | None) -> Callable[[int], bool]:
    if function_ids is None or frame_id >= len(function_ids):
        return frame_id.__eq__
    wanted = function_ids[frame_id]
    return lambda fid: fid < len(function_ids) and function_ids[fid] == wanted


def outermost_nodes(tree: CallTree, frame_id: int, function_ids: list[int] | None) -> list[int]:
    same = _same_function(frame_id, function_ids)
    frames, first, sibling = tree.frames, tree.first_child, tree.next_sibling
    out = []
    stack = tree.children(0)
    while stack:
        node = stack.pop()
        if same(frames[node]):
            out.append(node)
            continue
        child = first[node]
        while child >= 0:
            stack.append(child)
            child = sibling[child]
    return out


def function_costs(tree: CallTree, function_ids: list[int] | None = None
                   ) -> dict[int, FunctionCost]:
    frames, calls = tree.frames, tree.calls
    keys = frames.tolist() if function_ids is None else [
        function_ids[f] if 0 <= f < len(function_ids) else f for f in frames]
    keys[0] = 0
    outer = tree.outermost(keys)
    width = max(keys) + 1 if len(keys) > 1 else 1
    present = bytearray(width)
    for key in keys[1:]:
        present[key] = 1
    selfs, totals = tree.sums_by(keys, outer, width)
    counted: dict[int, int] = {}
    if max(calls) >= 0:
        for i in range(1, len(keys)):
            if calls[i] >= 0:
                counted[keys[i]] = counted.get(keys[i], 0) + calls[i]
    return {key: FunctionCost([column[key] for column in selfs],
                              [column[key] for column in totals], counted.get(key))
            for key in range(width) if present[key]}


def callee_tree(tree: CallTree, frame_id: int, function_ids: list[int]) -> CallTree:
    focused = CallTree(tree.n_metrics)
    for node in outermost_nodes(tree, frame_id, function_ids):
        focused.root.child(function_ids[frame_id]).absorb(tree.node(node))
    return focused.finalize()


def caller_tree(tree: CallTree, frame_id: int, function_ids: list[int],
                max_depth: int) -> CallTree:
    inverted = CallTree(tree.n_metrics)
    for index in outermost_nodes(tree, frame_id, function_ids):
        node = tree.node(index)
        path = node.callers_up(max_depth + 1)
        if len(path) > max_depth:
            inverted.cut_depth = max_depth
            del path[max_depth:]
        path[0] = function_ids[frame_id]
        inverted.add_stack(path, node.total_cost, node.calls)
    return inverted.finalize()


def bottom_up_tree(tree: CallTree, max_depth: int) -> CallTree:
    inverted = CallTree(tree.n_metrics)
    selfs = tree.selfs
    for i in range(1, len(tree)):
        values = [column[i] for column in selfs]
        if any(values):
            path = tree.callers_up(i, max_depth + 1)
            if len(path) > max_depth:
                inverted.cut_depth = max_depth
                del path[max_depth:]
            inverted.add_self(inverted.walk(path), values)
    return inverted.finalize()


def matched_share(tree: CallTree, metric: int, matches: Sequence[bool]) -> float:
    """flame.ShareWalk's walk from the root, in one run."""
    stack = tree.children(0)
    total = 0.0
    while stack:
        node = stack.pop()
        if matches[tree.frames[node]]:
            value = tree.totals[metric][node]
            total += value if value > 0 else 0.0
        else:
            stack.extend(tree.children(node))
    return 0.0 + total


def stack_costs(slices: Slices, first: int, last: int) -> list[array]:
    n = len(slices.index)
    out = [array("d", [0.0]) * n for _ in slices.costs]
    lo, hi = slices.offsets[first], slices.offsets[last]
    for m, column in enumerate(slices.costs):
        for e in range(lo, hi):
            out[m][slices.stacks[e]] += column[e]
    return out


def part_activity(slices: Slices, metric: int) -> list[list[float]]:
    rows = [[0.0] * len(slices) for _ in slices.index.labels]
    part, column = slices.index.part, slices.costs[metric]
    for k in range(len(slices)):
        for e in range(slices.offsets[k], slices.offsets[k + 1]):
            rows[part[slices.stacks[e]]][k] += column[e]
    return rows


def range_tree(tree: CallTree, leaves: Sequence[int], per_stack: list[array],
               n_metrics: int, index_code: Sequence[int], code_keys: list[tuple[str, int]]
               ) -> tuple[CallTree, dict[tuple[str, int], list[float]]]:
    """slices.range_profile's whole tree and address costs: the tree emptied, each stack's
    costs added at its leaf, pruned."""
    out = tree.copy()
    for column in out.selfs:
        for i in range(len(column)):
            column[i] = 0.0
    out.calls = array("q", [-1]) * len(out)
    address_costs: dict[tuple[str, int], list[float]] = {}
    for s in range(len(leaves)):
        values = [column[s] for column in per_stack]
        if not any(values):
            continue
        for m, value in enumerate(values):
            out.selfs[m][leaves[s]] += value
        if index_code[s] >= 0:
            add_cost_tables(address_costs, {code_keys[index_code[s]]: values}, width=n_metrics)
    return out.pruned(), address_costs


def neighbours(tree: CallTree, frame_id: int, function_ids: list[int], callees: bool
               ) -> list[tuple[int, list[float], int | None]]:
    """views.callers (callees False) or views.callees before the sort: (frame, summed
    totals, summed calls) in first-met order."""
    same = _same_function(frame_id, function_ids)
    table: dict[int, list] = {}

    def add(fid: int, node: int) -> None:
        cost = [column[node] for column in tree.totals]
        calls = None if tree.calls[node] < 0 else tree.calls[node]
        slot = table.get(fid)
        if slot is None:
            table[fid] = [list(cost), calls]
            return
        for i, value in enumerate(cost):
            slot[0][i] += value
        if calls is not None:
            slot[1] = calls if slot[1] is None else slot[1] + calls

    for index in tree.preorder():
        if not same(tree.frames[index]):
            continue
        node = tree.node(index)
        if callees:
            for child in node.children.values():
                add(child.frame_id, child.index)
        else:
            add(tree.frames[tree.parents[index]], index)
    return [(fid, cost, calls) for fid, (cost, calls) in table.items()]
