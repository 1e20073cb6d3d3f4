"""Callgrind format export, for kcachegrind, qcachegrind, callgrind_annotate, gprof2dot.

Callgrind profiles are per function: self cost at source positions plus, per
callee, a call count and the inclusive cost of those calls.  A calling-context
tree is folded into that: self cost of every node of a function adds up at the
function's definition line, and every (caller, callee) pair gets the callee's
total cost under that caller.  Costs are integers in each metric's unit (events
are named after the metrics).  Names are compressed (`fn=(3) name` once, then
`fn=(3)`), as valgrind writes them.  When call counts are unknown (sampled
profiles) a call arc says `calls=1`.
"""

from __future__ import annotations

from proftui.collectors.model.profile import ROOT_FRAME, Frame, Profile
from proftui.collectors.model.textsafe import clean, encode_text

_UNKNOWN_FILE = "???"


def _clean(text: str) -> str:
    """One line of valid UTF-8: undecodable bytes of a path as `\\xff` (textsafe)."""
    return clean(text).replace("\n", " ").replace("\r", " ")


class _Names:
    """Name compression tables: one id space per kind (ob, fl, fn)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self._counts: dict[str, int] = {}  # ids given per kind

    def __call__(self, kind: str, name: str) -> str:
        key = (kind, name)
        known = self._ids.get(key)
        if known is not None:
            return f"({known})"
        number = self._ids[key] = self._counts[kind] = self._counts.get(kind, 0) + 1
        return f"({number}) {_clean(name)}"


def _function_key(frame: Frame) -> tuple[str, str, str]:
    name = frame.function or f"0x{frame.address or 0:x}"
    if frame.inlined:
        name += " [inlined]"
    return (frame.module or "???", frame.file or _UNKNOWN_FILE, name)


def export_callgrind(profile: Profile) -> bytes:
    """The callgrind text (UTF-8) of `profile`'s merged tree, every metric an event."""
    n = len(profile.metrics)
    keys = [_function_key(f) for f in profile.frames]
    lines_of = [f.line or 0 for f in profile.frames]
    self_cost: dict[tuple[str, str, str], list[float]] = {}
    line_of: dict[tuple[str, str, str], int] = {}
    # (caller key, callee key) -> [inclusive cost per metric, calls or None]
    calls: dict[tuple[tuple[str, str, str], tuple[str, str, str]], list] = {}
    for fid, key in enumerate(keys):
        line_of.setdefault(key, lines_of[fid])
    for node in profile.tree.nodes():
        key = keys[node.frame_id]
        slot = self_cost.setdefault(key, [0.0] * n)
        for i, value in enumerate(node.self_cost):
            slot[i] += value
        parent = node.parent
        if parent is None or parent.frame_id == ROOT_FRAME:
            continue
        arc = calls.setdefault((keys[parent.frame_id], key), [[0.0] * n, None])
        for i, value in enumerate(node.total_cost):
            arc[0][i] += value
        if node.calls is not None:
            arc[1] = node.calls if arc[1] is None else arc[1] + node.calls
    # Collector-given arc counts (gprof, hook library) are exact: they win.
    exact: dict[tuple[tuple[str, str, str], tuple[str, str, str]], int] = {}
    for (caller_id, callee_id), count in profile.arcs.items():
        pair = (keys[caller_id], keys[callee_id])
        exact[pair] = exact.get(pair, 0) + count
    for pair, count in exact.items():
        if pair in calls:
            calls[pair][1] = count
    by_caller: dict[tuple[str, str, str], list] = {}
    for (caller, callee), arc in calls.items():
        by_caller.setdefault(caller, []).append((callee, arc))

    meta = profile.meta
    out = [
        "# callgrind format",
        "version: 1",
        "creator: proftui",
        f"cmd: {_clean(' '.join(meta.argv))}",
        *(f"pid: {pid}" for pid in meta.pids[:1]),
        "positions: line",
        *(f"event: {m.name} : {m.name} ({m.unit})" for m in profile.metrics),
        f"events: {' '.join(m.name for m in profile.metrics)}",
        f"summary: {' '.join(str(round(v)) for v in profile.tree.root.total_cost)}",
        "",
    ]
    names = _Names()
    for key in sorted(set(self_cost) | set(by_caller), key=lambda k: (k[0], k[1], k[2])):
        module, file, name = key
        out += [f"ob={names('ob', module)}", f"fl={names('fl', file)}",
                f"fn={names('fn', name)}"]
        own = [round(v) for v in self_cost.get(key, [0.0] * n)]
        if any(own) or not by_caller.get(key):
            out.append(f"{line_of[key]} {' '.join(map(str, own))}")
        for callee, (inclusive, count) in sorted(by_caller.get(key, []), key=lambda c: c[0]):
            c_module, c_file, c_name = callee
            out += [f"cob={names('ob', c_module)}", f"cfi={names('fl', c_file)}",
                    f"cfn={names('fn', c_name)}",
                    f"calls={1 if count is None else count} {line_of[callee]}",
                    f"{line_of[key]} {' '.join(str(round(v)) for v in inclusive)}"]
        out.append("")
    out.append(f"totals: {' '.join(str(round(v)) for v in profile.tree.root.total_cost)}")
    return encode_text("\n".join(out) + "\n")
