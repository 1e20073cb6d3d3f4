"""Graphviz DOT call graph: one node per function, one edge per caller -> callee.

Nodes show self and total cost (percent of the whole and value) and the call
count; edges show the calls through that arc and the callee's total cost under
that caller.  Colour and edge width follow cost, gprof2dot style.  Big
profiles drop functions below `min_percent` of the whole so `dot` stays fast.
"""

from __future__ import annotations

from proftui.collectors.model.profile import ROOT_FRAME, SAMPLES, CallNode, Metric, Profile
from proftui.collectors.model.textsafe import clean, encode_text
from proftui.collectors.model.views import function_costs

AUTO_PRUNE_FUNCTIONS = 300  # above this many functions, prune by default
AUTO_MIN_PERCENT = 0.5


def _quote(text: str) -> str:
    text = clean(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r", "").replace("\n", "\\n") + '"'


def _value(value: float, metric: Metric) -> str:
    if metric.unit == "ns":
        return f"{value / 1e9:.3g} s"
    if metric.unit == "bytes":
        return f"{value:.0f} B"
    return f"{value:.0f}"


def _heat(fraction: float) -> str:
    """HSV colour from blue (cold) to red (hot) for a share of the whole."""
    fraction = min(max(fraction, 0.0), 1.0)
    return f"{0.66 * (1.0 - fraction) ** 2:.3f} 0.8 {0.75 + 0.2 * fraction:.3f}"


def _edges(profile: Profile, metric: int) -> dict[tuple[int, int], list]:
    """(caller, callee) -> [callee's total cost through the arc, calls or None].

    An arc nested under the same arc (recursion) adds its calls but not its cost
    again, so a recursive arc never shows more than the whole.
    """
    edges: dict[tuple[int, int], list] = {}
    on_path: dict[tuple[int, int], int] = {}
    events: list[tuple[CallNode, bool]] = [(c, True) for c in profile.tree.root.children.values()]
    while events:
        node, entering = events.pop()
        parent = node.parent
        arc = None if parent is None or parent.frame_id == ROOT_FRAME else (
            parent.frame_id, node.frame_id)
        if not entering:
            if arc is not None:
                on_path[arc] -= 1
            continue
        if arc is not None:
            edge = edges.setdefault(arc, [0.0, None])
            if not on_path.get(arc) and profile.metrics:
                edge[0] += node.total_cost[metric]
            if node.calls is not None:
                edge[1] = node.calls if edge[1] is None else edge[1] + node.calls
            on_path[arc] = on_path.get(arc, 0) + 1
        events.append((node, False))
        events.extend((c, True) for c in node.children.values())
    return edges


def export_dot(profile: Profile, metric: int = 0, min_percent: float | None = None) -> bytes:
    """The DOT text (UTF-8) for `metric`; `min_percent=None` prunes only big profiles."""
    costs = profile.functions if profile.functions is not None else function_costs(profile.tree)
    n = len(profile.metrics)
    m = profile.metrics[metric] if profile.metrics else SAMPLES
    whole = profile.total(metric) if n else 0.0
    if min_percent is None:
        min_percent = AUTO_MIN_PERCENT if len(costs) > AUTO_PRUNE_FUNCTIONS else 0.0

    def share(value: float) -> float:
        return value / whole if whole else 0.0

    kept = {fid for fid, c in costs.items()
            if not n or 100.0 * share(c.total_cost[metric]) >= min_percent}
    edges = _edges(profile, metric)
    for pair, count in profile.arcs.items():  # exact counts from the collector win
        edges.setdefault(pair, [0.0, None])[1] = count

    title = f"proftui {profile.meta.mode}: {' '.join(profile.meta.argv)}"
    out = [
        "digraph proftui {",
        f"  graph [label={_quote(title)}, labelloc=t, fontname=Helvetica, ranksep=0.25];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10];',
        "  edge [fontname=Helvetica, fontsize=9];",
    ]
    for fid in sorted(kept):
        frame = profile.frames[fid]
        cost = costs[fid]
        label = [frame.function or f"0x{frame.address or 0:x}"]
        if frame.module_name:
            label.append(frame.module_name)
        if n:
            self_v, total_v = cost.self_cost[metric], cost.total_cost[metric]
            label.append(f"self {100 * share(self_v):.2f}% ({_value(self_v, m)})")
            label.append(f"total {100 * share(total_v):.2f}% ({_value(total_v, m)})")
        if cost.calls is not None:
            label.append(f"{cost.calls} calls")
        fraction = share(cost.total_cost[metric]) if n else 0.0
        out.append(f"  f{fid} [label={_quote(chr(10).join(label))}, "
                   f'fillcolor="{_heat(fraction)}", fontcolor=white];')
    for (caller, callee), (cost, count) in sorted(edges.items()):
        if caller not in kept or callee not in kept:
            continue
        label = []
        if count is not None:
            label.append(f"{count} calls")
        if n:
            label.append(f"{100 * share(cost):.2f}% ({_value(cost, m)})")
        fraction = share(cost)
        out.append(f"  f{caller} -> f{callee} [label={_quote(chr(10).join(label))}, "
                   f'color="{_heat(fraction)}", penwidth={1 + 4 * fraction:.2f}];')
    out.append("}")
    return encode_text("\n".join(out) + "\n")
