"""Instrument mode: programs built with -finstrument-functions, exact calls and times.

The target runs with the hook runtime (csrc/hook/proftui_hook.c) preloaded; every
process it becomes or forks writes one shared-memory file into the run
directory (hook.<pid>[.<exec generation>].ptw, docs/wire-format.md).
`collect()` maps those files read-only, decodes what the runtime has
published so far (wire_hook.py) and builds the Profile (hook_profile.py):
one tree per thread, merged.  Pausing writes the control word the runtime
polls on every call.

Time, by default, is sampled: each thread's clock ticks its current calling
context (exact counts, unbiased CPU time per context, and calls still open are
timed live like the rest).  `--timed` takes two timestamps per call instead
(call durations, biased on short functions); `--count-only` counts only.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import ClassVar

from proftui.collectors.base import CollectorOptions, LaunchCollector
from proftui.collectors.detect import inspect_binary, refuse_foreign
from proftui.collectors.errors import ProftuiError
from proftui.collectors.instrument.hook_profile import (
    INSTRUMENTATION,
    HookSymbols,
    add_hook_data,
    calibration_error_ns,
    merge_parts,
    new_profile,
    short_call_warning,
)
from proftui.collectors.instrument.open_calls import OpenCallsUnreadable, open_self_ticks
from proftui.collectors.instrument.short_calls import short_functions_note
from proftui.collectors.model.calltree import gc_paused
from proftui.collectors.model.profile import Profile, ProfileMeta
from proftui.collectors.runtime.clock import MAX_FREQUENCY, describe_clock
from proftui.collectors.runtime.launch import LaunchedProcess, resolve_program
from proftui.collectors.runtime.libraries import runtime_library_path
from proftui.collectors.runtime.notes import read_notes
from proftui.collectors.runtime.thread_names import read_comm
from proftui.collectors.runtime.wire import (
    FLAG_COUNT_ONLY,
    FLAG_NO_SPACE,
    FLAG_WALL_CLOCK,
    RuntimeFile,
    WireVersionError,
)
from proftui.collectors.runtime.wire_hook import (
    HookData,
    calibrated,
    decode_hook,
    is_published,
    salvage_hook,
    sampled,
    timed,
)

DEFAULT_BUFFER_BYTES = 64 << 20  # the runtime's default (csrc/hook/pt_hook_file.c)
OPEN_CALLS_WATCH_S = 1.0  # record/--text: how often open calls are looked at (see wait)


def _ended(datas: list[HookData], i: int) -> bool:
    """Whether image `i` (datas sorted by pid, exec generation) is over: it exited
    cleanly, or its process exec'd the next one."""
    data = datas[i]
    return data.header.exited or (i + 1 < len(datas) and datas[i + 1].header.pid ==
                                  data.header.pid)


def _may_have_open_calls(datas: list[HookData], i: int) -> bool:
    """Whether image `i` can have calls open: timed and not over (an exec'd image's
    memory is someone else's)."""
    return not (datas[i].header.flags & FLAG_COUNT_ONLY or _ended(datas, i))


def _self_ticks(data: HookData) -> dict[int, int]:
    """Global node index -> self ticks of its finished calls."""
    return dict(zip(data.nodes.index, data.nodes.self_ticks, strict=True))


def hook_environment(options: CollectorOptions) -> dict[str, str]:
    """PROFTUI_* variables for the runtime; every key set so the caller's own
    environment cannot leak a stale choice into the target."""
    return {
        "PROFTUI_COUNT_ONLY": "1" if options.count_only else "0",
        "PROFTUI_TIMED": "1" if options.timed else "0",
        "PROFTUI_FREQUENCY": str(min(max(int(options.frequency_hz), 1), MAX_FREQUENCY)),
        "PROFTUI_WALL_CLOCK": "1" if options.wall_clock else "0",
        "PROFTUI_INCLUDE": "\n".join(options.include),
        "PROFTUI_EXCLUDE": "\n".join(options.exclude),
        "PROFTUI_MAX_DEPTH": str(options.max_depth or 0),
        "PROFTUI_BUFFER_BYTES": str(options.buffer_bytes or DEFAULT_BUFFER_BYTES),
    }


def check_instrumented(program: str) -> None:
    """ProftuiError unless `program` calls the -finstrument-functions hooks and is dynamic."""
    path = resolve_program(program)
    facts = inspect_binary(path)
    refuse_foreign(program, facts, "the hook library")
    if facts.static:
        raise ProftuiError(
            f"{program} is statically linked, so the hook library cannot be preloaded into "
            "it; link it dynamically, or use gprof mode (-pg)")
    if facts.mode != "instrument":
        raise ProftuiError(
            f"{program} was not built with -finstrument-functions (it never calls "
            "__cyg_profile_func_enter), so instrument mode would see no calls; rebuild with "
            "`gcc -finstrument-functions`, or drop --mode to sample it instead")


class InstrumentCollector(LaunchCollector):
    """Launches an instrumented program with the hook runtime and reads its trees live."""

    mode: ClassVar[str] = "instrument"
    options_honoured = frozenset({"frequency_hz", "count_only", "timed", "include", "exclude",
                                  "max_depth", "buffer_bytes", "wall_clock"})

    @classmethod
    def refuse(cls, program: str, options: CollectorOptions) -> None:
        """A program that does not call the hooks or is static; clocks that exclude each
        other."""
        if options.timed and options.count_only:
            raise ProftuiError("--timed and --count-only exclude each other: --timed times "
                               "every call, --count-only reads no clock")
        if options.timed and options.wall_clock:
            raise ProftuiError("--timed already measures wall time per call; --wall samples "
                               "it (drop one)")
        check_instrumented(program)
    can_pause: ClassVar[bool] = True

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        self._files: dict[Path, RuntimeFile] = {}
        self._paused = False
        self._pauses = 0  # pause() calls (data_version)
        self._symbols: HookSymbols | None = None
        self._start_time: float | None = None
        self._end_time: float | None = None
        # (pid, exec generation) -> open calls' own ticks at the last live look, and the
        # self ticks their nodes had then: a process killed mid-call keeps those calls.
        self._last_open: dict[tuple[int, int], tuple[dict[int, float], dict[int, int]]] = {}
        self._open_kept: set[int] = set()  # pids whose final data uses _last_open
        self._open_unreadable = ""  # why open calls cannot be read, once it failed

    def start(self) -> None:
        if not self.argv:
            raise ProftuiError("no program given")
        check_instrumented(self.argv[0])
        library = runtime_library_path("proftui_hook")
        self._symbols = HookSymbols()
        self._start_time = time.time()
        self.process = LaunchedProcess(
            self.argv, run_dir=self.run_dir.path, env=hook_environment(self.options),
            preload=[library], output=self.options.output)

    # -- pause ---------------------------------------------------------------------

    def pause(self) -> None:
        self._set_paused(True)

    def resume(self) -> None:
        self._set_paused(False)

    def data_version(self) -> tuple[object, ...] | None:
        """While paused the hooks record nothing, so the files cannot change: a token
        that stays put until resume, reset, a new process file or the target's end.  While
        recording, None (the counters move in place; no cheap way to tell)."""
        if not self._paused:
            return None
        return (self._resets, self._pauses, len(self._files), self.exit_info() is None)

    def _set_paused(self, paused: bool) -> None:
        with self._lock:
            self._paused = paused
            self._pauses += paused
            self._scan_files()
            for file in self._files.values():
                file.set_paused(paused)

    # -- files -----------------------------------------------------------------------

    def _scan_files(self) -> None:
        """Map hook files that appeared since the last look (caller holds the lock)."""
        for path in sorted(self.run_dir.path.glob("hook.*.ptw")):
            if path in self._files:
                continue
            try:
                file = RuntimeFile(path)
            except ProftuiError:
                continue  # created but not sized yet: next time
            # Unpublished: still being created, unless the target has ended (then
            # its header may have been zeroed by the target: salvage_hook reads it).
            if not is_published(file) and self.exit_info() is None:
                file.close()
                continue
            if self._paused:
                file.set_paused(True)
            self._files[path] = file

    def _decode_all(self) -> tuple[list[HookData], list[str]]:
        """Every published file, in (pid, exec generation) order, and one warning per
        file that had to be salvaged (its header overwritten) or was lost."""
        datas: list[HookData] = []
        warnings: list[str] = []
        for path, file in self._files.items():
            try:
                datas.append(decode_hook(file, path.name))
                continue
            except WireVersionError:
                raise  # another proftui's runtime: reinstall, nothing to salvage
            except ProftuiError as exc:
                damage = str(exc)
            try:
                data, lost = salvage_hook(file, path.name)
            except ProftuiError as exc:
                warnings.append(f"{damage}; {exc}")
                continue
            if not data.nodes.index and not is_published(file):
                continue  # never finished being created (killed at start-up): no data
            datas.append(data)
            warnings.append(
                f"{damage}: the target overwrote the file's header; salvaged "
                f"{len(data.nodes.index)} call-tree nodes of {len(data.threads)} threads, "
                f"lost {lost}")
        datas.sort(key=lambda d: (d.header.pid, d.hook.generation))
        return datas, warnings

    # -- profile -------------------------------------------------------------------

    def collect(self) -> Profile:
        with self._lock:
            exit_info = self.exit_info()
            if exit_info is not None and self._end_time is None:
                self._end_time = time.time()
            self._scan_files()
            datas, damage = self._decode_all()
            assert self._symbols is not None or not datas
            timing = self._timing(datas)
            clock, clock_notes = self._clock(datas)
            meta = ProfileMeta(
                mode="instrument", argv=list(self.argv),
                pids=sorted({d.header.pid for d in datas}),
                period_ns=next((d.header.period_ns for d in datas if sampled(d)), 0),
                clock=clock, start_time=self._start_time,
                end_time=self._end_time,
                exit_status=exit_info.status if exit_info else None,
                exit_signal=exit_info.signal if exit_info else None,
                dropped=sum(d.header.dropped for d in datas),
            )
            profile = new_profile(meta, timing)
            with gc_paused():
                for i, data in enumerate(datas):
                    assert self._symbols is not None
                    open_ticks = (self._open_calls(data, running=exit_info is None)
                                  if _may_have_open_calls(datas, i) else None)
                    add_hook_data(profile, data, self._symbols, meta.threads, open_ticks)
                merge_parts(profile)
            self._refresh_thread_names(datas, meta.threads, running=exit_info is None)
            meta.complete, meta.warnings = self._completeness(datas, exit_info is None)
            meta.warnings[:0] = damage
            # A salvaged file lost its clock with its header (the damage warning says so).
            clock_wanted = not (self.options.count_only or self.options.timed or damage)
            meta.warnings += clock_notes + _timing_notes(profile, timing, datas, clock_wanted)
            if exit_info is not None and timing == "cpu" and self.process is not None:
                missed = _unsampled_cpu_note(profile, self.process.cpu_s)
                if missed:
                    meta.warnings.append(missed)
            short = (short_call_warning(profile, _calibration_error(datas))
                     if exit_info is not None and timing == "timed" else None)
            if short:  # at the end only: a live view's calls are still growing
                meta.warnings.append(short)
            if self._symbols is not None:
                meta.warnings.extend(w for w in self._symbols.warnings if w not in meta.warnings)
            return profile

    def wait(self) -> Profile:
        """Run to the end; meanwhile look at the open calls once a second (a live view
        does it on every refresh), so a target stopped by a signal keeps them."""
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch_open_calls, args=(stop,),
                                   name="proftui-open-calls", daemon=True)
        watcher.start()
        try:
            return super().wait()
        finally:
            stop.set()
            watcher.join()

    def _watch_open_calls(self, stop: threading.Event) -> None:
        while not stop.wait(OPEN_CALLS_WATCH_S):
            with self._lock:
                if self.exit_info() is not None:
                    return
                try:
                    self._scan_files()
                    datas, _ = self._decode_all()
                except (ProftuiError, OSError):
                    continue  # the final collect reports it
                for i, data in enumerate(datas):
                    if _may_have_open_calls(datas, i):
                        self._open_calls(data, running=True)

    def _open_calls(self, data: HookData, running: bool) -> dict[int, float] | None:
        """Own ticks of the process's calls still open: read now while it runs, else
        (killed, crashed, _exit) those of the last live look whose nodes have not
        finished a call since (that call may be the one that was open)."""
        key = (data.header.pid, data.hook.generation)
        if running:
            try:
                ticks = open_self_ticks(data)
            except OpenCallsUnreadable as exc:
                self._open_unreadable = str(exc)
                return None
            if ticks:  # empty: it just died, or nothing is open yet; keep what was seen
                self_now = _self_ticks(data)
                self._last_open[key] = (ticks, {node: self_now[node] for node in ticks})
            if ticks or Path(f"/proc/{data.header.pid}").exists():
                return ticks
        seen = self._last_open.get(key)  # gone: a forked child killed while main runs
        if seen is None:
            return None
        ticks, self_then = seen
        self_now = _self_ticks(data)
        kept = {node: t for node, t in ticks.items() if self_now.get(node) == self_then[node]}
        if kept:
            self._open_kept.add(data.header.pid)
        return kept

    def _timing(self, datas: list[HookData]) -> str:
        """How the files measure time: "cpu"/"wall" (sampled), "timed" or "count"
        (hook_profile.new_profile); the options decide until a file exists."""
        if not datas:
            if self.options.count_only:
                return "count"
            if self.options.timed:
                return "timed"
            return "wall" if self.options.wall_clock else "cpu"
        ticked = [d for d in datas if sampled(d)]
        if ticked:
            return "wall" if ticked[0].header.flags & FLAG_WALL_CLOCK else "cpu"
        return "timed" if all(timed(d) for d in datas) else "count"

    def _clock(self, datas: list[HookData]) -> tuple[str, list[str]]:
        """The clock line, and notes about the clock (the sampled clock's)."""
        if not datas:
            return "", []
        first = next((d for d in datas if sampled(d)), datas[0])
        if sampled(first):
            clock, notes = describe_clock(first.header.clock, first.header.period_ns,
                                          first.hook.timer_signal, first.hook.timer_flags,
                                          bool(first.header.flags & FLAG_WALL_CLOCK))
            return f"{clock}, sampled per calling context", notes
        if first.header.flags & FLAG_COUNT_ONLY:
            return "none (count only)", []
        if not calibrated(first):
            return (f"{first.header.clock} wall time, hook cost NOT compensated (calibration "
                    "failed: 0.0 ns measured)"), []
        inner = first.hook.overhead_inner * first.hook.ns_per_tick
        outer = first.hook.overhead_outer * first.hook.ns_per_tick
        return (f"{first.header.clock} wall time, hook cost compensated "
                f"({inner:.1f} ns inside, {outer:.1f} ns in caller per call)"), []

    def _completeness(self, datas: list[HookData], running: bool) -> tuple[bool, list[str]]:
        """Whether every process's data is final, and warnings about the run."""
        warnings: list[str] = []
        main_pid = self.pid
        complete = not running
        for i, data in enumerate(datas):
            if _ended(datas, i) or running:
                continue
            if data.header.pid in self._open_kept:
                open_calls = ("calls still open then are counted up to the last look at "
                              "them, under a second before it ended")
            else:
                open_calls = "calls still open when it ended are missing"
            if data.header.pid == main_pid:
                complete = False
                warnings.append(f"process {data.header.pid} did not exit cleanly: "
                                f"{open_calls} (data so far shown)")
            else:
                warnings.append(f"process {data.header.pid} ended without exit() (killed, "
                                f"crashed or _exit): {open_calls}")
        if self._open_unreadable:
            warnings.append(f"calls that have not returned are not counted yet: the target's "
                            f"memory cannot be read ({self._open_unreadable}; ptrace rules, "
                            "e.g. kernel.yama.ptrace_scope=3), so a call's time shows when it "
                            "returns")
        exit_info = self.exit_info()
        if exit_info is not None and exit_info.signal is not None:
            complete = False
        dropped = sum(d.header.dropped for d in datas)
        mapped = read_notes(self.run_dir.path, "hook", "the hook library")
        warnings.extend(note.text for note in mapped)
        unmapped = any(note.what in ("nodes", "shadow", "hash") for note in mapped)
        if any(d.header.flags & FLAG_NO_SPACE for d in datas):
            warnings.append(f"the run directory's file system ({self.run_dir.path.parent}) is "
                            f"full: {dropped} calls not recorded, the profile is partial; "
                            "point TMPDIR at a file system with more space")
        elif dropped and unmapped:
            warnings.append(f"{dropped} calls not recorded (the note above says what could "
                            "not be mapped)")
        elif dropped:
            budget = self.options.buffer_bytes or DEFAULT_BUFFER_BYTES
            warnings.append(f"{dropped} calls not recorded: the {budget >> 20} MiB per-process "
                            "buffer is full or the call depth exceeded the shadow stack")
        if not datas and not running and not any(note.what == "file" for note in mapped):
            warnings.append("no instrumented function was called (is the code built with "
                            "-finstrument-functions?)")
        if any(timed(d) and not calibrated(d) for d in datas):
            warnings.append("hook cost calibration failed (0.0 ns measured, e.g. the machine "
                            "was too busy at start-up): times are not compensated and include "
                            "the hooks' own cost, about 30-40 ns per call, so functions that "
                            "make many short calls look slower than they are")
        for data in datas:
            if data.hook.max_depth or data.hook.filter_ranges or self.options.include or \
                    self.options.exclude:
                warnings.append("filters/depth limit active: time of functions not recorded "
                                "counts as their caller's self time")
                break
        return complete, warnings

    def _refresh_thread_names(self, datas: list[HookData], threads: dict[int, str],
                              running: bool) -> None:
        """Prefer the live name (threads often name themselves after starting)."""
        if not running:
            return
        for data in datas:
            for thread in data.threads.values():
                comm = read_comm(f"/proc/{data.header.pid}/task/{thread.tid}/comm")
                if comm is not None:  # any bytes, escaped (runtime/thread_names.py)
                    threads[thread.tid] = comm

    def stop(self) -> None:
        with self._lock:
            for file in self._files.values():
                with contextlib.suppress(BufferError, ValueError):
                    file.close()
            self._files.clear()
        super().stop()


TIMED_NOTE = ("--timed: call durations from two clock reads per call, the hooks' own cost "
              "taken out by a calibrated average; self times of functions whose calls last "
              "tens of ns are biased by that average's error (as uftrace's are). The clock "
              "is wall time: time the thread was pre-empted or blocked counts in the call "
              "that was open; uninstrumented code (libc) has no row, its time is in its "
              "caller's self time. The default samples each calling context's CPU time "
              "instead, unbiased, and names the code a tick lands in")


def _calibration_error(datas: list[HookData]) -> float:
    """The per-call error of the hook cost taken out of timed calls (the first
    calibrated file's clock and calibration: the one the clock line describes)."""
    first = next((d for d in datas if calibrated(d)), None)
    if first is None:
        return calibration_error_ns("", 0.0)
    pair = (first.hook.overhead_inner + first.hook.overhead_outer) * first.hook.ns_per_tick
    return calibration_error_ns(first.header.clock, pair)


def _unsampled_cpu_note(profile: Profile, cpu_s: float | None) -> str | None:
    """A warning when the clock's ticks stand for under half the CPU time the target
    used (its rusage at exit): the target blocked or took over the sampling signal, so
    every time shown is too small."""
    if cpu_s is None or cpu_s < 0.05:
        return None
    sampled_s = profile.tree.root.total_cost[profile.metric_index("cpu_ns")] / 1e9
    if sampled_s >= 0.5 * cpu_s:
        return None
    return (f"only {100 * sampled_s / cpu_s:.0f}% of the target's {cpu_s:.2f} s of CPU time "
            "was sampled (did the target block the sampling signal?): the times shown are "
            "too small; the call counts are exact")


def _timing_notes(profile: Profile, timing: str, datas: list[HookData],
                  clock_wanted: bool) -> list[str]:
    """What the way time was measured means for this profile; `clock_wanted`: the
    run asked for sampled time."""
    if timing == "timed":
        return [TIMED_NOTE]
    if timing == "count":
        return ["no clock could tick in the target (perf_event and timer_create refused): "
                "calls are counted, time is not"] if clock_wanted and datas else []
    notes = []
    tree = profile.tree
    samples = tree.root.total_cost[0]
    own = profile.frames.find(INSTRUMENTATION)
    if samples and own is not None:
        share = 100.0 * sum(n.self_cost[0] for n in tree.nodes() if n.frame_id == own) / samples
        notes.append(f"calls exact, time sampled per calling context; the hook library's own "
                     f"code took {share:.1f}% of the samples, shown as [instrumentation] under "
                     "the call it ran for (shares are of the whole run, hooks included)")
        short = short_functions_note(profile, own)
        if short:
            notes.append(short)
    unplaced = sum(d.hook.ticks_unplaced for d in datas)
    if unplaced:
        notes.append(f"{unplaced} clock ticks found no valid calling context and were left out")
    return notes
