"""Headless reports: the text and JSON forms of `proftui report` / `--text` / `--json`."""

from __future__ import annotations

from typing import Any

from proftui.collectors.model.profile import CallNode, Metric, Profile
from proftui.collectors.model.textsafe import clean
from proftui.collectors.model.views import flat_profile
from proftui.collectors.runtime import launch

TREE_CUTOFF_PERCENT = 0.5  # text tree: hide subtrees below this share of the whole
TEXT_TREE_MAX_DEPTH = 64
JSON_TREE_MAX_DEPTH = 200  # deeper nodes are cut (nested JSON hits recursion limits)


def format_cost(value: float, metric: Metric) -> str:
    """Seconds for time metrics (gprof's precision), integers for counts."""
    if metric.unit == "ns":
        return f"{value / 1e9:.2f}"
    return f"{value:.0f}"


def _unit_header(metric: Metric) -> str:
    return "seconds" if metric.unit == "ns" else metric.name


def describe_exit(profile: Profile) -> str:
    meta = profile.meta
    return launch.describe_exit(meta.exit_status, meta.exit_signal,
                                unknown="running" if not meta.complete else "unknown")


def render_text(profile: Profile, metric: int = 0, limit: int | None = None) -> str:
    """Flat profile then call tree, as plain text for terminals and scripts."""
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
    m = profile.metrics[metric]
    unit = _unit_header(m)
    lines += ["", "Flat profile:", "",
              f"{'%':>6} {'self':>10} {'total':>10} {'calls':>10}  name",
              f"{'time':>6} {unit:>10} {unit:>10}"]
    entries = flat_profile(profile, metric=metric)
    for entry in entries[:limit] if limit else entries:
        calls = "" if entry.calls is None else str(entry.calls)
        lines.append(
            f"{entry.self_percent:6.2f} {format_cost(entry.self_cost[metric], m):>10} "
            f"{format_cost(entry.total_cost[metric], m):>10} {calls:>10}  {entry.frame.function}"
        )
    lines += ["", f"Call tree (total {unit}, calls; subtrees under {TREE_CUTOFF_PERCENT}% hidden):",
              ""]
    assert profile.tree is not None
    whole = profile.tree.root.total_cost[metric]
    stack: list[tuple[CallNode, int]] = [
        (c, 0) for c in _sorted_children(profile.tree.root, metric, reverse=False)
    ]
    while stack:
        node, depth = stack.pop()
        share = 100.0 * node.total_cost[metric] / whole if whole else 0.0
        if share < TREE_CUTOFF_PERCENT and whole:
            continue
        calls = "" if node.calls is None else f"  [{node.calls} calls]"
        frame = profile.frames[node.frame_id]
        name = frame.function + (" [inlined]" if frame.inlined else "")
        lines.append(
            f"{share:6.2f}% {format_cost(node.total_cost[metric], m):>10}  "
            f"{'  ' * depth}{name}{calls}"
        )
        if depth + 1 >= TEXT_TREE_MAX_DEPTH:
            if node.children:
                lines.append(f"{'':18}{'  ' * (depth + 1)}... (deeper calls cut)")
            continue
        stack.extend((c, depth + 1) for c in _sorted_children(node, metric, reverse=False))
    return clean("\n".join(lines) + "\n")


def _sorted_children(node: CallNode, metric: int, reverse: bool) -> list[CallNode]:
    # Ascending, so that popping from a stack visits the costliest child first.
    return sorted(node.children.values(), key=lambda c: c.total_cost[metric], reverse=reverse)


def _costs(profile: Profile, values: list[float] | tuple[float, ...]) -> dict[str, float]:
    return {m.name: v for m, v in zip(profile.metrics, values, strict=False)}


def render_json(profile: Profile) -> dict[str, Any]:
    """The machine-readable report documented in the README."""
    meta = profile.meta
    flat = [
        {
            "function": e.frame.function,
            "module": e.frame.module,
            "file": e.frame.file,
            "line": e.frame.line,
            "calls": e.calls,
            "self": _costs(profile, e.self_cost),
            "total": _costs(profile, e.total_cost),
            "self_percent": round(e.self_percent, 4),
            "total_percent": round(e.total_percent, 4),
        }
        for e in flat_profile(profile)
    ]
    return {
        "meta": {
            "mode": meta.mode,
            "argv": meta.argv,
            "pids": meta.pids,
            "exit_status": meta.exit_status,
            "exit_signal": meta.exit_signal,
            "complete": meta.complete,
            "sample_period_ns": meta.period_ns,
            "clock": meta.clock,
            "metrics": {m.name: m.unit for m in profile.metrics},
            "dropped": meta.dropped,
            "warnings": meta.warnings,
        },
        "flat": flat,
        "tree": _json_tree(profile),
    }


def _json_tree(profile: Profile) -> list[dict[str, Any]]:
    assert profile.tree is not None
    top: list[dict[str, Any]] = []
    stack: list[tuple[CallNode, list[dict[str, Any]], int]] = [
        (c, top, 0) for c in profile.tree.root.children.values()
    ]
    while stack:
        node, siblings, depth = stack.pop()
        entry: dict[str, Any] = {
            "function": profile.frames[node.frame_id].function,
            "self": _costs(profile, node.self_cost),
            "total": _costs(profile, node.total_cost),
            "calls": node.calls,
            "children": [],
        }
        if profile.frames[node.frame_id].inlined:
            entry["inlined"] = True
        siblings.append(entry)
        if depth + 1 >= JSON_TREE_MAX_DEPTH and node.children:
            entry["truncated"] = True
            continue
        stack.extend((c, entry["children"], depth + 1) for c in node.children.values())
    return top
