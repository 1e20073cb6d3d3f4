"""Turn decoded hook files (collectors/runtime/wire_hook.py) into the model's Profile.

Each runtime node is a function under its parent node in one thread's
calling-context tree; it becomes a CallNode of that thread's part
("pid P tid T"), and the parts are merged into `Profile.tree`.  Function
addresses are symbolized through the module table the runtime recorded
(path + load bias), so code of a dlclose()d plugin and of a process that has
exited still resolves.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.lines import add_code_cost
from proftui.collectors.model.profile import (
    CALLS,
    WALL_NS,
    CallNode,
    CallTree,
    CodeSite,
    Frame,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.views import function_costs
from proftui.collectors.runtime.wire_hook import ROOT, HookData, HookModule, compensated_self_ns
from proftui.collectors.symbols.symbolizer import Symbolizer

LINES_NOTE = ("self cost on each function's definition line: "
              "the hook library records no per-line data")


class HookSymbols:
    """Frames for runtime function addresses, cached per (module path, vaddr)."""

    def __init__(self) -> None:
        self._symbolizer = Symbolizer()
        self._cache: dict[tuple[str, int], Frame] = {}

    @property
    def warnings(self) -> list[str]:
        return list(self._symbolizer.warnings)

    def frame(self, module: HookModule | None, address: int) -> Frame:
        """The function-level frame of runtime `address` inside `module`."""
        if module is None:
            return Frame(function=f"0x{address:x}", address=address)
        vaddr = address - module.bias
        key = (module.path, vaddr)
        frame = self._cache.get(key)
        if frame is None:
            frame = self._cache[key] = self._lookup(module.path, vaddr)
        return frame

    def _lookup(self, path: str, vaddr: int) -> Frame:
        unknown = Frame(function=f"{os.path.basename(path)}+0x{vaddr:x}", module=path,
                        address=vaddr)
        if not path.startswith("/") or not Path(path).exists():
            return unknown
        try:
            return self._symbolizer.frame(path, vaddr)
        except (ProftuiError, OSError, ValueError):
            return unknown


def add_hook_data(profile: Profile, data: HookData, symbols: HookSymbols,
                  threads: dict[int, str], open_ticks: dict[int, float] | None = None) -> None:
    """Add one process's per-thread trees to `profile.parts` (labels "pid P tid T")
    and their caller -> callee call counts to `profile.arcs`.

    Self cost is compensated wall time in ns (timed files) or the call count
    (count-only files); `calls` is exact either way.  Each function's self cost
    also goes to its entry address and definition line (`Profile.line_costs`:
    the hook sees function entries only).  `threads` receives tid -> name.
    `open_ticks` (open_calls.py) adds the own time of calls still open.
    Call `merge_parts` once every file has been added.
    """
    nodes = data.nodes
    timed = profile.metrics[0] != CALLS
    self_costs = (compensated_self_ns(data, open_ticks) if timed
                  else [float(c) for c in nodes.calls])
    pid = data.header.pid
    trees: dict[int, CallTree] = {}
    for slot, thread in data.threads.items():
        label = f"pid {pid} tid {thread.tid}"
        tree = profile.parts.get(label)
        if tree is None:
            tree = profile.parts[label] = CallTree(len(profile.metrics))
        trees[slot] = tree
        threads.setdefault(thread.tid, thread.name)
    placed: dict[int, CallNode] = {}
    frame_ids: dict[tuple[int, int, bool], int] = {}  # (fn, module, inlined) -> frame id
    function_self: dict[int, float] = {}  # frame id -> self cost of this file's nodes
    for i, index in enumerate(nodes.index):
        tree = trees.get(nodes.thread[i])
        if tree is None:
            continue
        parent_index = nodes.parent[i]
        parent = tree.root if parent_index == ROOT else placed.get(parent_index)
        if parent is None:
            continue  # parent published after we read its chunk: next snapshot has it
        inlined = nodes.inlined[i]
        key = (nodes.fn[i], nodes.module[i], inlined)
        frame_id = frame_ids.get(key)
        if frame_id is None:
            module_index = nodes.module[i] - 1
            module = data.modules[module_index] if 0 <= module_index < len(data.modules) else None
            frame = symbols.frame(module, nodes.fn[i])
            if inlined:  # ran in its caller's frame: perf and pprof mark such frames too
                frame = replace(frame, inlined=True)
            frame_id = frame_ids[key] = profile.frames.intern(frame)
        node = parent.child(frame_id)
        calls = nodes.calls[i]
        node.add_calls(calls)
        node.self_cost[0] += self_costs[i]
        function_self[frame_id] = function_self.get(frame_id, 0.0) + self_costs[i]
        placed[index] = node
        if parent_index != ROOT and calls:
            arc = (parent.frame_id, frame_id)
            profile.arcs[arc] = profile.arcs.get(arc, 0) + calls
    _add_line_costs(profile, function_self)


def _add_line_costs(profile: Profile, function_self: dict[int, float]) -> None:
    """Each function's self cost at its entry address and on its definition line."""
    for frame_id, cost in function_self.items():
        frame = profile.frames[frame_id]
        if not frame.module or frame.address is None:
            continue  # no module: nothing a source pane could open
        start = frame.address if frame.raw_name else None
        add_code_cost(profile, frame.module, frame.address,
                      CodeSite(start, frame.file, frame.line), [cost])


def merge_parts(profile: Profile) -> Profile:
    """Merge every part into `profile.tree` and finalize.

    A single thread's tree becomes the whole tree (no part: nothing to choose
    between, and no copy of a tree that may have 100,000 levels).
    """
    if len(profile.parts) == 1:
        profile.tree = profile.parts.popitem()[1]
    else:
        assert profile.tree is not None
        for part in profile.parts.values():
            profile.tree.merge(part)
    return profile.finalize()


SHORT_CALL_NS = 5.0  # own time per call under which the hooks cannot time a function
CALIBRATION_ERROR_NS = 1.0  # run-to-run spread of the calibrated hook cost per call


def short_call_warning(profile: Profile) -> str | None:
    """A note when functions whose calls last a few ns carry enough calls that the
    hook-cost compensation's error (~1 ns a call) is a visible share of the run.

    Their self time is what is left after ~30 ns of hook cost per call is taken
    out: a 1 ns function's share then swings between 0 and several times its
    true value from run to run (40 M calls x 1 ns = 40 ms).
    """
    if profile.metrics[0] != WALL_NS or profile.tree is None:
        return None
    total = profile.tree.root.total_cost[0]
    if total <= 0:
        return None
    costs = function_costs(profile.tree, profile.frames.function_ids())
    # Functions whose own share of the error is negligible (a main called once) are left out.
    short = [(cost.calls, fid) for fid, cost in costs.items()
             if cost.calls and cost.self_cost[0] < SHORT_CALL_NS * cost.calls and
             cost.calls * CALIBRATION_ERROR_NS >= 0.001 * total]
    calls = sum(n for n, _ in short)
    error_ns = calls * CALIBRATION_ERROR_NS
    if error_ns < 0.02 * total:
        return None
    names = ", ".join(profile.frames[fid].function for _, fid in sorted(short, reverse=True)[:3])
    which = (f"{len(short)} functions ({names}{', ...' if len(short) > 3 else ''})"
             if len(short) > 1 else names)
    verb = "average" if len(short) > 1 else "averages"
    return (f"{which} {verb} under {SHORT_CALL_NS:.0f} ns of "
            f"their own time over {calls / 1e6:.1f} M calls: below what the hooks can time. "
            f"Their cost is taken out with an error of about {CALIBRATION_ERROR_NS:.0f} ns a "
            f"call ({error_ns / 1e6:.0f} ms, {100 * error_ns / total:.0f} % of this run), so "
            "their self times, and their callers', are uncertain; --mode sampler measures "
            "short functions without this limit")


def new_profile(meta: ProfileMeta, count_only: bool) -> Profile:
    """An empty profile with the metric hook files carry."""
    meta.lines_note = LINES_NOTE
    return Profile(meta=meta, metrics=(CALLS,) if count_only else (WALL_NS,))
