"""Per-function and per-node changes against a baseline aligned by `diff.align`.

The TUI's delta columns read these: a function's change in self and total cost,
either in percentage points of each profile's own total ("shares": what
pprof's `-diff_base` with `-normalize` and Gregg's differential flame graphs
show) or in the metric's units ("absolute").  Functions of the baseline that
the new profile lacks come back as rows of zero cost, marked "gone".

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proftui.collectors.model.profile import CallNode, CallTree
from proftui.collectors.model.views import FlatEntry

NORMALISATIONS = ("shares", "absolute")
NEW, GONE = "new", "gone"


def change(new: float, base: float, new_whole: float, base_whole: float,
           normalise: str) -> float:
    """`new` - `base`: in points of each side's whole ("shares") or in cost units."""
    if normalise == "absolute":
        return new - base
    return (100.0 * new / new_whole if new_whole else 0.0) - \
        (100.0 * base / base_whole if base_whole else 0.0)


@dataclass(frozen=True, slots=True)
class FunctionChange:
    """One function's change in the metric shown; `status` is "", NEW or GONE."""

    self_delta: float
    total_delta: float
    status: str


def gone_entries(entries: Sequence[FlatEntry], base_entries: Sequence[FlatEntry],
                 n_metrics: int) -> list[FlatEntry]:
    """Rows for the baseline's functions that `entries` lacks: zero cost, no calls."""
    have = {e.frame_id for e in entries}
    zero = (0.0,) * n_metrics
    return [FlatEntry(e.frame_id, e.frame, zero, zero, None, 0.0, 0.0)
            for e in base_entries if e.frame_id not in have and any(e.total_cost)]


def function_changes(entries: Sequence[FlatEntry], base_entries: Sequence[FlatEntry],
                     metric: int, whole: float, base_whole: float,
                     normalise: str) -> dict[int, FunctionChange]:
    """The change of every function of `entries` (gone rows included), by frame id.

    Both lists come from `flat_profile` of profiles sharing frame ids (the
    baseline aligned onto the new one), for the same thread or process.
    """
    base = {e.frame_id: e for e in base_entries}
    out: dict[int, FunctionChange] = {}
    for e in entries:
        b = base.get(e.frame_id)
        b_self = b.self_cost[metric] if b is not None and metric < len(b.self_cost) else 0.0
        b_total = b.total_cost[metric] if b is not None and metric < len(b.total_cost) else 0.0
        n_self, n_total = e.self_cost[metric], e.total_cost[metric]
        status = NEW if n_total > 0 and b_total <= 0 else \
            GONE if b_total > 0 and n_total <= 0 else ""
        out[e.frame_id] = FunctionChange(
            change(n_self, b_self, whole, base_whole, normalise),
            change(n_total, b_total, whole, base_whole, normalise), status)
    return out


def counterpart_of(node: CallNode, base: CallTree) -> CallNode | None:
    """The node of `base` at `node`'s path of frame ids below its own tree's root.

    Like `diff.counterpart`, for the derived trees (bottom-up, callers, callees)
    whose roots are not the profile's root."""
    path: list[int] = []
    current: CallNode | None = node
    while current is not None and current.parent is not None:
        path.append(current.frame_id)
        current = current.parent
    found: CallNode | None = base.root
    for frame_id in reversed(path):
        if found is None:
            return None
        found = found.children.get(frame_id)
    return found


def root_of(node: CallNode) -> CallNode:
    """The root of `node`'s tree."""
    while node.parent is not None:
        node = node.parent
    return node
