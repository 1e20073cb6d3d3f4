"""Views of a profile diff: per-function deltas and the calling contexts that changed most.

`diff_profiles(base, new, metric)` aligns BASE onto NEW (`diff.align`: frames match by
function name and module base name; the profiled programs' own frames match even when
the two builds are named differently, `diff.same_program`) and returns a `ProfileDiff`:

* `functions` - one `FunctionDelta` per function of either side: self and total cost
  in the metric's unit (`base_*`, `new_*`), the same as shares of each profile's own
  total in percent, their changes (absolute, and percentage points of share) and
  ratios; `status` is "both", "new" (only in NEW) or "gone" (only in BASE).
* `paths` - `PathDelta`s: calling contexts (root-to-node paths) whose total changed
  most, found by walking NEW's tree and the aligned BASE tree together, so contexts
  only in BASE count too.  A context whose change one child explains (a child
  changed the same way by at least `EXPLAINED` of it) is left out: its child is the
  place that changed, and listing every ancestor of it says nothing new.

Normalisation: "shares" compares each profile's share of its own total (runs of
different length compare fairly: pprof's `-normalize`, perf diff's default);
"absolute" compares raw costs (pprof's `-diff_base`).  Sorting uses the chosen one.
Pure functions, no I/O; walks are iterative (trees can be 100,000 deep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.diff import align
from proftui.collectors.model.profile import (
    CallNode,
    Frame,
    FrameTable,
    FunctionCost,
    Profile,
)
from proftui.collectors.model.views import FlatEntry, function_costs

NORMALISATIONS = ("shares", "absolute")
NEW, GONE = "new", "gone"  # FunctionDelta.status / FunctionChange.status of one-sided rows
EXPLAINED = 0.9  # a child carrying this much of a path's change stands for the path


def _share(value: float, whole: float) -> float:
    return 100.0 * value / whole if whole else 0.0


def _ratio(new: float, base: float) -> float | None:
    """new / base; None when base is zero (a function new in NEW, or both zero)."""
    return new / base if base else None


@dataclass(frozen=True, slots=True)
class Change:
    """One quantity on both sides: raw costs, shares of each side's total (percent)."""

    base: float
    new: float
    base_share: float
    new_share: float

    @property
    def delta(self) -> float:
        """NEW - BASE in the metric's unit."""
        return self.new - self.base

    @property
    def points(self) -> float:
        """NEW's share - BASE's share, in percentage points."""
        return self.new_share - self.base_share

    @property
    def ratio(self) -> float | None:
        return _ratio(self.new, self.base)

    def change(self, normalisation: str) -> float:
        """The change that sorting uses: points for "shares", delta for "absolute"."""
        return self.points if normalisation == "shares" else self.delta


def _change(base: float, new: float, base_whole: float, new_whole: float) -> Change:
    return Change(base, new, _share(base, base_whole), _share(new, new_whole))


def _status(in_base: bool, in_new: bool) -> str:
    return "both" if in_base and in_new else ("new" if in_new else "gone")


@dataclass(frozen=True, slots=True)
class FunctionDelta:
    """A function's self and total cost in BASE and NEW."""

    frame: Frame  # NEW's frame, or BASE's for a function gone from NEW
    status: str  # "both", "new" (only in NEW), "gone" (only in BASE)
    self_cost: Change
    total_cost: Change
    base_calls: int | None
    new_calls: int | None


@dataclass(frozen=True, slots=True)
class PathDelta:
    """A calling context with its total and self cost on both sides.

    `node` is the context's node in NEW's tree or, for a context only in BASE, in the
    aligned BASE tree; both use the aligned frame ids of `table`."""

    node: CallNode
    table: FrameTable
    status: str
    total_cost: Change
    self_cost: Change

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The context's frames, outermost caller first."""
        return tuple(self.table[f] for f in self.node.path())


@dataclass(frozen=True, slots=True)
class ProfileDiff:
    """The comparison of two profiles in one metric (see the module docstring)."""

    metric_name: str
    unit: str
    base_total: float
    new_total: float
    functions: list[FunctionDelta]
    paths: list[PathDelta]

    def sorted_functions(self, normalisation: str = "shares", by: str = "self"
                         ) -> list[FunctionDelta]:
        """Largest change first (of self or total cost, in `normalisation`), then by name."""
        def key(d: FunctionDelta) -> tuple[float, float, str]:
            first, second = (d.self_cost, d.total_cost) if by == "self" else \
                (d.total_cost, d.self_cost)
            return (-abs(first.change(normalisation)), -abs(second.change(normalisation)),
                    d.frame.function)
        return sorted(self.functions, key=key)

    def sorted_paths(self, normalisation: str = "shares") -> list[PathDelta]:
        """Contexts whose total changed most first (the explained ones already left out)."""
        kept = [p for p in self.paths if p.total_cost.change(normalisation)]
        # ties: shallower first, then by the innermost function's name (cheap: no paths)
        return sorted(kept, key=lambda p: (-abs(p.total_cost.change(normalisation)),
                                           p.node.depth(), p.table[p.node.frame_id].function))


class MetricError(ProftuiError):
    """The metric asked for is missing on one side, or the sides share none."""


def common_metric(base: Profile, new: Profile, name: str | None = None) -> str:
    """`name` when both profiles have it, else the first of NEW's metrics BASE has too."""
    base_names = [m.name for m in base.metrics]
    new_names = [m.name for m in new.metrics]
    if name is not None:
        for side, names in (("BASE", base_names), ("NEW", new_names)):
            if name not in names:
                raise MetricError(f"metric {name!r} is not in {side} (it has: "
                                  f"{', '.join(names) or 'no metrics'})")
        return name
    for candidate in new_names:
        if candidate in base_names:
            return candidate
    raise MetricError(f"the profiles share no metric (BASE has {', '.join(base_names) or 'none'}"
                      f"; NEW has {', '.join(new_names) or 'none'})")


def _per_function(profile: Profile, function_ids: list[int]) -> dict[int, FunctionCost]:
    """Function id -> cost; the collector's own totals (gprof) when it gave them."""
    if profile.functions is None:
        return function_costs(profile.tree, function_ids)
    out: dict[int, FunctionCost] = {}
    for fid, cost in profile.functions.items():
        key = function_ids[fid] if fid < len(function_ids) else fid
        slot = out.setdefault(key, FunctionCost([0.0] * len(cost.self_cost),
                                                [0.0] * len(cost.total_cost)))
        for i, value in enumerate(cost.self_cost):
            slot.self_cost[i] += value
        for i, value in enumerate(cost.total_cost):
            slot.total_cost[i] += value
        if cost.calls is not None:
            slot.calls = (slot.calls or 0) + cost.calls
    return out


def diff_profiles(base: Profile, new: Profile, metric: str | None = None) -> ProfileDiff:
    """Compare finalized `base` and `new` in `metric` (default: `common_metric`).

    Frames match by function name and module base name (`diff.frame_key`); the
    programs themselves match even when named differently (`diff.same_program`)."""
    name = common_metric(base, new, metric)
    # aligned.metrics == new.metrics; frame ids: NEW's, then BASE-only frames
    aligned = align(base, new)
    m = new.metric_index(name)
    unit = new.metrics[m].unit
    base_whole, new_whole = aligned.total(m), new.total(m)
    function_ids = aligned.frames.function_ids()  # NEW's ids are a prefix of the table
    base_costs = _per_function(aligned, function_ids)
    new_costs = _per_function(new, function_ids)
    functions = []
    for fid in sorted(set(base_costs) | set(new_costs)):
        b, n = base_costs.get(fid), new_costs.get(fid)
        in_base = b is not None and (b.total_cost[m] != 0 or b.self_cost[m] != 0)
        in_new = n is not None and (n.total_cost[m] != 0 or n.self_cost[m] != 0)
        if not (in_base or in_new):
            continue  # costs nothing in this metric on either side
        functions.append(FunctionDelta(
            frame=aligned.frames[fid], status=_status(in_base, in_new),
            self_cost=_change(b.self_cost[m] if b else 0.0, n.self_cost[m] if n else 0.0,
                              base_whole, new_whole),
            total_cost=_change(b.total_cost[m] if b else 0.0, n.total_cost[m] if n else 0.0,
                               base_whole, new_whole),
            base_calls=b.calls if b else None, new_calls=n.calls if n else None))
    paths = _path_deltas(aligned, new, m, base_whole, new_whole)
    return ProfileDiff(name, unit, base_whole, new_whole, functions, paths)


# Contexts holding at most this share of both profiles are noise, not listed, and their
# callees neither (a callee can never cost more than its caller): on a run of millions
# of distinct paths the walk stays in the few thousand contexts a report can show.
PATH_FLOOR = 1e-5


def _path_deltas(aligned: Profile, new: Profile, m: int, base_whole: float,
                 new_whole: float) -> list[PathDelta]:
    """Every context of either tree whose change no single child explains, in both
    normalisations (a context kept in one is listed; `sorted_paths` ranks).  Both trees
    are walked in lockstep over their columns (node -1: the context is not there)."""
    bt, nt = aligned.tree, new.tree
    assert bt is not None and nt is not None
    b_index, b_frames, n_frames = bt.index(), bt.frames, nt.frames
    b_total, n_total = bt.totals[m], nt.totals[m]
    b_self, n_self = bt.selfs[m], nt.selfs[m]

    def moved(b: int, n: int) -> tuple[float, float]:
        """(absolute change, change in points) of a context's total."""
        old = b_total[b] if b >= 0 else 0.0
        now = n_total[n] if n >= 0 else 0.0
        return now - old, _share(now, new_whole) - _share(old, base_whole)

    out: list[PathDelta] = []
    # (base node, new node, its change): one context in both trees.  No path tuples on
    # the stack: a 100,000-deep chain would make that quadratic.
    stack: list[tuple[int, int, tuple[float, float]]] = [(0, 0, (0.0, 0.0))]
    floor_b = PATH_FLOOR * base_whole
    floor_n = PATH_FLOOR * new_whole
    while stack:
        b, n, change = stack.pop()
        if b != 0 and (b_total[b] if b >= 0 else 0.0) <= floor_b and \
                (n_total[n] if n >= 0 else 0.0) <= floor_n:
            continue  # nothing below can change by more than the noise floor either
        kids: list[tuple[int, int, tuple[float, float]]] = []
        seen: set[int] = set()
        for cn in nt.children(n) if n >= 0 else ():
            fid = n_frames[cn]
            seen.add(fid)
            cb = b_index.get(b << 32 | fid, -1) if b >= 0 else -1
            kids.append((cb, cn, moved(cb, cn)))
        for cb in bt.children(b) if b >= 0 else ():
            if b_frames[cb] not in seen:
                kids.append((cb, -1, moved(cb, -1)))
        stack.extend(kids)
        if b == 0 or n == 0:
            continue  # the root: the whole profile, not a context
        if _explained(change[0], [k[2][0] for k in kids]) and \
                _explained(change[1], [k[2][1] for k in kids]):
            continue
        in_base = b >= 0 and b_total[b] != 0
        in_new = n >= 0 and n_total[n] != 0
        if not (in_base or in_new):
            continue
        node = CallNode(nt, n) if n >= 0 else CallNode(bt, b)
        out.append(PathDelta(
            node, aligned.frames, _status(in_base, in_new),
            _change(b_total[b] if b >= 0 else 0.0, n_total[n] if n >= 0 else 0.0,
                    base_whole, new_whole),
            _change(b_self[b] if b >= 0 else 0.0, n_self[n] if n >= 0 else 0.0,
                    base_whole, new_whole)))
    return out


def _explained(change: float, children: list[float]) -> bool:
    """Whether one child changed the same way by at least EXPLAINED of `change`."""
    if not change:
        return True  # nothing changed here (in this normalisation)
    return any(c * change > 0 and abs(c) >= EXPLAINED * abs(change) for c in children)


def path_names(path: PathDelta) -> list[str]:
    """Function names of a context, outermost first ([inlined] marked)."""
    return [f.function + (" [inlined]" if f.inlined else "") for f in path.frames]


# The TUI's Δ columns (flat profile, tree): changes of FlatEntry rows against the
# baseline's, both from `flat_profile` of profiles sharing frame ids (`diff.align`).

def change(new: float, base: float, new_whole: float, base_whole: float,
           normalise: str) -> float:
    """`new` - `base`: in points of each side's whole ("shares") or in cost units."""
    return _change(base, new, base_whole, new_whole).change(normalise)


class FunctionChange(NamedTuple):
    """One function's change in the metric shown; `status` is "", NEW or GONE.

    A named tuple, not a frozen dataclass: 50,000 are made per `a` press or snapshot."""

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
    key = (metric, whole, base_whole, normalise)
    for seen_entries, seen_base, seen_key, seen in _RECENT:
        if seen_entries is entries and seen_base is base_entries and seen_key == key:
            return seen  # `a` pressed back and forth: both answers are remembered
    base = {e.frame_id: e for e in base_entries}
    out: dict[int, FunctionChange] = {}
    shares = normalise == "shares"
    # The arithmetic of `change`, inlined: this runs per function on each `a` press or
    # new snapshot (50,000 functions: a Change object per cell cost ~0.3 s).
    for e in entries:
        b = base.get(e.frame_id)
        if b is not None and metric < len(b.total_cost):
            b_self, b_total = b.self_cost[metric], b.total_cost[metric]
        else:
            b_self = b_total = 0.0
        n_self, n_total = e.self_cost[metric], e.total_cost[metric]
        status = NEW if n_total > 0 and b_total <= 0 else \
            GONE if b_total > 0 and n_total <= 0 else ""
        if shares:
            d_self = (100.0 * n_self / whole if whole else 0.0) \
                - (100.0 * b_self / base_whole if base_whole else 0.0)
            d_total = (100.0 * n_total / whole if whole else 0.0) \
                - (100.0 * b_total / base_whole if base_whole else 0.0)
        else:
            d_self, d_total = n_self - b_self, n_total - b_total
        out[e.frame_id] = FunctionChange(d_self, d_total, status)
    _RECENT.insert(0, (entries, base_entries, key, out))
    del _RECENT[_RECENT_SIZE:]
    return out


# The last few answers of `function_changes`, by the identity of its row lists (kept
# alive here, so an id is never reused meanwhile): the shares and absolute answers of
# one snapshot, and the previous snapshot's.  The callers never mutate the dicts.
_RECENT_SIZE = 4
_RECENT: list[tuple[Sequence[FlatEntry], Sequence[FlatEntry], tuple[object, ...],
                    dict[int, FunctionChange]]] = []
