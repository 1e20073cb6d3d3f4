"""Processes and threads of a profile: its `parts`, named, costed and selectable.

Collectors label parts "pid P tid T" (one tree per thread: sampler, attach,
instrument) or "pid P" (one per process: gprof, perf script imports).  A
process made of thread parts has no tree of its own; `part_tree` merges its
threads on demand (cached per profile snapshot).  Pure functions, no I/O.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass, replace

from proftui.collectors.model.profile import CallTree, Profile

_LABEL = re.compile(r"pid (\d+)(?: tid (\d+))?")


def parse_label(label: str) -> tuple[int | None, int | None]:
    """(pid, tid) of a part label; tid is None for a process, both None when unknown."""
    match = _LABEL.fullmatch(label)
    if match is None:
        return None, None
    pid, tid = match.groups()
    return int(pid), int(tid) if tid is not None else None


def process_label(pid: int) -> str:
    return f"pid {pid}"


@dataclass(frozen=True, slots=True)
class PartInfo:
    """One choice of the thread picker: all, a process or a thread, with its cost.

    `label` is the part label (None for the whole profile); `cost` is the part's
    total per metric (zeros for a part this snapshot does not have: a selection
    kept from an earlier one).
    """

    label: str | None
    kind: str  # "all", "process", "thread", or "other" (a label of no known form)
    pid: int | None
    tid: int | None
    name: str  # thread name (comm), or the process's main thread name; may be ""
    cost: tuple[float, ...]

    def title(self) -> str:
        """What the header and the picker call it: "thread 13 worker-2"."""
        if self.kind == "all":
            return "all threads"
        if self.kind == "other":
            return f"part {self.label}"
        head = f"process {self.pid}" if self.kind == "process" else f"thread {self.tid}"
        return f"{head} {self.name}" if self.name else head


def _threads_of(profile: Profile) -> dict[int, list[str]]:
    """pid -> its thread part labels (tid order)."""
    found: dict[int, list[tuple[int, str]]] = {}
    for label in profile.parts:
        pid, tid = parse_label(label)
        if pid is not None and tid is not None:
            found.setdefault(pid, []).append((tid, label))
    return {pid: [label for _tid, label in sorted(items)] for pid, items in found.items()}


# (id(profile), label) -> (a weak reference to the profile, its merged process tree).
# Snapshots are immutable once finalized, so a merged tree stays right for its profile;
# the weak reference tells a reused id() apart.  Small: the current snapshot and one before.
_merged: dict[tuple[int, str], tuple[weakref.ref[Profile], CallTree]] = {}
_merged_lock = threading.Lock()
_MERGED_KEEP = 4


def part_tree(profile: Profile, part: str | None) -> CallTree:
    """The tree of `part`: the merged tree (None), a part, or a process merged from its
    threads ("pid P" when only "pid P tid T" parts exist).  A part this snapshot does not
    have (e.g. counters were reset since it was chosen) is an empty tree."""
    if part is None:
        return profile.tree
    tree = profile.parts.get(part)
    if tree is not None:
        return tree
    pid, tid = parse_label(part)
    labels = _threads_of(profile).get(pid, []) if pid is not None and tid is None else []
    if len(labels) == 1:
        return profile.parts[labels[0]]
    if not labels:
        return CallTree(len(profile.metrics)).finalize()
    key = (id(profile), part)
    with _merged_lock:
        cached = _merged.get(key)
        if cached is not None and cached[0]() is profile:
            return cached[1]
    merged = CallTree(len(profile.metrics))
    for label in labels:
        merged.add_tree(0, profile.parts[label])
    merged.finalize()
    with _merged_lock:
        _merged[key] = (weakref.ref(profile), merged)
        while len(_merged) > _MERGED_KEEP:
            del _merged[next(iter(_merged))]
    return merged


def part_total(profile: Profile, part: str | None, metric: int = 0) -> float:
    """The cost of `part` (None: the whole profile) for `metric`."""
    if not profile.metrics:
        return 0.0
    tree = part_tree(profile, part)
    return tree.root.total_cost[metric] if metric < tree.n_metrics else 0.0


def _cost(tree: CallTree) -> tuple[float, ...]:
    return tuple(tree.root.total_cost)


def list_parts(profile: Profile, metric: int = 0, keep: tuple[str | None, ...] = ()
               ) -> list[PartInfo]:
    """The picker's choices: all, then processes (only when there are several: one
    process is the whole profile), then threads, each group by cost of `metric`, most
    first.  Labels in `keep` that this snapshot lacks are listed with zero cost."""
    names = profile.meta.threads
    zero = tuple(0.0 for _ in profile.metrics)
    choices = [PartInfo(None, "all", None, None, "", _cost(profile.tree) or zero)]
    pids = sorted({pid for pid, _ in map(parse_label, profile.parts) if pid is not None})
    labels = set(profile.parts)
    for label in keep:
        if label is not None and label not in labels and parse_label(label)[0] is not None:
            labels.add(label)
            pid = parse_label(label)[0]
            if pid is not None and pid not in pids:
                pids.append(pid)
    processes: list[PartInfo] = []
    if len(pids) > 1 or any(process_label(p) in keep for p in pids):
        for pid in pids:
            label = process_label(pid)
            tree = part_tree(profile, label)
            processes.append(PartInfo(label, "process", pid, None, names.get(pid, ""),
                                      _cost(tree) or zero))
    thread_rows: list[PartInfo] = []
    other_rows: list[PartInfo] = []
    for label in labels:
        pid, tid = parse_label(label)
        if pid is None and label in profile.parts:  # a saved file may label parts freely
            other_rows.append(PartInfo(label, "other", None, None, "",
                                       _cost(profile.parts[label]) or zero))
        if tid is None:
            continue
        cost = _cost(profile.parts[label]) if label in profile.parts else zero
        thread_rows.append(PartInfo(label, "thread", pid, tid, names.get(tid, ""), cost or zero))

    def order(info: PartInfo) -> tuple[float, int, int]:
        value = info.cost[metric] if metric < len(info.cost) else 0.0
        return -value, info.pid or 0, info.tid or 0

    return choices + sorted(processes, key=order) + sorted(thread_rows, key=order) + sorted(
        other_rows, key=lambda info: (*order(info), info.label or ""))


def describe_part(profile: Profile, part: str | None) -> PartInfo:
    """The `PartInfo` of one label (for the header), whether or not the snapshot has it."""
    if part is None:
        return PartInfo(None, "all", None, None, "", _cost(profile.tree))
    pid, tid = parse_label(part)
    cost = _cost(part_tree(profile, part))
    if pid is None:
        return PartInfo(part, "other", None, None, "", cost)
    name = profile.meta.threads.get(tid if tid is not None else pid, "")
    return PartInfo(part, "thread" if tid is not None else "process", pid, tid, name, cost)


def part_profile(profile: Profile, part: str | None, file_as: str | None = None) -> Profile:
    """`part` of `profile` (None: all of it) as a profile of its own, to compare another
    part with: its tree is the whole, and it is also filed under the label `file_as`,
    so a view that shows part `file_as` of another profile compares with this one.
    Per-function totals, line and address costs are the whole profile's: dropped."""
    tree = part_tree(profile, part)
    return replace(profile, tree=tree, parts={file_as: tree} if file_as else {},
                   functions=None, line_costs={}, address_costs={}, address_sites={},
                   slices=None, arcs={})
