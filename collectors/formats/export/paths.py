"""Call paths for the path-per-sample formats (folded, pprof, speedscope), depth-bounded.

Those formats spell out every costed call path in full, so their size is the
sum of path lengths: a 100,000-deep recursion would be 5 * 10^9 frames.  Paths
are cut at `EXPORT_MAX_DEPTH`: the node at that depth keeps its own self cost,
and everything below it becomes one extra path ending in the `CUT` pseudo-frame
whose cost is that subtree's total, so flame graph widths stay right.  Nodes
below the cut are never visited: the walk is linear in the nodes shown.
"""

from __future__ import annotations

from collections.abc import Iterator

from proftui.collectors.model.profile import CallNode, CallTree

EXPORT_MAX_DEPTH = 1024  # more levels than perf records by default (127)
CUT = -2  # pseudo frame id: "the calls deeper than EXPORT_MAX_DEPTH", see cut_label
CUT_LABEL = f"[calls deeper than {EXPORT_MAX_DEPTH} levels]"


def costed_paths(tree: CallTree, max_depth: int = EXPORT_MAX_DEPTH
                 ) -> Iterator[tuple[CallNode, bool, list[float]]]:
    """(node, cut, costs) for every node with self cost, in pre-order, at most `max_depth` deep.

    `cut` is False for a node's own self cost; True for the cost of the calls
    below a node at `max_depth` (its path then ends with `CUT`).
    """
    stack = [(c, 1) for c in reversed(tree.root.children.values())]
    while stack:
        node, depth = stack.pop()
        if any(node.self_cost):
            yield node, False, list(node.self_cost)
        if not node.children:
            continue
        if depth >= max_depth:
            below = [max(0.0, t - s) for t, s in zip(node.total_cost, node.self_cost,
                                                       strict=True)]
            if any(below):
                yield node, True, below
            continue
        stack.extend((c, depth + 1) for c in reversed(node.children.values()))


def path_of(node: CallNode, cut: bool) -> list[int]:
    """Frame ids from the outermost caller down to `node`, then `CUT` when `cut`."""
    path = node.path()
    if cut:
        path.append(CUT)
    return path
