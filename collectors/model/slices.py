"""Costs over time, per stack: what the timeline draws and what a time range selects.

A profile built from stacks (sampler, attach) keeps, beside its trees, where each
recorded stack landed (`StackIndex`: its leaf in the whole tree and in its part's
tree, and its costed instruction) and, per time slice, what each stack cost in it
(`Slices`).  A time range then gives a profile of its own (`range_profile`) with
the same numbers a recording of only that range would have (at slice
granularity), and the timeline draws each part's activity per slice.

Bounded: slices are merged in pairs (their width doubles) whenever the entries
would pass MAX_ENTRIES, so a long run keeps a coarser, never a bigger, timeline.

A fleet profile's slices are per part only (`totals_only`: one entry per part and
slice, its leaf the part's root): enough to draw the timeline, not to build a
range's profile, which its source is asked for instead (the server, for the window).
Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from proftui.collectors.model import core
from proftui.collectors.model.lines import add_cost_tables, add_costs
from proftui.collectors.model.profile import CallTree, CodeSite, Profile

MAX_ENTRIES = 1_000_000  # (slice, stack) pairs kept; beyond, slices merge in pairs
MAX_SLICES = 2048  # and never more slices than this
END_OF_RUN = 1e9  # a range's end when none is given: the end of the run


@dataclass
class StackIndex:
    """Where each recorded stack lands, by stack number (index-aligned columns)."""

    labels: list[str] = field(default_factory=list)  # part labels
    leaf: array = field(default_factory=lambda: array("q"))  # node of the whole tree
    part: array = field(default_factory=lambda: array("q"))  # index into labels
    part_leaf: array = field(default_factory=lambda: array("q"))  # node of its part's tree
    code: array = field(default_factory=lambda: array("q"))  # index into code_keys, or -1
    code_keys: list[tuple[str, int]] = field(default_factory=list)  # (module, address)

    def __len__(self) -> int:
        return len(self.leaf)


@dataclass
class Slices:
    """Per time slice, the cost of each stack that had any (a slice's entries are
    `[offsets[k], offsets[k + 1])` of `stacks` and each `costs[m]`)."""

    start: float  # Unix seconds at which slice 0 starts
    width: float  # seconds per slice
    index: StackIndex
    offsets: array = field(default_factory=lambda: array("q", [0]))
    stacks: array = field(default_factory=lambda: array("q"))
    costs: list[array] = field(default_factory=list)
    totals_only: bool = False  # each "stack" is a whole part: no range_profile (see above)

    def __len__(self) -> int:
        """Slices."""
        return len(self.offsets) - 1

    @property
    def end(self) -> float:
        return self.start + self.width * len(self)

    def slice_range(self, t0: float, t1: float) -> tuple[int, int]:
        """The slices `[first, last)` that overlap `[t0, t1)` (seconds from the start)."""
        first = min(len(self), max(0, int(t0 // self.width)))
        last = min(len(self), max(first, int(-(-t1 // self.width))))
        return first, last

    def used_span(self, t0: float, t1: float) -> tuple[float, float]:
        """The seconds `[t0, t1)` covers once widened to whole slices and cut to the run."""
        first, last = self.slice_range(t0, t1)
        return first * self.width, last * self.width

    def part_activity(self, metric: int) -> list[list[float]]:
        """For each part (`index.labels` order), its cost of `metric` in each slice."""
        return core.slice_parts(self.offsets, self.stacks, self.index.part, self.costs[metric],
                                len(self.index.labels))

    def stack_costs(self, first: int, last: int) -> list[array]:
        """Per metric, per stack: the cost in slices `[first, last)`."""
        n = len(self.index)
        out = [array("d", bytes(8 * n)) for _ in self.costs]
        lo, hi = self.offsets[first], self.offsets[last]
        for column, totals in zip(self.costs, out, strict=True):
            core.scatter_add(totals, self.stacks, column, lo, hi)
        return out


def range_profile(profile: Profile, t0: float, t1: float) -> Profile:
    """`profile` as if recorded from `t0` to `t1` seconds after its start (widened to
    whole slices): the same frames and tree shapes, each stack's cost in the range.
    ValueError when the profile has no timeline."""
    slices = profile.slices
    if slices is None:
        raise ValueError(f"this {profile.meta.mode} profile has no timeline: only sampled "
                         "CPU profiles (sampler, attach) and heap profiles keep costs over "
                         "time")
    if slices.totals_only:
        raise ValueError(f"this {profile.meta.mode} profile keeps only each part's totals "
                         "over time: a range's profile is asked of its source")
    first, last = slices.slice_range(t0, t1)
    if t1 <= t0 or first >= last:
        raise ValueError(f"no part of the run lies in {t0:g}-{t1:g} s (the run's timeline "
                         f"covers 0-{slices.width * len(slices):.2f} s)")
    per_stack = slices.stack_costs(first, last)
    index = slices.index
    tree = _emptied(profile.tree)
    parts = {label: tree if part is profile.tree else _emptied(part)
             for label, part in profile.parts.items()}
    core.add_stacks(tree.selfs, index.leaf, per_stack, None, 0)
    for p, label in enumerate(index.labels):
        part = parts.get(label)
        if part is not None and part is not tree:
            core.add_stacks(part.selfs, index.part_leaf, per_stack, index.part, p)
    n_metrics = len(profile.metrics)
    sums, keys = core.group_sums(per_stack, index.code, len(index.code_keys))
    pad = [0.0] * (n_metrics - len(sums))
    address_costs = {index.code_keys[k]: [*(column[k] for column in sums), *pad]
                     for k in keys}
    line_costs: dict[tuple[str, int], list[float]] = {}
    for key, values in address_costs.items():
        site = profile.address_sites.get(key)
        if site is not None and site.file is not None and site.line is not None:
            add_cost_tables(line_costs, {(site.file, site.line): values}, width=n_metrics)
    trees = {id(t): t for t in (tree, *parts.values())}  # a part may be the tree itself
    pruned = {key: t.pruned() for key, t in trees.items()}
    tree = pruned[id(tree)]
    parts = {label: pruned[id(part)] for label, part in parts.items()}
    start = slices.start + first * slices.width
    meta = replace(profile.meta, start_time=start, end_time=slices.start + last * slices.width,
                   warnings=[*profile.meta.warnings, range_note(slices, t0, t1)])
    # Its trees are the range's alone (nodes renumbered), so it keeps no timeline.
    return replace(profile, meta=meta, tree=tree, parts=parts, functions=None,
                   line_costs=line_costs, address_costs=address_costs,
                   address_sites=dict(profile.address_sites), slices=None)


def span_text(span: tuple[float, float]) -> str:
    """"2.25-4.25 s": seconds of the run, to the hundredth (slices are 0.25 s or wider)."""
    return f"{span[0]:.2f}-{span[1]:.2f} s"


def part_totals(start: float, width: float, count: int, labels: Sequence[str],
                entries: Iterable[tuple[float, int, Sequence[float]]],
                n_metrics: int) -> Slices:
    """`totals_only` slices, `count` of `width` seconds from `start`, from (Unix time,
    part index into `labels`, costs) entries: each part's costs per slice (an entry
    outside the slices counts in the nearest one, so they sum to the whole)."""
    per_slice: dict[int, dict[int, list[float]]] = {}
    for when, part, values in entries:
        k = min(max(int((when - start) // width), 0), count - 1)
        add_costs(per_slice.setdefault(k, {}), part, values)
    n = len(labels)
    index = StackIndex(labels=list(labels), leaf=array("q", [0] * n),
                       part=array("q", range(n)), part_leaf=array("q", [0] * n),
                       code=array("q", [-1] * n))
    out = Slices(start=start, width=width, index=index,
                 costs=[array("d") for _ in range(n_metrics)], totals_only=True)
    for k in range(count):
        for part, values in sorted(per_slice.get(k, {}).items()):
            out.stacks.append(part)
            for m in range(n_metrics):
                out.costs[m].append(values[m] if m < len(values) else 0.0)
        out.offsets.append(len(out.stacks))
    return out


def range_note(slices: Slices, t0: float, t1: float) -> str:
    """The profile's note on the range it shows: the seconds used, and why they differ
    from those asked (widened to whole slices; cut at the run's end)."""
    run_end = slices.width * len(slices)
    used = slices.used_span(t0, t1)
    note = f"time range {span_text(used)} of the run"
    why = []
    if abs(used[0] - t0) > 1e-9 or abs(used[1] - min(t1, run_end)) > 1e-9:
        why.append(f"costs are kept per {slices.width:g} s slice, so it is widened to whole "
                   "slices")
    if run_end < t1 < END_OF_RUN:
        why.append(f"the run's timeline ends at {run_end:.2f} s")
    if why:
        asked = "end" if t1 >= END_OF_RUN else f"{t1:g}"
        note += f" (asked {t0:g}-{asked} s; {'; '.join(why)})"
    return note


def _emptied(tree: CallTree) -> CallTree:
    """`tree`'s shape with every self cost zero (calls dropped: a range has no counts)."""
    n = len(tree)
    out = CallTree.from_columns(tree.n_metrics, array("i", tree.parents),
                                array("i", tree.frames),
                                [array("d", bytes(8 * n)) for _ in tree.selfs],
                                array("q", [-1]) * n)
    out.cut_depth = tree.cut_depth
    return out


class SliceRecorder:
    """Builds `Slices` as costs arrive: `add` per (time, stack, costs); slices older
    than the newest by more than `LATE_S` are closed into the arrays; `snapshot`
    copies what is there (the open slices folded in)."""

    LATE_S = 2.0  # records of a thread may arrive this late (rings drained in turns)

    def __init__(self, start: float, n_metrics: int, width: float = 0.25) -> None:
        self.start = start
        self.width = width
        self.n_metrics = n_metrics
        self.offsets = array("q", [0])
        self.stacks = array("q")
        self.costs = [array("d") for _ in range(n_metrics)]
        self._open: dict[int, dict[int, list[float]]] = {}  # slice -> stack -> costs

    def add(self, when: float, stack: int, values: Sequence[float]) -> None:
        """`values` of stack number `stack` at Unix time `when`."""
        k = max(0, int((when - self.start) // self.width))
        while k >= MAX_SLICES:  # a run longer than the slices allow: wider slices
            self._merge_pairs()
            k = max(0, int((when - self.start) // self.width))
        closed = len(self.offsets) - 1
        k = max(k, closed)  # a record later than its slice's closing joins the next
        add_costs(self._open.setdefault(k, {}), stack, values)

    def close_before(self, when: float) -> None:
        """Close every slice that ended more than LATE_S before `when`."""
        limit = int((when - self.LATE_S - self.start) // self.width)
        while len(self.offsets) - 1 < limit:
            self._close_next()
        if len(self.stacks) > MAX_ENTRIES:
            self._merge_pairs()

    def _close_next(self) -> None:
        k = len(self.offsets) - 1
        for stack, values in sorted(self._open.pop(k, {}).items()):
            self.stacks.append(stack)
            for m, value in enumerate(values):
                self.costs[m].append(value)
        self.offsets.append(len(self.stacks))

    def _merge_pairs(self) -> None:
        """Halve the slices: each pair becomes one, its stacks' costs added; a new
        slice is closed when both its halves were."""
        closed = len(self.offsets) - 1
        groups: dict[int, dict[int, list[float]]] = {}

        for j in range(closed):
            for e in range(self.offsets[j], self.offsets[j + 1]):
                add_costs(groups.setdefault(j // 2, {}), self.stacks[e],
                          [c[e] for c in self.costs])
        for k, entries in self._open.items():
            for stack, values in entries.items():
                add_costs(groups.setdefault(k // 2, {}), stack, values)
        self.offsets, self.stacks = array("q", [0]), array("q")
        self.costs = [array("d") for _ in range(self.n_metrics)]
        self.width *= 2
        self._open = groups
        for _ in range(closed // 2):
            self._close_next()

    def snapshot(self, index: StackIndex) -> Slices:
        """The slices so far (open ones included), independent of later `add`s."""
        out = Slices(self.start, self.width, index, array("q", self.offsets),
                     array("q", self.stacks), [array("d", c) for c in self.costs])
        last = max(self._open, default=len(self.offsets) - 2)
        for k in range(len(self.offsets) - 1, last + 1):
            for stack, values in sorted(self._open.get(k, {}).items()):
                out.stacks.append(stack)
                for m, value in enumerate(values):
                    out.costs[m].append(value)
            out.offsets.append(len(out.stacks))
        return out


@dataclass(frozen=True)
class SliceSource:
    """One profile's slices as they enter a profile laid side by side with others
    (`combine`): where its trees' nodes went and where its metrics start."""

    slices: Slices
    leaf_map: Sequence[int]  # its whole tree's node -> the joined tree's
    part_maps: Mapping[str, Sequence[int]]  # per part label: its part's node -> joined part's
    first_metric: int  # its metric 0 among the joined metrics


def combine(sources: Sequence[SliceSource], n_metrics: int) -> Slices:
    """The slices of profiles laid side by side (the sampler's and the heap profiler's
    of one run): one stack index (each source's stacks numbered after the previous
    source's), one grid as wide as the widest source's slices, each entry's costs in
    its source's metric columns (zero in the others).  Entries are copied by runs,
    not merged: a stack may have two entries in a slice where two source slices fall
    into one, and every reader sums entries."""
    start = min(src.slices.start for src in sources)
    width = max(src.slices.width for src in sources)
    index = StackIndex()
    label_ids: dict[str, int] = {}
    code_ids: dict[tuple[str, int], int] = {}
    runs: dict[int, list[tuple[SliceSource, int, int, int]]] = {}  # slice -> entry runs
    for src in sources:
        base, own = len(index), src.slices.index
        for s in range(len(own)):
            label = own.labels[own.part[s]]
            part = label_ids.setdefault(label, len(label_ids))
            if part == len(index.labels):
                index.labels.append(label)
            part_map = src.part_maps.get(label)
            index.leaf.append(src.leaf_map[own.leaf[s]])
            index.part.append(part)
            index.part_leaf.append(-1 if part_map is None else part_map[own.part_leaf[s]])
            code = own.code[s]
            index.code.append(-1 if code < 0 else
                              code_ids.setdefault(own.code_keys[code], len(code_ids)))
        slices = src.slices
        for k in range(len(slices)):
            lo, hi = slices.offsets[k], slices.offsets[k + 1]
            if lo < hi:
                middle = slices.start + (k + 0.5) * slices.width
                runs.setdefault(int((middle - start) // width), []).append((src, base, lo, hi))
    index.code_keys = list(code_ids)
    out = Slices(start, width, index, costs=[array("d") for _ in range(n_metrics)])
    for k in range(max(runs, default=-1) + 1):
        for src, base, lo, hi in runs.get(k, ()):
            own_costs = src.slices.costs
            out.stacks.extend([stack + base for stack in src.slices.stacks[lo:hi]])
            for m, column in enumerate(out.costs):
                j = m - src.first_metric
                if 0 <= j < len(own_costs):
                    column.extend(own_costs[j][lo:hi])
                else:
                    column.frombytes(bytes(8 * (hi - lo)))
        out.offsets.append(len(out.stacks))
    return out


class CodeKeys:
    """Each stack's leaf code key (an index into `keys`, or -1), kept from snapshot to
    snapshot: a live profile looks at the stacks added since the last one only."""

    def __init__(self) -> None:
        self.code = array("q")
        self.keys: dict[tuple[str, int], int] = {}

    @classmethod
    def of(cls, sites: Sequence[tuple[str, int, CodeSite] | None]) -> CodeKeys:
        """The keys of `sites`, from scratch."""
        keys = cls()
        keys.update(sites)
        return keys

    def update(self, sites: Sequence[tuple[str, int, CodeSite] | None]) -> None:
        """Take in the stacks of `sites` past those already seen (a stack's site never
        changes; a rebuild that changes them starts a new CodeKeys)."""
        code, keys = self.code, self.keys
        for site in sites[len(code):]:
            code.append(-1 if site is None else keys.setdefault((site[0], site[1]), len(keys)))


def index_of(labels: Iterable[str], leaf: Sequence[int], part: Sequence[int],
             part_leaf: Sequence[int], codes: CodeKeys) -> StackIndex:
    """A StackIndex (its own copies) from per-stack columns and their code keys."""
    return StackIndex(list(labels), array("q", leaf), array("q", part),
                      array("q", part_leaf), array("q", codes.code), list(codes.keys))
