"""The one data model: every collector produces a `Profile`, every view reads one.

Shape (docs/architecture.md section 2):

* `Frame` - one function-level code location, interned in a `FrameTable` so
  the call tree stores small integer ids.
* `CallTree` - the calling-context tree.  A node is a function under its parent
  path and carries `self_cost` per metric (index-aligned with
  `Profile.metrics`), `total_cost` (filled by `CallTree.finalize`) and `calls`
  (exact call count, or None when the collector cannot know it).
* `Profile.arcs` - caller -> callee call counts (gprof, hook library).
* `Profile.line_costs` / `Profile.address_costs` - self cost per source line
  and per instruction address, recorded at collection time (collectors/model/
  lines.py) and saved, so a profile opened without its binary or sources still
  annotates them; `Profile.address_sites` says which function and line each
  costed address belongs to.
* `Profile.functions` - optional per-function totals given by the collector
  (gprof's own time propagation); otherwise views derive them from the tree.

Everything here is iterative: trees can be 100,000 levels deep (deep
recursion under the hook library) and Python recursion would overflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from proftui.collectors.model.slices import Slices

# The tree lives in its own module; re-exported so the model keeps one import.
from proftui.collectors.model.calltree import ROOT_FRAME as ROOT_FRAME
from proftui.collectors.model.calltree import CallNode as CallNode
from proftui.collectors.model.calltree import CallTree as CallTree


@dataclass(frozen=True, slots=True)
class Metric:
    """A named cost: `samples`, `calls` (count), `cpu_ns`, `wall_ns` (ns), `alloc_bytes`.

    A metric is its name and unit (equality, storage); the rest are its facts, said once
    here for every view: `label` as panes, the header and reports name it ("CPU time"),
    `word` in a column title ("Self CPU"), `meaning` what it counts (report titles), and
    `heap` whether it is one of the heap family (bytes and blocks, not time)."""

    name: str
    unit: str  # "count", "ns" or "bytes"
    label: str = field(default="", compare=False)  # "": the name
    word: str = field(default="", compare=False)  # "": the label
    meaning: str = field(default="", compare=False)
    heap: bool = field(default=False, compare=False)

    @property
    def shown(self) -> str:
        """The label, or the name when the metric has none (an imported one)."""
        return self.label or self.name

    @property
    def column(self) -> str:
        """The word for a column title: short."""
        return self.word or self.shown


SAMPLES = Metric("samples", "count", "samples")
CPU_NS = Metric("cpu_ns", "ns", "CPU time", "CPU")
WALL_NS = Metric("wall_ns", "ns", "wall time", "wall")
CALLS = Metric("calls", "count", "calls")  # exact call counts as the cost (count-only)

# Heap metrics (the heap collector; gperftools .heap and heaptrack imports).  Bytes and
# counts of allocations made, still live (now or at exit), held when the whole heap
# peaked, never freed (live at exit, as mtrace counts leaks), and freed by the same
# thread before its next allocation (heaptrack's "temporary").
# Their labels are what a heaptrack or memray user calls them.
ALLOC_BYTES = Metric("alloc_bytes", "bytes", "allocated", meaning="bytes allocated",
                     heap=True)
ALLOCS = Metric("allocs", "count", "allocations", "allocs", "blocks allocated", heap=True)
LIVE_BYTES = Metric("live_bytes", "bytes", "live",
                    meaning="bytes still allocated (now, or at exit)", heap=True)
# blocks behind live_bytes (pprof inuse_objects)
LIVE_ALLOCS = Metric("live_allocs", "count", "live blocks", "live blks",
                     "blocks still allocated (now, or at exit)", heap=True)
PEAK_BYTES = Metric("peak_bytes", "bytes", "at peak",
                    meaning="bytes held when the whole heap peaked", heap=True)
LEAKED_BYTES = Metric("leaked_bytes", "bytes", "leaked", meaning="bytes live at exit",
                      heap=True)
LEAKS = Metric("leaks", "count", "leaked blocks", "leak blks", "blocks live at exit",
               heap=True)
TEMPORARY = Metric("temporary", "count", "temporary allocs", "temp",
                   "allocations freed by the same thread before its next one", heap=True)
HEAP_METRICS = (ALLOC_BYTES, ALLOCS, LIVE_BYTES, PEAK_BYTES, LEAKED_BYTES, LEAKS, TEMPORARY)
_KNOWN = {m.name: m for m in (SAMPLES, CPU_NS, WALL_NS, CALLS, LIVE_ALLOCS, *HEAP_METRICS)}


def metric_named(name: str, unit: str) -> Metric:
    """The metric `name` in `unit` with its facts when proftui knows it (a file read back,
    an import, a fleet query), else a plain one."""
    known = _KNOWN.get(name)
    return known if known is not None and known.unit == unit else Metric(name, unit)


@dataclass(frozen=True, slots=True)
class CodeSite:
    """Where one costed instruction is, as the symbolizer saw it at collection time.

    `function` is the link-time start address of the enclosing (non-inlined)
    function, i.e. its `Frame.address`; `file`:`line` is the innermost source
    location (inside an inlined callee when the instruction was inlined).
    Any of them is None when unknown (no symbol, no DWARF).
    """

    function: int | None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Frame:
    """One function-level code location.

    `address` is the function's link-time address (ELF st_value) inside
    `module`, not a runtime address, so it is stable across runs and ASLR.
    `file`/`line` point at the function's definition when DWARF says so.
    `inlined` marks a frame that exists only because the compiler inlined it
    into its parent frame.
    """

    function: str
    module: str = ""
    file: str | None = None
    line: int | None = None
    address: int | None = None
    raw_name: str = ""
    build_id: str = ""
    inlined: bool = False

    @property
    def module_name(self) -> str:
        """Base name of the module, for narrow columns."""
        return self.module.rsplit("/", 1)[-1]


class FrameTable:
    """Interning table: equal frames share one small integer id.

    Frames of one function (its out-of-line body and each inlined copy: same module
    and name) form a group, numbered as groups first appear; the numbers never
    change, so tables kept per function while a profile grows stay valid."""

    __slots__ = ("_frames", "_function_ids", "_group_of", "_groups", "_ids", "_reps")

    def __init__(self, frames: Sequence[Frame] = ()) -> None:
        self._frames: list[Frame] = []
        self._ids: dict[Frame, int] = {}
        self._function_ids: list[int] | None = None  # cache of function_ids()
        self._groups: dict[tuple[str, str], int] = {}  # (module, function) -> group
        self._group_of: list[int] = []  # frame id -> its group
        self._reps: list[int] = []  # group -> the frame id standing for it
        for frame in frames:
            self.intern(frame)

    def intern(self, frame: Frame) -> int:
        """Return the id of `frame`, adding it if new."""
        frame_id = self._ids.get(frame)
        if frame_id is None:
            frame_id = len(self._frames)
            self._frames.append(frame)
            self._ids[frame] = frame_id
            key = (frame.module, frame.function)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = len(self._reps)
                self._reps.append(frame_id)
            elif self._frames[self._reps[group]].inlined and not frame.inlined:
                self._reps[group] = frame_id
                self._function_ids = None
            self._group_of.append(group)
        return frame_id

    def find(self, frame: Frame) -> int | None:
        return self._ids.get(frame)

    def function_ids(self) -> list[int]:
        """For each frame id, the id that stands for its function in per-function views.

        A function inlined somewhere and also compiled out of line is several
        frames (one per inlined copy, `inlined=True`, plus the real one); they
        are one function with one row in the flat profile, as perf and pprof
        show them.  Frames match by module and name; the out-of-line frame
        (which knows its address and definition) stands for the group.
        """
        cached = self._function_ids
        if cached is not None and len(cached) == len(self._frames):
            return cached
        reps = self._reps
        ids = [reps[g] for g in self._group_of]
        self._function_ids = ids
        return ids

    def group_of(self, frame_id: int) -> int:
        """The number of `frame_id`'s function group (stable as frames are added)."""
        return self._group_of[frame_id]

    def group_ids(self) -> list[int]:
        """frame id -> its group (`group_of` for each frame; read-only, grows with the
        table)."""
        return self._group_of

    def group_count(self) -> int:
        """How many function groups there are (groups are numbered 0..count-1)."""
        return len(self._reps)

    def representative(self, group: int) -> int:
        """The frame id standing for function group `group` (see `function_ids`)."""
        return self._reps[group]

    def __getitem__(self, frame_id: int) -> Frame:
        return self._frames[frame_id]

    def frames_of(self, frame_ids: Iterable[int]) -> tuple[Frame, ...]:
        """The frames of `frame_ids`, in order (a path, read at C speed)."""
        return tuple(map(self._frames.__getitem__, frame_ids))

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[Frame]:
        return iter(self._frames)


@dataclass
class Timeline:
    """Whole-process quantities sampled over time (heap live bytes, RSS...).

    `names` names the columns (e.g. "live_bytes", "rss_bytes"); `times` are
    seconds since the profile started; `values[i]` is the row at `times[i]`,
    index-aligned with `names`.  Collectors keep it bounded (they thin old rows).
    """

    names: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    values: list[list[float]] = field(default_factory=list)

    def append(self, t: float, row: Sequence[float]) -> None:
        self.times.append(t)
        self.values.append(list(row))

    def column(self, name: str) -> list[float]:
        """The values of column `name` (KeyError if absent)."""
        index = self.names.index(name) if name in self.names else -1
        if index < 0:
            raise KeyError(name)
        return [row[index] for row in self.values]


@dataclass(frozen=True, slots=True)
class LeakFrame:
    """One frame of a leaking allocation's stack, at the line it was at: the allocating
    call in the innermost frame, the call into the next frame in each caller (as
    valgrind's "at" and "by" lines give them; `Frame.line` is a definition's line)."""

    function: str
    module: str = ""
    file: str | None = None
    line: int | None = None
    inlined: bool = False


@dataclass(frozen=True)
class LeakStack:
    """What one allocation stack still held at exit: `leaked_bytes` in `blocks`, and
    its frames innermost first."""

    leaked_bytes: float
    blocks: float
    frames: tuple[LeakFrame, ...]


@dataclass
class FunctionCost:
    """Per-function aggregate: self and total per metric, exact calls or None."""

    self_cost: list[float]
    total_cost: list[float]
    calls: int | None = None


@dataclass
class ProfileMeta:
    """What was profiled and how.  Times are Unix seconds, periods nanoseconds."""

    mode: str  # "gprof", "instrument", "sampler", "attach" or "import"
    argv: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    threads: dict[int, str] = field(default_factory=dict)  # tid -> name
    period_ns: int | None = None  # sampling period (gprof: histogram bin time)
    clock: str = ""  # e.g. "perf task-clock", "CLOCK_MONOTONIC", "ITIMER_PROF"
    start_time: float | None = None
    end_time: float | None = None
    exit_status: int | None = None  # the target's exit code, when it exited
    exit_signal: int | None = None  # the signal that killed it, when one did
    complete: bool = True  # False while live, or after SIGKILL mid-write
    dropped: int = 0  # records the runtime could not store (tables full)
    warnings: list[str] = field(default_factory=list)
    # what the collector's line costs mean when coarser than per instruction
    # (e.g. instrument: self time on each function's definition line); the source pane shows it
    lines_note: str = ""


@dataclass(repr=False)
class Profile:
    """One profile snapshot: the unit collectors push and views render.

    `tree` is the merged calling-context tree; `parts` holds the same kind of
    tree per process or thread ("pid 12", "pid 12 tid 13") when the collector
    knows them.  Cost lists are index-aligned with `metrics`.
    """

    meta: ProfileMeta
    metrics: tuple[Metric, ...]
    frames: FrameTable = field(default_factory=FrameTable)
    tree: CallTree = field(default=cast(CallTree, None))  # None given: an empty one
    parts: dict[str, CallTree] = field(default_factory=dict)
    arcs: dict[tuple[int, int], int] = field(default_factory=dict)
    # (source file, line) -> self cost per metric
    line_costs: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    # (module path, link-time address) -> self cost per metric
    address_costs: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    # (module path, link-time address) -> its function and source line (keys of address_costs)
    address_sites: dict[tuple[str, int], CodeSite] = field(default_factory=dict)
    # frame id -> collector-given aggregate (gprof); None means derive from tree
    functions: dict[int, FunctionCost] | None = None
    # source path -> file text embedded in a saved profile (storage.py), so the
    # source pane works on another machine; empty for live profiles
    sources: dict[str, str] = field(default_factory=dict)
    # whole-process quantities over time (heap collector); None when not recorded
    timeline: Timeline | None = None
    # the stacks that leaked, most bytes first, bounded (heap collector at exit); their
    # call sites, which the function-level tree merges, make the leak summary's lines
    leaks: list[LeakStack] = field(default_factory=list)
    # each stack's costs per time slice (model/slices.py: the timeline, time ranges);
    # None for profiles not built from timed stacks
    slices: Slices | None = None

    def __post_init__(self) -> None:
        if self.tree is None:
            self.tree = CallTree(len(self.metrics))

    def __repr__(self) -> str:
        # A summary: the dataclass's own repr would spell out every dict, and Textual
        # builds each worker's description from its arguments' reprs (160 ms on the
        # event loop for a 500,000-node profile, at every key that derives a tree).
        nodes = len(self.tree)
        return (f"<Profile {self.meta.mode} {len(self.frames)} frames, {nodes} nodes, "
                f"{len(self.parts)} parts>")

    def finalize(self) -> Profile:
        """Compute totals of the merged tree and every part; returns self."""
        self.tree.finalize()
        for part in self.parts.values():
            part.finalize()
        return self

    def metric_index(self, name: str) -> int:
        """Index of the metric called `name` in cost lists (KeyError if absent)."""
        for i, metric in enumerate(self.metrics):
            if metric.name == name:
                return i
        raise KeyError(name)

    def total(self, metric: int = 0) -> float:
        """Whole-profile cost for `metric` (the root's total)."""
        return self.tree.root.total_cost[metric] if self.metrics else 0.0
