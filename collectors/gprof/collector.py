"""gprof mode: run a `gcc -pg` program, read the gmon.out files it leaves, build a Profile.

glibc writes gmon.out only when the program exits normally, so this mode
shows the profile at the end of the run; while the target runs the profile
is empty and says so.  GMON_OUT_PREFIX sends every process's file (fork
gives several) into the private run directory as gmon.<pid>.
"""

from __future__ import annotations

import time
from pathlib import Path

from proftui.collectors.base import LaunchCollector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.gprof.analysis import (
    GprofResult,
    GprofSymbolTable,
    analyze,
    read_symbol_table,
)
from proftui.collectors.gprof.gmon import GmonData, GmonError, read_gmon
from proftui.collectors.gprof.tree import estimated_tree
from proftui.collectors.model.profile import (
    CPU_NS,
    Frame,
    FrameTable,
    FunctionCost,
    Profile,
    ProfileMeta,
)
from proftui.collectors.runtime.launch import LaunchedProcess, resolve_program
from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.symbolizer import Symbolizer

GMON_PREFIX = "gmon"
HIST_SLACK = 16  # bytes between etext and the histogram's rounded end
MCOUNT_REACH = 64  # bytes from a function's entry to its mcount call (prologue, CET)
TREE_NOTE = ("gprof records caller->callee call counts, not whole stacks: the call tree "
             "divides each function's time among its callers by their share of its calls")


class GprofCollector(LaunchCollector):
    """Profiles a program built with `gcc -pg` through glibc's own gmon.out."""

    mode = "gprof"

    def start(self) -> None:
        self.program = resolve_program(self.argv[0])
        self.table = read_symbol_table(self.program)
        self.start_time = time.time()
        self.process = LaunchedProcess(
            self.argv, run_dir=self.run_dir.path, output=self.options.output,
            env={"GMON_OUT_PREFIX": str(self.run_dir.path / GMON_PREFIX)})
        self._final: Profile | None = None

    def collect(self) -> Profile:
        exit_info = self.exit_info()
        if exit_info is None:
            return self._empty("gprof writes its profile when the program exits")
        if self._final is None:
            self._final = self._read_final()
        return self._final

    def _empty(self, note: str) -> Profile:
        meta = ProfileMeta(mode=self.mode, argv=list(self.argv),
                           pids=[self.pid] if self.pid else [], clock="ITIMER_PROF (glibc gmon)",
                           start_time=self.start_time, complete=False, warnings=[note])
        return Profile(meta=meta, metrics=(CPU_NS,)).finalize()

    def _read_final(self) -> Profile:
        exit_info = self.exit_info()
        assert exit_info is not None
        files = sorted(self.run_dir.path.glob(f"{GMON_PREFIX}.*"),
                       key=lambda p: _pid_of(p) or 0)
        if not files:
            if exit_info.signal is not None:
                why = f"it was {exit_info.describe()}"
            else:
                why = (f"it {exit_info.describe()} without running its exit handlers "
                       "(for example through _exit() or a crash handler)")
            error = ProftuiError(
                f"{self.argv[0]} wrote no gmon.out: {why}; glibc writes it only at a normal "
                "exit, so use the sampler mode (--mode sampler) for this program")
            error.exit_status = exit_info.shell_status() or 1
            raise error
        per_pid: dict[int, GmonData] = {}
        warnings: list[str] = []
        for path in files:
            try:
                data = read_gmon(path, self.table.pointer_size, self.table.little_endian)
            except GmonError as exc:
                if len(files) == 1:
                    raise
                warnings.append(str(exc))
                continue
            if not _fits(data, self.table):
                warnings.append(f"{path.name}: written by another program (exec'd child?), "
                                "skipped")
                continue
            per_pid[_pid_of(path) or len(per_pid)] = data
        if not per_pid:
            raise ProftuiError(f"no usable gmon.out among {len(files)} files: {warnings[0]}")
        profile = build_profile(per_pid, self.table, str(self.program), self.argv, warnings)
        profile.meta.start_time = self.start_time
        profile.meta.end_time = time.time()
        profile.meta.exit_status = exit_info.status
        profile.meta.exit_signal = exit_info.signal
        return profile


def build_profile(per_pid: dict[int, GmonData], table: GprofSymbolTable, module: str,
                  argv: list[str], warnings: list[str] | None = None) -> Profile:
    """The Profile of gmon.out data of one or more processes of `module`."""
    merged = GmonData()
    for data in per_pid.values():
        merged.merge(data)
    result = analyze(merged, table)
    period_ns = int(1e9 / result.prof_rate)
    symbolizer = Symbolizer()
    frames = FrameTable()
    frame_of: dict[int, int] = {}

    def frame_id(index: int) -> int:
        found = frame_of.get(index)
        if found is None:
            found = frames.intern(_frame(symbolizer, module, table, index))
            frame_of[index] = found
        return found

    meta = ProfileMeta(mode="gprof", argv=list(argv), pids=sorted(per_pid),
                       period_ns=period_ns, clock="ITIMER_PROF (glibc gmon)",
                       warnings=[*(warnings or []), TREE_NOTE])
    profile = Profile(meta=meta, metrics=(CPU_NS,), frames=frames)
    ns_per_tick = 1e9 / result.prof_rate
    profile.functions = {}
    for index in result.reported:
        own = result.self_ticks[index] * ns_per_tick
        total = own + result.child_ticks[index] * ns_per_tick
        # Like gprof's flat profile: calls from other functions; recursion is in the arcs.
        profile.functions[frame_id(index)] = FunctionCost([own], [total],
                                                          result.calls[index] or None)
    for (parent, child), count in result.arcs.items():
        profile.arcs[(frame_id(parent), frame_id(child))] = count
    profile.tree = estimated_tree(result, frame_id, ns_per_tick)
    if len(per_pid) > 1:
        for pid, data in per_pid.items():
            part = analyze(GmonData().merge(data), table)
            profile.parts[f"pid {pid}"] = estimated_tree(part, frame_id, ns_per_tick)
    _line_costs(profile, merged, symbolizer, module, ns_per_tick)
    symbolizer.flush()
    profile.meta.warnings.extend(w for w in symbolizer.warnings if w not in meta.warnings)
    return profile.finalize()


def _frame(symbolizer: Symbolizer, module: str, table: GprofSymbolTable, index: int) -> Frame:
    symbol = table.symbols[index]
    file = line = None
    build_id = ""
    try:
        symbols = symbolizer.module(module)
        build_id = symbols.build_id
        found = symbols.function_at(symbol.addr)
        if found is not None:
            file, line = symbols.definition(found)
    except ProftuiError:
        pass
    return Frame(function=demangle(symbol.name), module=module, file=file, line=line,
                 address=symbol.addr, raw_name=symbol.name, build_id=build_id)


def _line_costs(profile: Profile, data: GmonData, symbolizer: Symbolizer, module: str,
                ns_per_tick: float) -> None:
    """Per-line and per-address self time from histogram bins (bin start address)."""
    try:
        symbols = symbolizer.module(module)
    except ProftuiError:
        return
    for hist in data.histograms:
        width = (hist.high_pc - hist.low_pc) / len(hist.counts)
        for i, count in enumerate(hist.counts):
            if not count:
                continue
            address = hist.low_pc + int(i * width)
            cost = count * ns_per_tick
            slot = profile.address_costs.setdefault((module, address), [0.0])
            slot[0] += cost
            location = symbols.location(address)
            if location.file is not None and location.line is not None:
                line_slot = profile.line_costs.setdefault((location.file, location.line), [0.0])
                line_slot[0] += cost


def _pid_of(path: Path) -> int | None:
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def _fits(data: GmonData, table: GprofSymbolTable) -> bool:
    """Whether `data` was written by the program `table` describes.

    mcount records the callee's pc a few instructions into the function, so
    in the right binary nearly every arc lands just after a symbol's start.
    """
    if data.histograms and table.symbols:
        low = min(h.low_pc for h in data.histograms)
        high = max(h.high_pc for h in data.histograms)
        if not any(low <= s.addr < high for s in table.symbols):
            return False
        # glibc's histogram ends at etext rounded up to its 4-byte bins.
        if table.etext is not None and abs(high - table.etext) > HIST_SLACK:
            return False
    if not data.arcs:
        return True
    near_entry = 0
    for _, self_pc in data.arcs:
        index = table.lookup(self_pc)
        if index is not None and self_pc - table.symbols[index].addr < MCOUNT_REACH:
            near_entry += 1
    return near_entry >= 0.9 * len(data.arcs)


def gmon_result(path: Path, program: Path) -> GprofResult:
    """Analyze an existing gmon.out of `program` (tests and tools)."""
    table = read_symbol_table(program)
    data = read_gmon(path, table.pointer_size, table.little_endian)
    return analyze(data, table)


def load_gmon_file(path: Path, program: Path | None) -> Profile:
    """The Profile of a gmon.out a -pg program left earlier (`proftui report gmon.out`)."""
    if program is None:
        raise ProftuiError(f"{path}: a gprof profile; name the program that wrote it with "
                           "--binary PROG")
    # A path as given (Path drops "./", which would turn it into a PATH lookup).
    resolved = program.resolve() if program.is_file() else resolve_program(str(program))
    table = read_symbol_table(resolved)
    data = read_gmon(path, table.pointer_size, table.little_endian)
    if not _fits(data, table):
        raise ProftuiError(f"{path} was not written by {program} (its addresses do not match)")
    profile = build_profile({_pid_of(path) or 0: data}, table, str(resolved), [str(program)],
                            [f"imported from {path}"])
    profile.meta.pids = []
    return profile
