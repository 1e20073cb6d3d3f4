"""speedscope JSON export (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile per metric: each distinct call path with self cost is a
sample (frame indexes, outermost first) weighted by that cost, so speedscope's
flame graph, left-heavy and sandwich views all read the merged call tree.
Paths deeper than `paths.EXPORT_MAX_DEPTH` end in one "calls deeper" frame.
"""

from __future__ import annotations

import json
from typing import Any

from proftui.collectors.formats.export.paths import CUT_LABEL, costed_paths, path_of
from proftui.collectors.model.profile import Profile

SCHEMA = "https://www.speedscope.app/file-format-schema.json"
UNITS = {"ns": "nanoseconds", "bytes": "bytes"}  # anything else is "none"


def speedscope_document(profile: Profile) -> dict[str, Any]:
    """The speedscope file as a JSON-ready dict."""
    frames: list[dict[str, Any]] = []
    for frame in profile.frames:
        entry: dict[str, Any] = {"name": frame.function or f"0x{frame.address or 0:x}"}
        if frame.inlined:
            entry["name"] += " [inlined]"
        if frame.file:
            entry["file"] = frame.file
        if frame.line is not None:
            entry["line"] = frame.line
        frames.append(entry)
    paths: list[list[int]] = []
    costs: list[list[float]] = []
    cut_index: int | None = None
    for node, cut, cost in costed_paths(profile.tree):
        path = path_of(node, cut)
        if cut:
            if cut_index is None:
                cut_index = len(frames)
                frames.append({"name": CUT_LABEL})
            path[-1] = cut_index
        paths.append(path)
        costs.append(cost)
    profiles = []
    for i, metric in enumerate(profile.metrics):
        chosen = [(p, c[i]) for p, c in zip(paths, costs, strict=True) if c[i] > 0]
        weights = [w for _p, w in chosen]
        profiles.append({
            "type": "sampled",
            "name": f"{metric.name} ({profile.meta.mode})",
            "unit": UNITS.get(metric.unit, "none"),
            "startValue": 0,
            "endValue": sum(weights),
            "samples": [p for p, _w in chosen],
            "weights": weights,
        })
    return {
        "$schema": SCHEMA,
        "name": " ".join(profile.meta.argv) or "proftui profile",
        "exporter": "proftui",
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": profiles,
    }


def export_speedscope(profile: Profile) -> bytes:
    """The speedscope JSON (UTF-8)."""
    return json.dumps(speedscope_document(profile), separators=(",", ":")).encode()
