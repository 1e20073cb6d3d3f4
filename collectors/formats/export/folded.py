"""Folded stacks: `main;a;leaf 60` per line, the input of flamegraph.pl and friends.

One line per call path with self cost in the chosen metric, outermost frame
first, rounded to an integer (flamegraph.pl sums them).  Paths deeper than
`paths.EXPORT_MAX_DEPTH` end in one `[calls deeper than N levels]` frame.  Inlined frames get
flamegraph.pl's `_[i]` suffix so they are coloured as such.
"""

from __future__ import annotations

from proftui.collectors.formats.export.paths import CUT_LABEL, costed_paths
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.textsafe import encode_text


def frame_label(frame: Frame) -> str:
    """A frame's name made safe for one folded field (no `;`, no line breaks)."""
    name = frame.function or f"0x{frame.address or 0:x}"
    name = name.replace(";", ":").replace("\n", " ").replace("\r", " ")
    return name + "_[i]" if frame.inlined else name


def export_folded(profile: Profile, metric: int = 0) -> bytes:
    """The folded-stacks text (UTF-8) of the merged call tree for `metric`."""
    if not profile.metrics:
        return b""
    labels = [frame_label(f) for f in profile.frames]
    totals: dict[str, int] = {}
    for node, cut, costs in costed_paths(profile.tree):
        value = round(costs[metric])
        if value <= 0:
            continue
        stack = ";".join(labels[fid] for fid in node.path())
        if cut:
            stack += ";" + CUT_LABEL
        totals[stack] = totals.get(stack, 0) + value  # equal labels may repeat a path
    return encode_text("".join(f"{stack} {value}\n" for stack, value in totals.items()))
