"""`proftui diff BASE NEW`: the text and JSON forms of a `ProfileDiff` (model/diffviews.py).

Text: a header (both profiles, the metric, both totals, what the sort uses), the
functions whose cost changed most, then the calling contexts whose total changed most.

JSON (`render_diff_json`, schema "proftui-diff/1"); every cost is in the metric's own
unit (ns, bytes or a count: exact, not rounded), shares are percent of that side's
own total, points are NEW's share minus BASE's:

    {"schema": "proftui-diff/1",
     "metric": {"name": "samples", "unit": "count"},
     "normalisation": "shares" | "absolute",   # what the lists are sorted by
     "sort": "self" | "total",                # functions: by change of self or total cost
     "base": SIDE, "new": SIDE,
     "functions_count": N,                    # functions with cost on either side
     "functions": [FUNCTION, ...],            # largest change first, at most --limit
     "paths": [PATH, ...]}                    # largest change of total first
    SIDE     = {"file": str, "mode": str, "argv": [str], "total": number}
    CHANGE   = {"base": number, "new": number, "delta": number,
                "base_share": number, "new_share": number, "points": number,
                "ratio": number | null}       # new / base; null when base is 0
    FUNCTION = {"function": str, "module": str (base name), "file": str | null,
                "line": int | null, "status": "both" | "new" | "gone",
                "self": CHANGE, "total": CHANGE,
                "calls": {"base": int | null, "new": int | null}}
    PATH     = {"path": [str] (outermost caller first), "modules": [str],
                "status": "both" | "new" | "gone", "total": CHANGE, "self": CHANGE}

A context is listed when no single callee explains its change (diffviews.EXPLAINED).
"""

from __future__ import annotations

from typing import Any

from proftui.collectors.model.diffviews import (
    EXPLAINED,
    PATH_FLOOR,
    Change,
    FunctionDelta,
    PathDelta,
    ProfileDiff,
    path_names,
)
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.textsafe import clean

SCHEMA = "proftui-diff/1"
DEFAULT_LIMIT = 20  # functions shown
DEFAULT_PATHS = 10  # calling contexts shown
PATH_FRAMES = 8  # innermost frames of a context shown in text (the rest elided)


def unit_label(name: str, unit: str) -> str:
    """What an absolute column counts: ms for time, bytes, or the metric's name."""
    return {"ns": "ms", "bytes": "bytes"}.get(unit, name)


def format_amount(value: float, unit: str, signed: bool = False) -> str:
    """`value` (in the metric's unit) for text: ns as ms, others as integers."""
    sign = "+" if signed else ""
    if unit == "ns":
        shown = value / 1e6
        return f"{0.0 if abs(shown) < 0.005 else shown:{sign},.2f}"  # never -0.00
    return f"{0.0 if abs(value) < 0.5 else value:{sign},.0f}"


def _pts(value: float) -> str:
    """Signed percentage points; a rounding-sized change prints as +0.00, never -0.00."""
    return f"{0.0 if abs(value) < 0.005 else value:+9.2f}"


def _describe(profile: Profile, file: str) -> str:
    """The file and what it profiled, with what makes its numbers less than whole."""
    meta = profile.meta
    notes = ([] if meta.complete else ["incomplete"]) + \
        ([f"{meta.dropped:,} records dropped"] if meta.dropped else [])
    return (f"{file} ({meta.mode} profile of {' '.join(meta.argv) or '?'}"
            f"{''.join('; ' + note for note in notes)})")


def _ratio_text(ratio: float | None, status: str) -> str:
    if status == "new":
        return "new"
    if status == "gone":
        return "gone"
    return "" if ratio is None else f"{ratio:.2f}x"


def render_diff_text(diff: ProfileDiff, base: Profile, new: Profile, files: tuple[str, str],
                     normalisation: str = "shares", by: str = "self",
                     limit: int | None = DEFAULT_LIMIT, paths: int = DEFAULT_PATHS) -> str:
    """The `proftui diff` text report."""
    units = unit_label(diff.metric_name, diff.unit)
    grown = diff.new_total - diff.base_total
    ratio = _ratio_text(diff.new_total / diff.base_total if diff.base_total else None, "both")
    sorted_by = (f"change of {by} share (percentage points of each profile's own total)"
                 if normalisation == "shares" else f"change of {by} cost ({units})")
    lines = [
        f"BASE: {_describe(base, files[0])}",
        f"NEW:  {_describe(new, files[1])}",
        f"metric {diff.metric_name}: BASE total {format_amount(diff.base_total, diff.unit)}, "
        f"NEW total {format_amount(diff.new_total, diff.unit)} {units} "
        f"({format_amount(grown, diff.unit, signed=True)}{', ' + ratio if ratio else ''})",
        f"sorted by {sorted_by}",
    ]
    functions = diff.sorted_functions(normalisation, by)
    shown = functions[:limit] if limit else functions
    lines += ["", f"Functions ({len(shown)} of {len(functions)} with cost on either side):", "",
              f"{'self pts':>9} {'total pts':>9}  {'self % BASE -> NEW':>18}  "
              f"{'self ' + units:>14} {'total ' + units:>14} {'ratio':>7}  function"]
    for d in shown:
        lines.append(_function_line(d, diff.unit))
    ranked = diff.sorted_paths(normalisation)
    lines += ["", f"Calling contexts whose total changed most ({min(paths, len(ranked))} of "
                  f"{len(ranked)}; a context whose change one callee carries "
                  f"({EXPLAINED:.0%}+) is left out, and one under {PATH_FLOOR:.3%} of both "
                  "profiles):", "",
              f"{'total pts':>9}  {'total % BASE -> NEW':>19}  {'total ' + units:>14}  path"]
    for p in ranked[:paths]:
        lines.append(_path_line(p, diff.unit))
    if not ranked:
        lines.append("  (no calling context changed)")
    return clean("\n".join(lines) + "\n")


def _function_line(d: FunctionDelta, unit: str) -> str:
    s, t = d.self_cost, d.total_cost
    tag = "" if d.status == "both" else f"  [{d.status}]"
    module = f" ({d.frame.module_name})" if d.frame.module_name else ""
    return (f"{_pts(s.points)} {_pts(t.points)}  {s.base_share:7.2f} -> {s.new_share:7.2f}  "
            f"{format_amount(s.delta, unit, True):>14} {format_amount(t.delta, unit, True):>14} "
            f"{_ratio_text(s.ratio if s.base or s.new else t.ratio, d.status):>7}  "
            f"{d.frame.function}{module}{tag}")


def _path_line(p: PathDelta, unit: str) -> str:
    names = path_names(p)
    if len(names) > PATH_FRAMES:
        names = [f"... {len(names) - PATH_FRAMES} callers", *names[-PATH_FRAMES:]]
    tag = "" if p.status == "both" else f"  [{p.status}]"
    t = p.total_cost
    return (f"{_pts(t.points)}  {t.base_share:8.2f} -> {t.new_share:7.2f}  "
            f"{format_amount(t.delta, unit, True):>14}  {' > '.join(names)}{tag}")


def _change_json(c: Change) -> dict[str, Any]:
    return {"base": c.base, "new": c.new, "delta": c.delta,
            "base_share": round(c.base_share, 6), "new_share": round(c.new_share, 6),
            "points": round(c.points, 6),
            "ratio": None if c.ratio is None else round(c.ratio, 6)}


def _side(profile: Profile, file: str, total: float) -> dict[str, Any]:
    return {"file": file, "mode": profile.meta.mode, "argv": profile.meta.argv, "total": total}


def render_diff_json(diff: ProfileDiff, base: Profile, new: Profile, files: tuple[str, str],
                     normalisation: str = "shares", by: str = "self",
                     limit: int | None = DEFAULT_LIMIT, paths: int = DEFAULT_PATHS
                     ) -> dict[str, Any]:
    """The `proftui diff --json` document (schema in the module docstring)."""
    functions = diff.sorted_functions(normalisation, by)
    return {
        "schema": SCHEMA,
        "metric": {"name": diff.metric_name, "unit": diff.unit},
        "normalisation": normalisation,
        "sort": by,
        "base": _side(base, files[0], diff.base_total),
        "new": _side(new, files[1], diff.new_total),
        "functions_count": len(functions),
        "functions": [
            {"function": d.frame.function, "module": d.frame.module_name,
             "file": d.frame.file, "line": d.frame.line, "status": d.status,
             "self": _change_json(d.self_cost), "total": _change_json(d.total_cost),
             "calls": {"base": d.base_calls, "new": d.new_calls}}
            for d in (functions[:limit] if limit else functions)],
        "paths": [
            {"path": path_names(p), "modules": [f.module_name for f in p.frames],
             "status": p.status, "total": _change_json(p.total_cost),
             "self": _change_json(p.self_cost)}
            for p in diff.sorted_paths(normalisation)[:paths]],
    }
