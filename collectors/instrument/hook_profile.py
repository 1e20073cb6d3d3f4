"""Turn decoded hook files (collectors/runtime/wire_hook.py) into the model's Profile.

Each runtime node is a function under its parent node in one thread's
calling-context tree; it becomes a CallNode of that thread's part
("pid P tid T"), and the parts are merged into `Profile.tree`.  Function
addresses are symbolized through the module table the runtime recorded
(path + load bias), so code of a dlclose()d plugin and of a process that has
exited still resolves.

Sampled time is refined by where each tick landed (the threads' pc tables):
a node's ticks in its own function stay its self time, with their source
lines; ticks in other code while it was current (a callee's prologue before
the callee's enter hook ran, an uninstrumented libc function it called) go to
a child row named by that code, as perf names them; ticks in the hooks' PLT
stubs, and on the instruction a hook call returns to (hook_calls.py), go to
[instrumentation] with the hooks' own.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import replace
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.instrument.hook_calls import HOOK_NAMES, HookCalls
from proftui.collectors.model.lines import add_code_cost, add_costs
from proftui.collectors.model.profile import (
    CALLS,
    CPU_NS,
    SAMPLES,
    WALL_NS,
    CallNode,
    CallTree,
    CodeSite,
    Frame,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.views import function_costs
from proftui.collectors.runtime.wire_hook import (
    ROOT,
    HookData,
    HookModule,
    compensated_self_ns,
    sampled,
)
from proftui.collectors.symbols.symbolizer import Symbolizer

LINES_NOTE = ("self cost on each function's definition line: "
              "the hook library records no per-line data")
SAMPLED_LINES_NOTE = ("samples on the lines where the clock's ticks landed (any the hook "
                      "library had no room to place are on the function's first line)")
_PART = re.compile(r" \[clone \.(cold|part\.\d+)[^]]*\]$")  # pieces of one function's code


class HookSymbols:
    """Frames for runtime function addresses, cached per (module path, vaddr)."""

    def __init__(self) -> None:
        self._symbolizer = Symbolizer()
        self._cache: dict[tuple[str, int], Frame] = {}
        self.hook_calls = HookCalls()  # return addresses of hook calls, per module

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

    def code(self, module: HookModule, address: int) -> tuple[Frame, int, CodeSite] | None:
        """The function holding runtime code `address` of `module`, its link-time
        address, and the instruction's site (function start, file, line); None where no
        symbol covers it."""
        vaddr = address - module.bias
        frame = self.frame(module, address)
        if frame.address is None or not frame.raw_name:
            return None  # "module+0x...": no symbol, nothing to tell functions apart by
        file = line = None
        try:
            location = self._symbolizer.location(module.path, vaddr)
            file, line = location.file, location.line
        except (ProftuiError, OSError, ValueError):
            pass
        return frame, vaddr, CodeSite(frame.address, file, line)

    def _lookup(self, path: str, vaddr: int) -> Frame:
        unknown = Frame(function=f"{os.path.basename(path)}+0x{vaddr:x}", module=path,
                        address=vaddr)
        if not path.startswith("/") or not Path(path).exists():
            return unknown
        try:
            return self._symbolizer.frame(path, vaddr)
        except (ProftuiError, OSError, ValueError):
            return unknown


INSTRUMENTATION = Frame(function="[instrumentation]")  # clock ticks in the hook library
UNINSTRUMENTED = Frame(function="[uninstrumented code]")  # ticks with no recorded call open


def _node_costs(metrics: tuple[Metric, ...], data: HookData,
                open_ticks: dict[int, float] | None) -> tuple[list[list[float]],
                                                              list[list[float]] | None]:
    """Per node, its own cost in each of `metrics`, and (sampled files) the cost of
    the hook library's own code while it was the current node."""
    nodes = data.nodes
    if metrics[0] == SAMPLES:  # sampled profile: ticks and ticks x period
        period = data.header.period_ns if sampled(data) else 0
        if not period:  # a file whose clock could not tick: calls only
            zero = [[0.0] * len(metrics) for _ in nodes.index]
            return zero, None
        return ([[float(t), float(t * period)] for t in nodes.ticks],
                [[float(h), float(h * period)] for h in nodes.hook_ticks])
    if metrics[0] == CALLS:
        return [[float(c)] for c in nodes.calls], None
    return [[ns] for ns in compensated_self_ns(data, open_ticks)], None


def add_hook_data(profile: Profile, data: HookData, symbols: HookSymbols,
                  threads: dict[int, str], open_ticks: dict[int, float] | None = None) -> None:
    """Add one process's per-thread trees to `profile.parts` (labels "pid P tid T")
    and their caller -> callee call counts to `profile.arcs`.

    Self cost is sampled time (samples and ns, the default: clock ticks that found
    the node current), compensated wall time in ns (timed files) or the call count
    (count-only files); `calls` is exact either way.  Ticks in the hook library go
    to an [instrumentation] child of their node, ticks with no recorded call open to
    an [uninstrumented code] root.  Each function's self cost also goes to its entry
    address and definition line (`Profile.line_costs`: the hook sees function entries
    only).  `threads` receives tid -> name.  `open_ticks` (open_calls.py, timed files)
    adds the own time of calls still open.  Call `merge_parts` once every file has
    been added.  The one place hook data becomes tree nodes.
    """
    nodes = data.nodes
    self_costs, hook_costs = _node_costs(profile.metrics, data, open_ticks)
    instrumentation = profile.frames.intern(INSTRUMENTATION)
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
    function_self: dict[int, list[float]] = {}  # frame id -> self costs of this file's nodes
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
        _add_cost(node, self_costs[i])
        if hook_costs is not None and hook_costs[i][0]:
            _add_cost(node.child(instrumentation), hook_costs[i])
        add_costs(function_self, frame_id, self_costs[i])
        placed[index] = node
        if parent_index != ROOT and calls:
            arc = (parent.frame_id, frame_id)
            profile.arcs[arc] = profile.arcs.get(arc, 0) + calls
    if hook_costs is not None:
        period = data.header.period_ns
        code = _CodeMap(data, symbols)
        for slot, thread in data.threads.items():
            tree = trees[slot]
            outside = float(thread.ticks)  # no recorded call open: named by their code
            if slot in data.pcs:
                outside -= _place_by_pc(profile, tree, placed, data.pcs[slot], code, period,
                                        function_self)
            for frame, ticks in ((UNINSTRUMENTED, outside),
                                 (INSTRUMENTATION, float(thread.hook_ticks))):
                if ticks > 0:
                    _add_cost(tree.root.child(profile.frames.intern(frame)),
                              [ticks, ticks * period])
    _add_line_costs(profile, function_self)


class _CodeMap:
    """Runtime code address -> (function frame, link-time address, site, whether it is
    the hooks' cost: a PLT stub or a hook call's return address), through one file's
    module table; newest module first where ranges overlap (a dlclose()d object's
    successor), cached per address."""

    def __init__(self, data: HookData, symbols: HookSymbols) -> None:
        self._symbols = symbols
        mods = sorted((m for m in reversed(data.modules) if m is not None),
                      key=lambda m: m.start)
        self._starts = [m.start for m in mods]
        self._mods = mods
        self._cache: dict[int, tuple[HookModule, Frame, int, CodeSite, bool] | None] = {}

    def at(self, address: int) -> tuple[HookModule, Frame, int, CodeSite, bool] | None:
        if address in self._cache:
            return self._cache[address]
        found = None
        i = bisect.bisect_right(self._starts, address)
        while i > 0:
            i -= 1
            module = self._mods[i]
            if module.start <= address < module.end:
                code = self._symbols.code(module, address)
                if code is not None:
                    frame, vaddr, site = code
                    hooks = (frame.function.split("@", 1)[0] in HOOK_NAMES or
                             self._symbols.hook_calls.at_hook_call(module.path, vaddr))
                    found = (module, frame, vaddr, site, hooks)
                break
        self._cache[address] = found
        return found


def _same_function(a: Frame, b: Frame) -> bool:
    """Whether two function frames are one function's code (its .cold or .part pieces
    included)."""
    return a.module == b.module and _PART.sub("", a.function) == _PART.sub("", b.function)


def _place_by_pc(profile: Profile, tree: CallTree, placed: dict[int, CallNode],
                 entries: list[tuple[int, int, int]], code: _CodeMap, period: int,
                 function_self: dict[int, list[float]]) -> float:
    """Split one thread's ticks by the code they landed in (see the module docstring).

    Ticks stay in their node when they landed in its function (or its inlined
    container's), else move to a child row of that node named by the code's function,
    or to [instrumentation] for the hooks' PLT stubs; ticks with no call open go to a
    root row named by their code.  Each tick also costs its source line, and leaves
    `function_self` (frame id -> costs for definition lines).  Returns the ticks with
    no call open that were placed (the rest stay [uninstrumented code]).
    """
    instrumentation = profile.frames.intern(INSTRUMENTATION)
    outside = 0.0
    for pc, node_index, count in entries:
        node = tree.root if node_index == ROOT else placed.get(node_index)
        where = code.at(pc)
        if node is None or where is None:
            continue  # node not published yet, or code without a symbol: stays where it is
        module, frame, vaddr, site, hooks = where
        holder = node
        while holder.parent is not None and profile.frames[holder.frame_id].inlined:
            holder = holder.parent
        own = not hooks and _same_function(profile.frames[holder.frame_id], frame)
        if node is not tree.root and not own:
            # A node gives away no more ticks than it holds.  Its pc entries should
            # never outrun its count, but one CI run saved a negative self cost here
            # (rt_deep at the stack limit; not reproduced in 40 runs under load).
            count = min(count, max(0, int(node.self_cost[0])))
            if not count:
                continue
        costs = [float(count), float(count * period)]
        if node is tree.root:
            outside += count
            target = node.child(instrumentation if hooks else profile.frames.intern(frame))
            _add_cost(target, costs)
        elif own:
            target = node
            add_costs(function_self, node.frame_id, [-c for c in costs])
        else:
            _add_cost(node, [-c for c in costs])
            add_costs(function_self, node.frame_id, [-c for c in costs])
            target = node.child(instrumentation if hooks else profile.frames.intern(frame))
            _add_cost(target, costs)
        if target.frame_id != instrumentation:
            add_code_cost(profile, module.path, vaddr, site, costs)
    return outside


def _add_cost(node: CallNode, costs: list[float]) -> None:
    """Add one cost per metric to `node`'s self cost."""
    self_cost = node.self_cost
    for m, cost in enumerate(costs):
        self_cost[m] += cost


def _add_line_costs(profile: Profile, function_self: dict[int, list[float]]) -> None:
    """Each function's self cost not placed on a line yet at its entry address and on
    its definition line."""
    for frame_id, costs in function_self.items():
        frame = profile.frames[frame_id]
        if not frame.module or frame.address is None or costs[0] <= 0:
            continue  # no module: nothing a source pane could open
        start = frame.address if frame.raw_name else None
        add_code_cost(profile, frame.module, frame.address,
                      CodeSite(start, frame.file, frame.line), costs)


def merge_parts(profile: Profile) -> Profile:
    """Merge every part into `profile.tree` and finalize.

    A single thread's tree becomes the whole tree (no part: nothing to choose
    between, and no copy of a tree that may have 100,000 levels).
    """
    if len(profile.parts) == 1:
        profile.tree = profile.parts.popitem()[1]
    else:
        for part in profile.parts.values():
            profile.tree.add_tree(0, part)
    return profile.finalize()


SHORT_CALL_ERRORS = 5.0  # a function is too short to time below 5 errors a call
TSC_ERROR_NS = 1.0  # run-to-run spread of the calibrated hook cost per call, TSC clock
# CLOCK_MONOTONIC reads are vDSO calls whose cost moves between runs: the calibrated
# pair (97-130 ns) was 7-13% off what the run's calls cost (ins_chain, CI and here).
MONOTONIC_ERROR_SHARE = 0.10


def calibration_error_ns(clock: str, pair_ns: float) -> float:
    """The error, per call, of the hook cost taken out of timed calls: `clock` the
    header's clock name, `pair_ns` the calibrated cost of an enter/exit pair."""
    if clock.startswith("CLOCK_MONOTONIC"):
        return max(TSC_ERROR_NS, MONOTONIC_ERROR_SHARE * pair_ns)
    return TSC_ERROR_NS


def short_call_warning(profile: Profile, error_ns: float = TSC_ERROR_NS) -> str | None:
    """A note when functions whose calls last a few times the hook-cost
    compensation's error (`error_ns` a call, calibration_error_ns()) carry enough
    calls that this error is a visible share of the run.

    Their self time is what is left after the calibrated hook cost per call is
    taken out: a 1 ns function's share then swings between 0 and several times its
    true value from run to run (40 M calls x 1 ns = 40 ms).
    """
    if profile.metrics[0] != WALL_NS:
        return None
    total = profile.tree.root.total_cost[0]
    if total <= 0:
        return None
    short_ns = SHORT_CALL_ERRORS * error_ns
    costs = function_costs(profile.tree, profile.frames.function_ids())
    # Functions whose own share of the error is negligible (a main called once) are left out.
    short = [(cost.calls, fid) for fid, cost in costs.items()
             if cost.calls and cost.self_cost[0] < short_ns * cost.calls and
             cost.calls * error_ns >= 0.001 * total]
    calls = sum(n for n, _ in short)
    error_total = calls * error_ns
    if error_total < 0.02 * total:
        return None
    names = ", ".join(profile.frames[fid].function for _, fid in sorted(short, reverse=True)[:3])
    which = (f"{len(short)} functions ({names}{', ...' if len(short) > 3 else ''})"
             if len(short) > 1 else names)
    verb = "average" if len(short) > 1 else "averages"
    return (f"{which} {verb} under {short_ns:.0f} ns of "
            f"their own time over {calls / 1e6:.1f} M calls: below what the hooks can time. "
            f"Their cost is taken out with an error of about {error_ns:.0f} ns a "
            f"call ({error_total / 1e6:.0f} ms, {100 * error_total / total:.0f} % of this run), "
            "so their self times, and their callers', are uncertain; --mode sampler measures "
            "short functions without this limit")


def new_profile(meta: ProfileMeta, timing: str) -> Profile:
    """An empty profile with the metrics hook files of `timing` carry: "cpu" or
    "wall" (sampled: samples and ns), "timed" (per-call wall ns) or "count"."""
    meta.lines_note = SAMPLED_LINES_NOTE if timing in ("cpu", "wall") else LINES_NOTE
    metrics = {"cpu": (SAMPLES, CPU_NS), "wall": (SAMPLES, WALL_NS), "timed": (WALL_NS,),
               "count": (CALLS,)}[timing]
    return Profile(meta=meta, metrics=metrics)
