"""Decoder of the hook runtime's file body (csrc/hook/proftui_wire_hook.h, docs/wire-format.md).

The runtime writes while we read: only nodes below each chunk's published
count are trusted, module entries with start 0 are skipped, and thread slots
with tid 0 are not ready.  Counters are read racily (they only grow).

Time is sampled (the default: `period_ns` > 0 in the common header, a clock
tick charged to the thread's current node, `ticks` and `hook_ticks`) or
timed (`PROFTUI_TIMED`: per-call durations in `incl`/`self`, raw ticks of the
timestamp clock); `sampled()` and `timed()` tell which.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.thread_names import printable_name
from proftui.collectors.runtime.wire import (
    FLAG_COUNT_ONLY,
    HEADER_SIZE,
    KIND_HOOK,
    FileHeader,
    Source,
    as_source,
    decode_header,
)

# The runtime's fixed layout (csrc/hook/pt_hook_file.c), from which a header the
# target overwrote is rebuilt (salvage_hook).
LAYOUT_THREADS_OFFSET = 320
LAYOUT_THREAD_CAP = 4096
LAYOUT_MODULE_CAP = 1024
LAYOUT_CHUNK_NODES = 512
FILE_NAME = re.compile(r"hook\.(\d+)(?:\.(\d+))?\.ptw")

ROOT = 0xFFFFFFFF
INLINED = 0x80000000  # node.module bit: the calls ran inlined in the parent's frame
NODE_SIZE = 64
HOOK_HEADER_SIZE = 192
THREAD_SIZE = 72
PC_SIZE = 16
CHUNK_PCS = 0x80000000  # chunk.thread bit: the chunk belongs to that thread's pc table
NONE = 0xFFFFFFFF
CHUNK_SIZE = 8
MODULE_SIZE = 256

# node_size, chunk_nodes, chunk_capacity, chunk_count, thread_capacity, thread_count,
# module_capacity, module_count, threads/chunks/modules/nodes offsets, ns_per_tick,
# overhead_inner, overhead_outer, tick_start, mono_start_ns, generation, max_depth,
# filter_ranges, stack_capacity, filtered_calls, timer_signal, timer_flags, ticks_unplaced
_HOOK = struct.Struct("<IIIIIIIIQQQQdddQQIIIIQIIQ48x")
# tid, state, name, max_depth, live, ticks, hook_ticks, pcs_chunk, pcs_entries, pcs_dropped
_THREAD = struct.Struct("<II16sQQQQIIQ")
_NODE_WORDS = NODE_SIZE // 8  # fn, parent|module, calls, incl, self, ticks, hook_ticks, -
_CHUNK = struct.Struct("<II")
_MODULE = struct.Struct("<QQQ232s")
_PC = struct.Struct("<QII")  # pt_hook_pc: pc, node, count (decoded column-wise in _pc_table)
assert _HOOK.size == HOOK_HEADER_SIZE and _THREAD.size == THREAD_SIZE
assert _MODULE.size == MODULE_SIZE and _PC.size == PC_SIZE and NODE_SIZE == 8 * _NODE_WORDS

# Calls still open, read from the target's memory (docs/wire-format.md; open_calls.py):
LIVE = struct.Struct("<QIIQQ")  # pt_hook_live: guard, depth, cap, stack, setup
OPEN_ENTRY = struct.Struct("<Q8xQQI4xI4xI12x")  # pt_hook_open_entry: fn, ts, child, up,
#                                                 anode, flags
OPEN_UNRECORDED = 0x80000000  # open entry flags: no node, its time stays in its caller's
assert LIVE.size == 32 and OPEN_ENTRY.size == 64


@dataclass(frozen=True)
class HookHeader:
    """The hook area's header; `ns_per_tick` converts ticks to ns, overheads are ticks."""

    node_size: int
    chunk_nodes: int
    chunk_capacity: int
    chunk_count: int
    thread_capacity: int
    thread_count: int
    module_capacity: int
    module_count: int
    threads_offset: int
    chunks_offset: int
    modules_offset: int
    nodes_offset: int
    ns_per_tick: float
    overhead_inner: float
    overhead_outer: float
    tick_start: int
    mono_start_ns: int
    generation: int
    max_depth: int
    filter_ranges: int
    stack_capacity: int
    filtered_calls: int
    timer_signal: int = 0  # signal of the clock's ticks, 0 none
    timer_flags: int = 0  # TIMER_* bits
    ticks_unplaced: int = 0  # ticks no node could take


# pt_hook_header.timer_flags (the common timer's values, csrc/common/pt_timer.h)
TIMER_PERF = 1 << 0
TIMER_POSIX = 1 << 1
TIMER_SIGNAL_MOVED = 1 << 2
TIMER_USER_ONLY = 1 << 5


@dataclass(frozen=True)
class HookThread:
    slot: int
    tid: int
    exited: bool
    name: str
    max_depth: int
    live: int = 0  # address of its pt_hook_live in the target (open calls), 0 none
    ticks: int = 0  # clock ticks while no recorded call was open
    hook_ticks: int = 0  # ... of them in the hook library
    pcs_chunk: int = NONE  # first chunk of its pc table
    pcs_entries: int = 0  # entries of the pc table (0: none)
    pcs_dropped: int = 0  # ticks the pc table had no slot for


@dataclass(frozen=True)
class HookModule:
    """A loaded object: runtime [start, end), link-time address = runtime - bias."""

    start: int
    end: int
    bias: int
    path: str


@dataclass
class HookNodes:
    """Published nodes, column-wise, indexed by position; `index` is the global index.

    `incl`/`self_ticks` are timed files' raw timestamp ticks; `ticks` and
    `hook_ticks` sampled files' clock ticks (in the node's own code, in the hook
    library); `thread` is the owning thread slot; `inlined` marks calls of a
    function gcc inlined into the parent node's function.
    """

    index: list[int] = field(default_factory=list)
    thread: list[int] = field(default_factory=list)
    fn: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    module: list[int] = field(default_factory=list)  # module table index + 1, 0 unknown
    inlined: list[bool] = field(default_factory=list)  # inlined into the parent's function
    calls: list[int] = field(default_factory=list)
    incl: list[int] = field(default_factory=list)
    self_ticks: list[int] = field(default_factory=list)
    ticks: list[int] = field(default_factory=list)
    hook_ticks: list[int] = field(default_factory=list)


@dataclass
class HookData:
    """One hook file decoded: header, hook header, threads, modules and nodes, and per
    thread slot its pc table's entries: (interrupted pc, node or ROOT, ticks)."""

    header: FileHeader
    hook: HookHeader
    threads: dict[int, HookThread]
    modules: list[HookModule | None]
    nodes: HookNodes
    pcs: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


def is_published(data: bytes | Source) -> bool:
    """False while the runtime is still writing the header (magic goes in last)."""
    src = as_source(data, "hook file")
    return src.size >= HEADER_SIZE and src.read(0, 8) != b"\0" * 8


def decode_hook_header(data: bytes | Source, header: FileHeader, name: str) -> HookHeader:
    """Check and decode the hook header; ProftuiError names what is wrong."""
    src = as_source(data, name)
    off = header.body_offset
    if off + HOOK_HEADER_SIZE > header.file_size:
        raise ProftuiError(f"{name}: corrupt hook file (body past the end)")
    hook = HookHeader(*_HOOK.unpack(src.read(off, HOOK_HEADER_SIZE)))
    if hook.node_size != NODE_SIZE or hook.chunk_nodes == 0:
        raise ProftuiError(f"{name}: corrupt hook file (node size {hook.node_size}, "
                           f"{hook.chunk_nodes} nodes per chunk)")
    tables = [
        (hook.threads_offset, hook.thread_capacity * THREAD_SIZE),
        (hook.chunks_offset, hook.chunk_capacity * CHUNK_SIZE),
        (hook.modules_offset, hook.module_capacity * MODULE_SIZE),
        (hook.nodes_offset, hook.chunk_capacity * hook.chunk_nodes * NODE_SIZE),
    ]
    for start, size in tables:
        if start < off + HOOK_HEADER_SIZE or start + size > header.file_size:
            raise ProftuiError(f"{name}: corrupt hook file (table at {start}+{size} outside "
                               f"{header.file_size} bytes)")
    if not hook.ns_per_tick > 0:
        raise ProftuiError(f"{name}: corrupt hook file (ns_per_tick {hook.ns_per_tick})")
    return hook


def decode_hook(data: bytes | Source, name: str = "hook file") -> HookData:
    """Decode everything published so far in one hook file."""
    src = as_source(data, name)
    header = decode_header(src.read(0, HEADER_SIZE) if src.size >= HEADER_SIZE else b"",
                           name, KIND_HOOK, src.size)
    hook = decode_hook_header(src, header, name)
    return decode_tables(src, header, hook)


def decode_tables(src: Source, header: FileHeader, hook: HookHeader,
                  salvage: bool = False) -> HookData:
    """Threads, modules and published nodes of a file whose layout `hook` gives.

    Pages the runtime never backed read as zeros: a thread entry with tid 0, a
    module with start 0 and a chunk with count 0 are skipped.  With `salvage`,
    chunks whose owner's entry was destroyed still count: slot 0 (the first
    thread, the main one) as the process's pid, the others as tid 0.
    """
    threads: dict[int, HookThread] = {}
    nthreads = min(hook.thread_count, hook.thread_capacity)
    table = src.read(hook.threads_offset, nthreads * THREAD_SIZE)
    for slot in range(nthreads):
        tid, state, raw, depth, live, ticks, hook_ticks, pcs_chunk, pcs_entries, \
            pcs_dropped = _THREAD.unpack_from(table, slot * THREAD_SIZE)
        if tid:
            threads[slot] = HookThread(slot, tid, state == 2,
                                       printable_name(raw.split(b"\0", 1)[0]), depth, live,
                                       ticks, hook_ticks, pcs_chunk, pcs_entries, pcs_dropped)
    modules: list[HookModule | None] = []
    nmodules = min(hook.module_count, hook.module_capacity)
    table = src.read(hook.modules_offset, nmodules * MODULE_SIZE)
    for i in range(nmodules):
        start, end, bias, raw = _MODULE.unpack_from(table, i * MODULE_SIZE)
        modules.append(HookModule(start, end, bias, raw.split(b"\0", 1)[0].decode(
            "utf-8", "surrogateescape")) if start else None)
    nodes = HookNodes()
    chunk_nodes = hook.chunk_nodes
    nchunks = min(hook.chunk_count, hook.chunk_capacity)
    table = src.read(hook.chunks_offset, nchunks * CHUNK_SIZE)
    for chunk in range(nchunks):
        owner, count = _CHUNK.unpack_from(table, chunk * CHUNK_SIZE)
        count = min(count, chunk_nodes)
        if salvage and count and owner not in threads and owner < hook.thread_capacity:
            threads[owner] = HookThread(owner, header.pid if owner == 0 else 0, False, "?", 0)
        if count == 0 or owner not in threads:
            continue
        base = chunk * chunk_nodes
        raw = src.read(hook.nodes_offset + base * NODE_SIZE, count * NODE_SIZE)
        with memoryview(raw) as raw_view, raw_view.cast("Q") as words, \
                raw_view.cast("I") as halves:
            step = _NODE_WORDS
            nodes.fn += words[0::step].tolist()
            nodes.calls += words[2::step].tolist()
            nodes.incl += words[3::step].tolist()
            nodes.self_ticks += words[4::step].tolist()
            nodes.ticks += words[5::step].tolist()
            nodes.hook_ticks += words[6::step].tolist()
            nodes.parent += halves[2::2 * step].tolist()
            modules_and_flags = halves[3::2 * step].tolist()
        nodes.module += [m & ~INLINED for m in modules_and_flags]
        nodes.inlined += [bool(m & INLINED) for m in modules_and_flags]
        nodes.index += range(base, base + count)
        nodes.thread += [owner] * count
    pcs = {slot: _pc_table(src, hook, thread) for slot, thread in threads.items()
           if thread.pcs_entries}
    return HookData(header, hook, threads, modules, nodes, pcs)


def _pc_table(src: Source, hook: HookHeader, thread: HookThread) -> list[tuple[int, int, int]]:
    """The used entries of one thread's pc table: (pc, node, ticks); [] when the table
    lies outside the pool (a corrupt entry)."""
    entries = thread.pcs_entries
    start = thread.pcs_chunk * hook.chunk_nodes
    if entries & (entries - 1) or start + entries * PC_SIZE // NODE_SIZE > \
            hook.chunk_capacity * hook.chunk_nodes:
        return []
    raw = src.read(hook.nodes_offset + start * NODE_SIZE, entries * PC_SIZE)
    with memoryview(raw) as view, view.cast("Q") as words, view.cast("I") as halves:
        pcs = words[0::2].tolist()
        nodes = halves[2::4].tolist()
        counts = halves[3::4].tolist()
    return [(pc, node, count) for pc, node, count in zip(pcs, nodes, counts, strict=True)
            if pc and count]


def salvage_hook(data: bytes | Source, name: str, period_ns: int = 0) -> tuple[HookData, str]:
    """Decode a hook file whose headers were overwritten (by the target itself).

    The common header is replaced from the file name (pid) when it does not
    validate, with `period_ns` (the clock period the run asked for; 0 for
    timed and count-only runs) as its period; the hook header from the
    runtime's fixed layout and the file's size; tables are then read as they
    are, and every node whose chunk still names a thread slot and whose parent
    is known is kept.  Sampled ticks survive; without the hook header a timed
    file's clock calibration is gone and it counts calls only.  Returns the
    data and what was lost, for the one warning; ProftuiError when the size
    fits no layout.
    """
    src = as_source(data, name)
    match = FILE_NAME.fullmatch(name)
    pid = int(match.group(1)) if match else 0
    lost: list[str] = []
    try:
        header = decode_header(src.read(0, HEADER_SIZE) if src.size >= HEADER_SIZE else b"",
                               name, KIND_HOOK, src.size)
    except ProftuiError:
        header = FileHeader(KIND_HOOK, pid, 0, FLAG_COUNT_ONLY if period_ns else 0, 0,
                            period_ns, HEADER_SIZE, src.size, 0, 0, 0, "unknown")
        lost.append("the exit state and drop count")
    try:
        hook = decode_hook_header(src, header, name)
    except ProftuiError:
        hook = _rebuilt_layout(src, name, match.group(2) if match else None)
        if not header.period_ns:
            lost.append("all times (the clock calibration was in the header): calls only")
        header = replace(header, flags=header.flags | FLAG_COUNT_ONLY, body_offset=HEADER_SIZE)
    result = decode_tables(src, header, hook, salvage=True)
    return result, "; ".join(lost) or "nothing"


def _rebuilt_layout(src: Source, name: str, generation: str | None) -> HookHeader:
    """The hook header the runtime wrote for a file of this size (pt_hook_file_create)."""
    threads_off = LAYOUT_THREADS_OFFSET
    modules_off = threads_off + LAYOUT_THREAD_CAP * THREAD_SIZE
    chunks_off = modules_off + LAYOUT_MODULE_CAP * MODULE_SIZE
    chunk_bytes = LAYOUT_CHUNK_NODES * NODE_SIZE
    guess = max(0, (src.size - chunks_off) // (chunk_bytes + CHUNK_SIZE))
    for nchunks in range(max(0, guess - 2), guess + 3):
        nodes_off = (chunks_off + nchunks * CHUNK_SIZE + 63) & ~63
        if nchunks and nodes_off + nchunks * chunk_bytes == src.size:
            break
    else:
        raise ProftuiError(f"{name}: header overwritten and the size ({src.size} bytes) fits no "
                           "hook file layout: nothing can be salvaged")

    def used(offset: int, count: int, size: int) -> int:
        table = src.read(offset, count * size)
        for i in range(count - 1, -1, -1):
            if any(table[i * size:(i + 1) * size]):
                return i + 1
        return 0

    return HookHeader(
        NODE_SIZE, LAYOUT_CHUNK_NODES, nchunks, nchunks, LAYOUT_THREAD_CAP,
        used(threads_off, LAYOUT_THREAD_CAP, THREAD_SIZE), LAYOUT_MODULE_CAP,
        used(modules_off, LAYOUT_MODULE_CAP, MODULE_SIZE), threads_off, chunks_off, modules_off,
        nodes_off, 0.0, 0.0, 0.0, 0, 0, int(generation or 0), 0, 0, 0, 0, 0, 0, 0)


def compensated_self_ns(data: HookData, open_ticks: dict[int, float] | None = None
                        ) -> list[float]:
    """Self time per node in ns with the hooks' own cost taken out (never below 0).

    self - calls * overhead_inner - (calls of its children) * overhead_outer,
    in ticks, times ns_per_tick (docs/wire-format.md, "Compensation").  `open_ticks`
    (global node index -> ticks) adds the own time of calls still open, so a call
    that has not returned is compensated like the rest.
    """
    nodes, hook = data.nodes, data.hook
    position = {index: i for i, index in enumerate(nodes.index)}
    child_calls = [0] * len(nodes.index)
    for parent, calls in zip(nodes.parent, nodes.calls, strict=True):
        i = position.get(parent)
        if i is not None:
            child_calls[i] += calls
    inner, outer, scale = hook.overhead_inner, hook.overhead_outer, hook.ns_per_tick
    own: Sequence[float] = nodes.self_ticks
    if open_ticks:
        own = [s + open_ticks.get(index, 0.0) for s, index in zip(own, nodes.index, strict=True)]
    return [max(0.0, s - c * inner - k * outer) * scale
            for s, c, k in zip(own, nodes.calls, child_calls, strict=True)]


def sampled(data: HookData) -> bool:
    """Whether the file's time comes from a ticking clock (ticks x period_ns)."""
    return data.header.period_ns > 0


def timed(data: HookData) -> bool:
    """Whether the hooks took timestamps (incl/self are per-call durations)."""
    return not data.header.flags & FLAG_COUNT_ONLY


def calibrated(data: HookData) -> bool:
    """Whether the runtime measured its hooks' cost: both overheads 0 means the
    calibration failed (or was skipped) and times are not compensated."""
    return data.hook.overhead_inner > 0 or data.hook.overhead_outer > 0
