"""A calling-context tree estimated from gprof's caller -> callee arcs.

gprof knows how often each arc was taken, not which stacks time was spent
under.  Like gprof's own propagation, a function's time is divided among its
callers by their share of its calls, and that share is carried down the tree.

Mutually recursive functions (a cycle, gprof's `<cycle N as a whole>`) are one
unit whose time is counted once: the cycle's share is divided among the calls
it receives from outside, and each entry into the cycle shows every member
exactly once (a spanning tree of the cycle's own arcs, hottest arc first).
So every function's self time is spread over its contexts with shares that
sum to one, and the root's total is the histogram's total.

The walk is iterative and bounded: subtrees carrying less than MIN_FRACTION of
a function's time, or past MAX_NODES nodes, are not expanded; their time is
kept in the node where the walk stopped, so no time is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proftui.collectors.gprof.analysis import GprofResult
from proftui.collectors.model.profile import CallNode, CallTree

MAX_NODES = 50_000  # a tree this size is already far more detail than arcs can support
MIN_FRACTION = 1e-6  # share of a function's time below which its subtree is folded


@dataclass
class _Graph:
    """The arcs, cycles and subtree times the walk needs, computed once."""

    result: GprofResult
    cycle_of: list[int]  # cycle index of each function, -1 outside cycles
    external: list[int]  # calls each cycle receives from outside it
    children: dict[int, list[tuple[int, int]]]  # caller -> [(callee, calls)], hottest first
    cycle_total: list[float]  # self + child ticks of each cycle as a whole

    def received(self, index: int) -> int:
        """Calls that one entry's share is measured against (a cycle's: from outside)."""
        c = self.cycle_of[index]
        return self.external[c] if c >= 0 else self.result.calls[index]

    def subtree_ticks(self, index: int) -> float:
        """Time below an entry into `index` (the whole cycle's for a cycle member)."""
        c = self.cycle_of[index]
        if c >= 0:
            return self.cycle_total[c]
        return self.result.exact_ticks[index] + self.result.exact_child_ticks[index]


def estimated_tree(result: GprofResult, frame_id: Callable[[int], int],
                   ns_per_tick: float, outside_id: Callable[[], int] | None = None) -> CallTree:
    """Tree with self time in ns per node and estimated call counts.

    Nodes hold the exact split of samples (`exact_ticks`), so the root's total is
    the histogram's total (gprof's % time denominator).

    `outside_id` gives a frame for histogram samples outside every symbol; they
    hang under the root so its total stays the histogram's total.
    """
    graph = _graph(result)
    tree = CallTree(1)
    budget = [MAX_NODES]
    for index in result.reported:
        if _is_root(graph, index):
            # Called only from outside the profiled code (gprof's <spontaneous>): all of its
            # time is under the root, with a call count nobody recorded.
            _expand(tree.root, index, 1.0, None, graph, frame_id, ns_per_tick, budget)
    if result.outside_ticks > 1e-9 * result.total_ticks and outside_id is not None:
        tree.root.child(outside_id()).self_cost[0] += result.outside_ticks * ns_per_tick
    return tree


def _graph(result: GprofResult) -> _Graph:
    n = len(result.table.symbols)
    cycle_of = [-1] * n
    for c, members in enumerate(result.cycles):
        for m in members:
            cycle_of[m] = c
    children: dict[int, list[tuple[int, int]]] = {}
    external = [0] * len(result.cycles)
    cycle_total = [0.0] * len(result.cycles)
    for (parent, child), count in sorted(result.arcs.items(), key=lambda a: (-a[1], a[0])):
        if parent == child or not count:
            continue
        children.setdefault(parent, []).append((child, count))
        c = cycle_of[child]
        if c >= 0 and cycle_of[parent] != c:
            external[c] += count
    for c, members in enumerate(result.cycles):
        # The cycle's self time plus what flows in from callees outside it (analyze's
        # child_ticks of a member hold only its arcs leaving the cycle).
        cycle_total[c] = sum(result.exact_ticks[m] + result.exact_child_ticks[m]
                             for m in members)
    return _Graph(result, cycle_of, external, children, cycle_total)


def _is_root(graph: _Graph, index: int) -> bool:
    """Whether no recorded arc calls `index` (for a cycle: its lowest member, when nothing
    outside the cycle calls it).  `analyze` counts calls from arcs alone, so any recorded
    caller explains all of a function's calls."""
    c = graph.cycle_of[index]
    if c >= 0:
        return not graph.external[c] and index == min(graph.result.cycles[c])
    return graph.result.calls[index] == 0


def _expand(parent_node: CallNode, index: int, share: float, calls: int | None,
            graph: _Graph, frame_id: Callable[[int], int], ns_per_tick: float,
            budget: list[int]) -> None:
    """Grow the subtree of one root, depth first, without recursion."""
    result = graph.result
    # (parent node, function, share of it, estimated calls, members of the cycle entry
    # already placed: one set per entry into a cycle, shared by the whole entry)
    work: list[tuple[CallNode, int, float, int | None, set[int] | None]] = [
        (parent_node, index, share, calls, {index} if graph.cycle_of[index] >= 0 else None)]
    while work:
        parent, fn, frac, ncalls, placed = work.pop()
        if budget[0] <= 0:
            # Out of nodes: this entry's time stays with the node that would have held it.
            _fold(parent, fn, frac, placed, graph, ns_per_tick)
            continue
        budget[0] -= 1
        node = parent.child(frame_id(fn))
        node.self_cost[0] += result.exact_ticks[fn] * ns_per_tick * frac
        if ncalls is not None:
            node.add_calls(ncalls)
        cycle = graph.cycle_of[fn]
        for child, count in graph.children.get(fn, ()):
            child_calls = round(count * frac)
            if cycle >= 0 and graph.cycle_of[child] == cycle:
                assert placed is not None
                if child not in placed:  # the rest of the cycle, each member once per entry
                    placed.add(child)
                    work.append((node, child, frac, child_calls, placed))
                continue
            received = graph.received(child)
            if received == 0:
                continue
            child_frac = frac * count / received
            if child_frac < MIN_FRACTION:
                node.self_cost[0] += graph.subtree_ticks(child) * child_frac * ns_per_tick
                continue
            entry = {child} if graph.cycle_of[child] >= 0 else None
            work.append((node, child, child_frac, child_calls, entry))


def _fold(node: CallNode, fn: int, frac: float, placed: set[int] | None, graph: _Graph,
          ns_per_tick: float) -> None:
    """Add an unexpanded entry's time to `node`: a function's self + callees, or for a
    cycle member only its own share (the entry's other members are folded one by one)."""
    result = graph.result
    if graph.cycle_of[fn] >= 0:
        ticks = result.exact_ticks[fn] + result.exact_child_ticks[fn]
        # Members the entry has not placed yet are folded when their items come up; ones
        # it never will (reached only through this member) are added here.
        cycle = graph.cycle_of[fn]
        assert placed is not None
        for member in result.cycles[cycle]:
            if member not in placed:
                placed.add(member)
                ticks += result.exact_ticks[member] + result.exact_child_ticks[member]
    else:
        ticks = result.exact_ticks[fn] + result.exact_child_ticks[fn]
    node.self_cost[0] += ticks * frac * ns_per_tick
