"""A profile taken apart by process: the reports' and exporters' `--by process`.

A `--follow` run (or a gprof run of a program that forks) holds several processes;
their merged tree puts two programs' `main` side by side.  `processes` gives each
process its own tree (its threads merged, `parts.part_tree`), most costly first;
`grouped_profile` puts them under one root each ("process 1234 prog", the frame the
TUI's thread grouping uses), so every exporter that writes call paths keeps them
apart.  Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from proftui.collectors.model.parts import PartInfo, describe_part, parse_label, part_tree
from proftui.collectors.model.profile import CallTree, Frame, FrameTable, Profile

BY_CHOICES = ("all", "process")  # --by: everything merged (the default), or per process


@dataclass(frozen=True, slots=True)
class ProcessTree:
    """One process of a profile: its pid (None when unknown), its name (the main
    thread's, or ""), and its call tree (finalized)."""

    pid: int | None
    name: str
    tree: CallTree
    label: str  # what reports call it: "process 1234 prog", or a part's own label

    def total(self, metric: int = 0) -> float:
        return self.tree.root.total_cost[metric] if metric < self.tree.n_metrics else 0.0


def processes(profile: Profile, metric: int = 0) -> list[ProcessTree]:
    """Each process of `profile` with its own tree, the costliest (in `metric`) first.

    Processes come from the part labels ("pid P" or "pid P tid T"); a part labelled in
    no known form is a group of its own.  A profile without parts is one process (its
    pid when the profile names exactly one).  Cost the parts do not account for (a
    collector that kept parts for some threads only) is one more group, "not
    attributed to a process", so the groups always add up to the whole."""
    pids: dict[int, None] = {}
    others: list[str] = []
    for label in profile.parts:
        pid, _tid = parse_label(label)
        if pid is None:
            others.append(label)
        else:
            pids.setdefault(pid)
    if not pids and not others:
        only = profile.meta.pids[0] if len(profile.meta.pids) == 1 else None
        name = profile.meta.threads.get(only, "") if only is not None else ""
        return [ProcessTree(only, name, profile.tree, _title(only, name, None))]
    out = []
    for pid in pids:
        info = describe_part(profile, f"pid {pid}")
        out.append(ProcessTree(pid, info.name, part_tree(profile, f"pid {pid}"),
                               _title(pid, info.name, info)))
    out.extend(ProcessTree(None, "", profile.parts[label], f"part {label}") for label in others)
    rest = _unattributed(profile, [p.tree for p in out])
    if rest is not None:
        out.append(ProcessTree(None, "", rest, "not attributed to a process"))
    out.sort(key=lambda p: -p.total(metric) if metric < len(profile.metrics) else 0.0)
    return out


def _title(pid: int | None, name: str, info: PartInfo | None) -> str:
    if info is not None:
        return info.title()
    if pid is None:
        return "all processes"
    return f"process {pid} {name}" if name else f"process {pid}"


def _unattributed(profile: Profile, trees: list[CallTree]) -> CallTree | None:
    """The whole tree minus `trees`, or None when they account for all of it (within
    rounding): parts normally partition the profile."""
    whole = profile.tree.root.total_cost
    for m in range(len(profile.metrics)):
        parts = math.fsum(t.root.total_cost[m] for t in trees)
        if not math.isclose(parts, whole[m], rel_tol=1e-9, abs_tol=1e-6):
            break
    else:
        return None
    rest = profile.tree.copy()
    for tree in trees:
        rest.add_tree(0, tree, sign=-1.0)
    for column in rest.selfs:  # what subtraction leaves of equal costs is rounding
        for i in range(len(column)):
            if column[i] < 1e-9 * max(1.0, abs(whole[0])):
                column[i] = 0.0
    return rest.pruned()


def grouped_profile(profile: Profile, metric: int = 0) -> Profile:
    """`profile` with one root per process (`processes`), its tree below: a frame named
    like the TUI's process rows ("process 1234 prog", `views.is_group_frame`).  Shares
    `profile`'s data but the frame table (extended) and the tree."""
    frames = FrameTable(list(profile.frames))  # same ids for the same frames
    grouped = CallTree(len(profile.metrics))
    for proc in processes(profile, metric):
        raw = f"[process] pid {proc.pid}" if proc.pid is not None else f"[process] {proc.label}"
        node = grouped.child(0, frames.intern(Frame(proc.label, raw_name=raw)))
        grouped.add_tree(node, proc.tree)
    grouped.finalize()
    return Profile(meta=profile.meta, metrics=profile.metrics, frames=frames, tree=grouped,
                   parts=profile.parts, arcs=profile.arcs, line_costs=profile.line_costs,
                   address_costs=profile.address_costs, address_sites=profile.address_sites,
                   functions=None, sources=profile.sources, timeline=profile.timeline,
                   leaks=profile.leaks)
