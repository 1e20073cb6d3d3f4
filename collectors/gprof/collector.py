"""gprof mode: run a `gcc -pg` program, read the gmon.out files it leaves, build a Profile.

glibc writes gmon.out only when the program exits normally, so this mode
shows the profile at the end of the run; while the target runs the profile
is empty and says so.  GMON_OUT_PREFIX sends every process's file (fork
gives several) into the private run directory as gmon.<pid>.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from proftui.collectors.base import CollectorOptions, LaunchCollector
from proftui.collectors.detect import inspect_binary
from proftui.collectors.errors import ProftuiError
from proftui.collectors.gprof.analysis import (
    UNIT,
    GprofResult,
    GprofSymbolTable,
    analyze,
    read_symbol_table,
)
from proftui.collectors.gprof.gmon import GmonData, GmonError, read_gmon
from proftui.collectors.gprof.notes import foreign_arcs_note, missing_gmon_message, no_ticks_note
from proftui.collectors.gprof.threads import threads_note
from proftui.collectors.gprof.tree import estimated_tree
from proftui.collectors.gprof.watch import TargetWatch
from proftui.collectors.model.lines import add_code_cost
from proftui.collectors.model.profile import (
    CPU_NS,
    CodeSite,
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
MAX_BIN_UNITS = 32  # units of one histogram bin looked up for its lines (bins are ~2 units)
MAX_PADDING = 64  # bytes between a function's end and the next one's start (alignment)
MCOUNT_REACH = 64  # bytes from a function's entry to its mcount call (prologue, CET)
OUTSIDE = "<outside any function>"  # histogram samples no symbol covers (gprof counts them)
CLONE_SUFFIX = re.compile(r"\.[a-z0-9_]+(?:\.\d+)*")  # .isra.0, .cold, .constprop.1, .123
TREE_NOTE = ("gprof records caller->callee call counts, not whole stacks: the call tree "
             "divides each function's time among its callers by their share of its calls; "
             "mutually recursive functions (a cycle) are one unit, each entry into it "
             "shows every member once")


class GprofCollector(LaunchCollector):
    """Profiles a program built with `gcc -pg` through glibc's own gmon.out."""

    mode = "gprof"
    _watch: TargetWatch | None = None  # set by start(); polled until the target ends

    @classmethod
    def refuse(cls, program: str, options: CollectorOptions) -> None:
        """A program not built with -pg writes no gmon.out."""
        if inspect_binary(resolve_program(program)).mode != "gprof":
            raise ProftuiError(
                f"{program} was not built with -pg, so it writes no gmon.out; rebuild with "
                "`gcc -pg`, or drop --mode to sample instead")

    def start(self) -> None:
        self.program = resolve_program(self.argv[0])
        self.table = read_symbol_table(self.program)
        self.start_time = time.time()
        self.process = LaunchedProcess(
            self.argv, run_dir=self.run_dir.path, output=self.options.output,
            env={"GMON_OUT_PREFIX": str(self.run_dir.path / GMON_PREFIX)})
        self._watch = TargetWatch(self.process.pid, self.program)
        self._final: Profile | None = None

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        super().stop()

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
        most_threads = 1
        watch = self._watch
        if watch is not None:
            watch.stop()
            most_threads = watch.most_threads
        files = sorted(self.run_dir.path.glob(f"{GMON_PREFIX}.*"),
                       key=lambda p: _pid_of(p) or 0)
        if not files:
            # The target's status is passed on unchanged: the line says the profile is lost.
            raise ProftuiError(missing_gmon_message(self.argv[0], exit_info, watch,
                                                    self.run_dir.path),
                               exit_info.shell_status())
        per_pid: dict[int, GmonData] = {}
        warnings: list[str] = []
        note = threads_note(self.program, most_threads)
        if note is not None:
            warnings.append(note)
        for path in files:
            try:
                data = read_gmon(path, self.table.pointer_size, self.table.little_endian)
            except GmonError as exc:
                if len(files) == 1:
                    exc.exit_status = exit_info.shell_status()  # the target's, unchanged
                    raise
                warnings.append(str(exc))
                continue
            if not _fits(data, self.table):
                warnings.append(f"{path.name}: written by another program (exec'd child?), "
                                "skipped")
                continue
            per_pid[_pid_of(path) or len(per_pid)] = data
        if not per_pid:
            raise ProftuiError(f"no usable gmon.out among {len(files)} files: {warnings[-1]}",
                               exit_info.shell_status())
        for data in per_pid.values():
            for extra in (foreign_arcs_note(data, self.table, str(self.program), watch),
                          no_ticks_note(data, watch)):
                if extra is not None and extra not in warnings:
                    warnings.append(extra)
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
    def outside_id() -> int:
        return frames.intern(Frame(function=OUTSIDE, module=module))

    profile.tree = estimated_tree(result, frame_id, ns_per_tick, outside_id)
    if len(per_pid) > 1:
        for pid, data in per_pid.items():
            part = analyze(GmonData().merge(data), table)
            profile.parts[f"pid {pid}"] = estimated_tree(part, frame_id, ns_per_tick,
                                                         outside_id)
    _line_costs(profile, merged, symbolizer, module, ns_per_tick, table)
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
    return Frame(function=display_name(symbol.name), module=module, file=file, line=line,
                 address=symbol.addr, raw_name=symbol.name, build_id=build_id)


def display_name(raw: str) -> str:
    """A symbol as c++filt shows it, C compiler clones included: `hot.constprop.0` ->
    `hot [clone .constprop.0]` (c++filt leaves C names untouched)."""
    if raw.startswith("_Z"):
        return demangle(raw)
    base, dot, rest = raw.partition(".")
    if not dot or not base:
        return raw
    suffixes = CLONE_SUFFIX.findall("." + rest)
    if "".join(suffixes) != "." + rest:
        return raw
    return base + "".join(f" [clone {suffix}]" for suffix in suffixes)


def _line_costs(profile: Profile, data: GmonData, symbolizer: Symbolizer, module: str,
                ns_per_tick: float, table: GprofSymbolTable) -> None:
    """Per-address and per-line self time from histogram bins, recorded in the model
    (collectors/model/lines.py).

    Credited exactly as `gprof -l` does (and as `analyze` credits functions): a bin
    spans whole UNITs; each unit's share `count / scale` goes to the line holding the
    unit's last byte.  A run of units on one line is recorded at its first looked-up
    byte, with that byte's function and innermost line.  A byte of the padding after a
    function (no symbol's size covers it) is that function's, as in gprof's flat profile
    (symbols end where the next begins) and `gprof -l` (the line table's last row runs
    on): a bin straddling the padding and the next function's entry splits its ticks so.
    """
    for hist in data.histograms:
        lowpc = hist.low_pc // UNIT
        scale = ((hist.high_pc - hist.low_pc) // UNIT) / len(hist.counts)
        for i, count in enumerate(hist.counts):
            if not count:
                continue
            bin_low = lowpc + int(scale * i)
            bin_high = min(lowpc + int(scale * (i + 1)), bin_low + MAX_BIN_UNITS)
            runs: list[list] = []  # [address, site, units]
            for unit in range(bin_low, bin_high):
                address = unit * UNIT + UNIT - 1
                site = _site(symbolizer, module, address, table)
                if runs and runs[-1][1] == site:
                    runs[-1][2] += 1
                else:
                    runs.append([address, site, 1])
            for address, site, units in runs:
                add_code_cost(profile, module, address, site,
                              [count * units / scale * ns_per_tick])


def _site(symbolizer: Symbolizer, module: str, address: int,
          table: GprofSymbolTable) -> CodeSite:
    """The function start and innermost source line of link-time `address` (in padding
    after a function: that function's last line, see `_line_costs`)."""
    site = _symbolized_site(symbolizer, module, address)
    index = table.lookup(address) if site.function is None and site.line is None else None
    if index is not None:
        owner = table.symbols[index].addr
        for before in range(address - 1, max(owner, address - MAX_PADDING) - 1, -1):
            prior = _symbolized_site(symbolizer, module, before)
            if prior.function is not None:
                return prior if prior.function == owner else site
    return site


def _symbolized_site(symbolizer: Symbolizer, module: str, address: int) -> CodeSite:
    function = symbolizer.frames(module, address)[0]
    location = symbolizer.location(module, address)
    start = function.address if function.raw_name and not function.inlined else None
    return CodeSite(start, location.file, location.line)


def _pid_of(path: Path) -> int | None:
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def _fits(data: GmonData, table: GprofSymbolTable) -> bool:
    """Whether `data` was written by the program `table` describes.

    mcount records the callee's pc a few instructions into the function, so
    in the right binary nearly every arc lands just after a symbol's start.
    That needs every function in the table: with compiler clones (`.isra.0`,
    `.constprop.0`, common in -O2 C++) folded into their neighbours, arcs into
    them landed far from any start and a program's own gmon.out was refused.
    """
    if data.histograms and table.symbols:
        low = min(h.low_pc for h in data.histograms)
        high = max(h.high_pc for h in data.histograms)
        if not any(low <= s.addr < high for s in table.symbols):
            return False
        # glibc's histogram ends at etext rounded up to its 4-byte bins.
        if table.etext is not None and abs(high - table.etext) > HIST_SLACK:
            return False
    # Arcs into code outside the histogram (a dlopen'ed -pg plugin: glibc's mcount checks
    # only the caller's pc) say nothing about which program wrote the file.
    own = [pc for _, pc in data.arcs
           if not data.histograms or any(h.low_pc <= pc < h.high_pc for h in data.histograms)]
    if not own:
        return True
    near_entry = 0
    for self_pc in own:
        index = table.lookup(self_pc)
        if index is not None and self_pc - table.symbols[index].addr < MCOUNT_REACH:
            near_entry += 1
    return near_entry >= 0.9 * len(own)


def gmon_result(path: Path, program: Path) -> GprofResult:
    """Analyze an existing gmon.out of `program`.  Test seam (tests and benchmarks)."""
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
    notes = [threads_note(resolved, 1), foreign_arcs_note(data, table, str(resolved), None)]
    profile = build_profile({_pid_of(path) or 0: data}, table, str(resolved), [str(program)],
                            [f"imported from {path}", *(n for n in notes if n)])
    profile.meta.pids = []
    return profile
