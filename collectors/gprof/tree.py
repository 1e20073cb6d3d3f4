"""A calling-context tree estimated from gprof's caller -> callee arcs.

gprof knows how often each arc was taken, not which stacks time was spent
under.  Like gprof's own propagation, a function's time is divided among its
callers by their share of its calls, and that share is carried down the
tree.  Mutually recursive functions (a cycle) are entered as a unit: each
member appears once per entry into the cycle, scaled by the entry's share of
the calls the cycle receives from outside.
"""

from __future__ import annotations

from collections.abc import Callable

from proftui.collectors.gprof.analysis import GprofResult
from proftui.collectors.model.profile import CallNode, CallTree

MAX_NODES = 200_000  # beyond this the estimate is cut (a warning would be noise: shares are tiny)
MIN_FRACTION = 1e-9  # subtrees carrying less than this share of a function are dropped


def estimated_tree(result: GprofResult, frame_id: Callable[[int], int],
                   ns_per_tick: float) -> CallTree:
    """Tree with self time in ns per node and estimated call counts."""
    n = len(result.table.symbols)
    cycle_of = [-1] * n
    for c, members in enumerate(result.cycles):
        for m in members:
            cycle_of[m] = c
    children: dict[int, list[tuple[int, int]]] = {}
    for (parent, child), count in sorted(result.arcs.items()):
        if parent != child and count:
            children.setdefault(parent, []).append((child, count))
    external = _external_calls(result, cycle_of)
    tree = CallTree(1)
    budget = [MAX_NODES]
    for index in result.reported:
        if _is_root(result, external, cycle_of, index):
            # Called only from outside the profiled code (gprof's <spontaneous>): all of its
            # time is under the root, with a call count nobody recorded.
            _expand(tree.root, index, 1.0, None, result, children, cycle_of, external,
                    frame_id, ns_per_tick, budget)
    return tree


def _received(result: GprofResult, external: list[int], cycle_of: list[int], index: int) -> int:
    """Calls an entry into `index` is measured against: its cycle's external calls."""
    return external[cycle_of[index]] if cycle_of[index] >= 0 else result.calls[index]


def _external_calls(result: GprofResult, cycle_of: list[int]) -> list[int]:
    external = [0] * len(result.cycles)
    for (parent, child), count in result.arcs.items():
        c = cycle_of[child]
        if c >= 0 and cycle_of[parent] != c:
            external[c] += count
    return external


def _is_root(result: GprofResult, external: list[int], cycle_of: list[int], index: int) -> bool:
    """Whether no recorded arc calls `index` (for a cycle: its lowest member, when nothing
    outside the cycle calls it).  `analyze` counts calls from arcs alone, so any recorded
    caller explains all of a function's calls."""
    if cycle_of[index] >= 0:
        return not external[cycle_of[index]] and index == min(result.cycles[cycle_of[index]])
    return result.calls[index] == 0


def _expand(parent_node: CallNode, index: int, share: float, calls: int | None,
            result: GprofResult, children: dict[int, list[tuple[int, int]]],
            cycle_of: list[int], external: list[int], frame_id: Callable[[int], int],
            ns_per_tick: float, budget: list[int]) -> None:
    # Work items: (parent node, function, share of its cycle/function, calls, cycle visited set)
    work: list[tuple[CallNode, int, float, int | None, frozenset[int]]] = [
        (parent_node, index, share, calls, frozenset())]
    while work:
        parent, fn, frac, ncalls, cycle_seen = work.pop()
        if budget[0] <= 0:
            return
        budget[0] -= 1
        node = parent.child(frame_id(fn))
        node.self_cost[0] += result.self_ticks[fn] * ns_per_tick * frac
        if ncalls is not None:
            node.add_calls(ncalls)
        cycle = cycle_of[fn]
        seen = cycle_seen | {fn} if cycle >= 0 else frozenset()
        own_calls = _received(result, external, cycle_of, fn)
        for child, count in children.get(fn, ()):
            if cycle >= 0 and cycle_of[child] == cycle:
                if child not in seen:  # the rest of the cycle, once per entry
                    work.append((node, child, frac, round(count * frac), seen | {child}))
                continue
            received = _received(result, external, cycle_of, child)
            if received == 0:
                continue
            child_frac = frac * count / received
            if child_frac < MIN_FRACTION:
                continue
            child_seen = frozenset({child}) if cycle_of[child] >= 0 else frozenset()
            work.append((node, child, child_frac,
                         round(count * (frac if own_calls else 1.0)), child_seen))
