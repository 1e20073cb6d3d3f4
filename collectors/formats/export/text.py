"""Headless reports: the text and JSON forms of `proftui report` / `--text` / `--json`.

Profiles with leaked bytes (heap collector, gperftools heap dumps written at exit,
heaptrack) end their text report with a leak summary in the style of mtrace and
valgrind's leak check: the total, then the top leaking call paths with bytes, blocks
and the stack innermost first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from proftui.collectors.model.byprocess import ProcessTree, grouped_profile, processes
from proftui.collectors.model.profile import (
    CallNode,
    Frame,
    Metric,
    Profile,
)
from proftui.collectors.model.textsafe import clean
from proftui.collectors.model.views import FlatEntry, flat_profile, function_costs
from proftui.collectors.runtime import launch

TREE_CUTOFF_PERCENT = 0.5  # text tree: hide subtrees below this share of the whole
TEXT_TREE_MAX_DEPTH = 64
LEAK_PATHS = 10  # leak summary: call paths shown
LEAK_FRAMES = 16  # leak summary: frames shown per path, innermost first
REACHABILITY_NOTE = ("live at exit, as mtrace counts leaks; reachability not checked: "
                     "blocks still pointed to are counted too")


def _gprof_value(value: float, metric: Metric) -> str:
    """A cost column as gprof prints it: seconds for time metrics (two decimals), integers
    for counts.  The TUI shows costs in human units instead (tui/format.py format_cost)."""
    if metric.unit == "ns":
        return f"{value / 1e9:.2f}"
    return f"{value:.0f}"


def _unit_header(metric: Metric) -> str:
    """The unit row of the cost columns: seconds, bytes or blocks; else the metric's name
    (samples, calls), which is its own unit."""
    if metric.unit == "ns":
        return "seconds"
    if metric.heap:
        return "bytes" if metric.unit == "bytes" else "blocks"
    return metric.name


def _flat_title(metric: Metric) -> str:
    """"Flat profile:", naming the metric where the unit row alone cannot (heap ones)."""
    return f"Flat profile: {metric.name}, {metric.meaning}" if metric.meaning else "Flat profile:"


def _share_header(metric: Metric) -> str:
    """What the % column is a share of: time for CPU metrics, bytes or blocks for heap ones."""
    if metric.heap:
        return "bytes" if metric.unit == "bytes" else "blocks"
    return "time"


def describe_exit(profile: Profile) -> str:
    meta = profile.meta
    return launch.describe_exit(meta.exit_status, meta.exit_signal,
                                unknown="running" if not meta.complete else "unknown")


def render_text(profile: Profile, metric: int = 0, limit: int | None = None,
                by: str = "all") -> str:
    """Flat profile then call tree, as plain text for terminals and scripts.  `by`:
    "all" merges the processes; "process" keeps them apart (a pid column in the flat
    profile, one root per process in the tree: `model/byprocess.py`)."""
    meta = profile.meta
    lines = [
        f"proftui {meta.mode} profile of: {' '.join(meta.argv)}",
        f"pids: {', '.join(map(str, meta.pids)) or '-'}; target {describe_exit(profile)}"
        + ("" if meta.complete else " (incomplete)"),
    ]
    if meta.dropped:
        lines.append(f"dropped records: {meta.dropped}")
    lines.extend(f"warning: {w}" for w in meta.warnings)
    if not profile.metrics:
        lines.append("no data")
        return clean("\n".join(lines) + "\n")
    groups = processes(profile, metric)
    if by == "process":
        lines.append(f"by process: {len(groups)} process{'es' if len(groups) != 1 else ''}, "
                     "each its own rows (pid column) and call tree root")
    elif sum(1 for g in groups if g.pid is not None) > 1:
        lines.append(f"{len(groups)} processes merged; `--by process` keeps them apart")
    m = profile.metrics[metric]
    unit = _unit_header(m)
    names = display_names(profile)
    pid_head = f"{'pid':>8}  " if by == "process" else ""
    lines += ["", _flat_title(m), "",
              f"{'%':>6} {'self':>10} {'total':>10} {'calls':>10}  {pid_head}name",
              f"{_share_header(m):>6} {unit:>10} {unit:>10}"]
    if by == "process":
        rows = flat_by_process(profile, groups, metric)
    else:
        rows = [(None, e) for e in flat_profile(profile, metric=metric)]
    for pid, entry in rows[:limit] if limit else rows:
        calls = "" if entry.calls is None else str(entry.calls)
        owner = "" if by != "process" else f"{'-' if pid is None else pid:>8}  "
        lines.append(
            f"{entry.self_percent:6.2f} {_gprof_value(entry.self_cost[metric], m):>10} "
            f"{_gprof_value(entry.total_cost[metric], m):>10} {calls:>10}  "
            f"{owner}{names[entry.frame_id]}"
        )
    lines += ["", f"Call tree (total {unit}, calls; subtrees under {TREE_CUTOFF_PERCENT}% hidden):",
              ""]
    shown = grouped_profile(profile, metric) if by == "process" else profile
    if shown is not profile:
        names += [f.function for f in list(shown.frames)[len(names):]]  # the process rows
    whole = shown.tree.root.total_cost[metric]
    stack: list[tuple[CallNode, int]] = [
        (c, 0) for c in _sorted_children(shown.tree.root, metric, reverse=False)
    ]
    while stack:
        node, depth = stack.pop()
        share = 100.0 * node.total_cost[metric] / whole if whole else 0.0
        if share < TREE_CUTOFF_PERCENT and whole:
            continue
        calls = "" if node.calls is None else f"  [{node.calls} calls]"
        lines.append(
            f"{share:6.2f}% {_gprof_value(node.total_cost[metric], m):>10}  "
            f"{'  ' * depth}{names[node.frame_id]}{calls}"
        )
        if depth + 1 >= TEXT_TREE_MAX_DEPTH:
            if node.children:
                lines.append(f"{'':18}{'  ' * (depth + 1)}... (deeper calls cut)")
            continue
        stack.extend((c, depth + 1) for c in _sorted_children(node, metric, reverse=False))
    lines += leak_summary(profile)
    return clean("\n".join(lines) + "\n")


def display_names(profile: Profile) -> list[str]:
    """Each frame's name as the text report shows it: `[inlined]` marked, and a name
    that several modules define (two programs' `main` in a --follow run, a static
    helper in two libraries) followed by its module, `main (in prog)`."""
    modules: dict[str, set[str]] = {}
    for frame in profile.frames:
        modules.setdefault(frame.function, set()).add(frame.module_name)
    return [frame.function + (f" (in {frame.module_name or '?'})"
                              if len(modules[frame.function]) > 1 else "")
            + (" [inlined]" if frame.inlined else "") for frame in profile.frames]


def flat_by_process(profile: Profile, groups: list[ProcessTree], metric: int = 0
                    ) -> list[tuple[int | None, FlatEntry]]:
    """The flat profile per process: (pid, row) for each function of each process, the
    shares of the whole profile, by self cost in `metric` (the text and JSON reports'
    `--by process`)."""
    whole = profile.total(metric)
    ids = profile.frames.function_ids()
    rows = []
    for group in groups:
        for fid, cost in function_costs(group.tree, ids).items():
            rows.append((group.pid, FlatEntry(
                fid, profile.frames[fid], tuple(cost.self_cost), tuple(cost.total_cost),
                cost.calls, 100.0 * cost.self_cost[metric] / whole if whole else 0.0,
                100.0 * cost.total_cost[metric] / whole if whole else 0.0)))
    rows.sort(key=lambda r: (-r[1].self_cost[metric], -r[1].total_cost[metric],
                             r[1].frame.function, r[0] or 0))
    return rows


def _metric(profile: Profile, name: str) -> int | None:
    try:
        return profile.metric_index(name)
    except KeyError:
        return None


def _allocating_lines(profile: Profile, metric: int) -> dict[tuple[str, int], dict[str, float]]:
    """(module, function start) -> {"file:line": cost} over the costed instructions."""
    out: dict[tuple[str, int], dict[str, float]] = {}
    for (module, address), costs in profile.address_costs.items():
        site = profile.address_sites.get((module, address))
        if site is None or site.function is None or site.file is None or site.line is None \
                or metric >= len(costs) or costs[metric] <= 0:
            continue
        where = f"{os.path.basename(site.file)}:{site.line}"
        lines = out.setdefault((module, site.function), {})
        lines[where] = lines.get(where, 0.0) + costs[metric]
    return out


def _where(frame: Frame) -> str:
    """file:line of a function's definition, its file, or its module."""
    if frame.file:
        name = os.path.basename(frame.file)
        return f"{name}:{frame.line}" if frame.line else name
    return frame.module_name or "?"


def leak_summary(profile: Profile, limit: int = LEAK_PATHS) -> list[str]:
    """The mtrace/valgrind-style leak summary lines (none unless there is `leaked_bytes`)."""
    leaked = _metric(profile, "leaked_bytes")
    if leaked is None:
        return []
    blocks = _metric(profile, "leaks")
    total = profile.total(leaked)
    lines = ["", f"Leak summary ({REACHABILITY_NOTE}):", ""]
    if total <= 0:
        if not profile.meta.complete:  # leaks are known only once the target has exited
            return [*lines, "  none known yet: the target has not exited"]
        return [*lines, "  no leaks: every allocation was freed before exit"]
    def amount(node_costs: Sequence[float]) -> str:
        text = f"{node_costs[leaked]:,.0f} bytes"
        if blocks is not None:
            count = node_costs[blocks]
            text += f" in {count:,.0f} block{'' if round(count) == 1 else 's'}"
        return text

    if profile.leaks:  # the stacks themselves, each call at its line
        return lines + _leak_stacks(profile, amount(profile.tree.root.total_cost), limit)
    paths = sorted((n for n in profile.tree.nodes() if n.self_cost[leaked] > 0),
                   key=lambda n: -n.self_cost[leaked])

    lines.append(f"  {amount(profile.tree.root.total_cost)} leaked from {len(paths):,} "
                 f"call path{'' if len(paths) == 1 else 's'}"
                 + ("" if blocks is not None else " (block counts not known)"))
    lines.append("  (at: the allocating line where known; by: callers, where each is defined)")
    sites = _allocating_lines(profile, leaked)
    for rank, node in enumerate(paths[:limit], start=1):
        lines += ["", f"  {amount(node.self_cost)} leaked, path {rank} of {len(paths)}:"]
        chain = node.callers_up(LEAK_FRAMES)
        for depth, frame_id in enumerate(chain):
            frame = profile.frames[frame_id]
            where = _where(frame)
            if depth == 0:
                holder = next((profile.frames[f] for f in chain if not profile.frames[f].inlined),
                              frame)
                found = sites.get((holder.module, holder.address or -1), {})
                if frame.inlined and frame.file:  # lines in the inlined callee's own file
                    mine = os.path.basename(frame.file) + ":"
                    found = {w: c for w, c in found.items() if w.startswith(mine)}
                if found:
                    where = max(found.items(), key=lambda item: item[1])[0]
            label = frame.function + (" [inlined]" if frame.inlined else "")
            lines.append(f"    {'at' if depth == 0 else 'by'} {label} ({where})")
        deeper = node.depth() - len(chain)
        if deeper > 0:
            lines.append(f"    ... {deeper} outer caller{'' if deeper == 1 else 's'}")
    if len(paths) > limit:
        rest = sum(n.self_cost[leaked] for n in paths[limit:])
        lines += ["", f"  ... and {len(paths) - limit:,} more leaking call paths "
                      f"({rest:,.0f} bytes)"]
    return lines


def _leak_stacks(profile: Profile, total: str, limit: int) -> list[str]:
    """The leak summary's body from `Profile.leaks`: each stack that leaked, innermost
    first, `at` the allocating call and `by` each caller's call, as valgrind prints them."""
    stacks = profile.leaks
    count = len(stacks)
    lines = [f"  {total} leaked from {count:,} allocation stack{'' if count == 1 else 's'}",
             "  (at: the allocating call; by: each caller's call, at its line)"]
    for rank, leak in enumerate(stacks[:limit], start=1):
        what = f"{leak.leaked_bytes:,.0f} bytes in {leak.blocks:,.0f} " \
               f"block{'' if round(leak.blocks) == 1 else 's'}"
        lines += ["", f"  {what} leaked, stack {rank} of {count:,}:"]
        for depth, frame in enumerate(leak.frames[:LEAK_FRAMES]):
            where = os.path.basename(frame.file) if frame.file else \
                f"in {frame.module or '?'}"
            if frame.file and frame.line:
                where += f":{frame.line}"
            label = frame.function + (" [inlined]" if frame.inlined else "")
            lines.append(f"    {'at' if depth == 0 else 'by'} {label} ({where})")
        deeper = len(leak.frames) - LEAK_FRAMES
        if deeper > 0:
            lines.append(f"    ... {deeper} outer caller{'' if deeper == 1 else 's'}")
    if count > limit:
        rest = sum(leak.leaked_bytes for leak in stacks[limit:])
        lines += ["", f"  ... and {count - limit:,} more leaking stacks ({rest:,.0f} bytes)"]
    return lines


def _sorted_children(node: CallNode, metric: int, reverse: bool) -> list[CallNode]:
    # Ascending, so that popping from a stack visits the costliest child first.
    return sorted(node.children.values(), key=lambda c: c.total_cost[metric], reverse=reverse)
