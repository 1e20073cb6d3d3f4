"""Sampler mode (the default): LD_PRELOAD csrc/sampler/proftui_sampler into the target.

The runtime samples every thread on its own CPU clock (perf_event task-clock,
or POSIX CPU timers where perf is not allowed) and counts each sample in the
stack table of a shared-memory file per process (wire_stacks.py): every
distinct (thread, stack) once, its counters incremented in place.  Per-thread
rings say which stack each sample hit and when.  A drain thread empties the
rings every DRAIN_INTERVAL_S (the count changes) and reads the stacks
published since; `collect()` symbolizes each new stack once, through the
mappings the runtime logged (dlclose'd code included) plus /proc/PID/maps, and
applies the changes to the live profile (stacktable/builder.py).  When a ring
overflowed, and once the target has ended, the counts are read back from the
table itself, which never loses a sample while it has room.
"""

from __future__ import annotations

import os
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CPU_NS, SAMPLES, WALL_NS, Profile, ProfileMeta
from proftui.collectors.preloaded import PreloadedCollector
from proftui.collectors.runtime.clock import MAX_FREQUENCY, describe_clock
from proftui.collectors.runtime.preload import Preload
from proftui.collectors.runtime.thread_names import read_comm
from proftui.collectors.runtime.wire import FLAG_NO_SPACE, WireVersionError
from proftui.collectors.runtime.wire_maplog import loaded_segments
from proftui.collectors.runtime.wire_sampler import (
    SMP_CFI,
    SREC_DEPTH,
    SREC_OFFSTACK,
    SREC_TRUNCATED,
    SREC_UNREADABLE,
    Records,
    SamplerFile,
)
from proftui.collectors.runtime.wire_stacks import MAX_FRAMES, STACK_NONE, RawStack
from proftui.collectors.stacktable.builder import StackProfile
from proftui.collectors.wording import count, verb

DRAIN_INTERVAL_S = 0.5  # a ring holds 16 s of one thread at 1 kHz: ample
TIMELINE_STEPS = 4  # sample times are kept to a quarter of a second (slices are wider)
FILE_GLOB = "sampler.*.ptw"
STATIC_HINT = "use attach mode instead: start it, then run `proftui --pid PID`"


@dataclass
class _Drained:
    """What the drain thread gathered between two folds (SamplerCollector's fields)."""

    maps: list[tuple[str, int, list[Any]]]
    stacks: list[tuple[str, int, RawStack]]
    counts: dict[tuple[str, int], tuple[int, int]]
    timed: dict[tuple[str, int, int], list[int]]


class SamplerCollector(PreloadedCollector[SamplerFile]):
    """Runs the target with the preloaded stack sampler and drains it live."""

    mode: ClassVar[str] = "sampler"
    options_honoured = frozenset({"frequency_hz", "buffer_bytes", "wall_clock",
                                  "follow_children"})
    runtime_what = "the sampler"
    static_hint = STATIC_HINT
    poll_thread_name: ClassVar[str] = "proftui-sampler-drain"
    poll_interval_s: ClassVar[float] = DRAIN_INTERVAL_S
    file_glob: ClassVar[str] = FILE_GLOB
    runtime_name: ClassVar[str] = "the sampler"
    note_kind: ClassVar[str] = "sampler"
    unwind_variable: ClassVar[str] = "PROFTUI_SAMPLER_UNWIND"

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        # Read by the drain thread, not yet applied (collect() applies them under
        # _sym_lock): stacks published per file (one file is one process image, one
        # address space), and the counts of the stacks that moved, as the table holds
        # them: (file name, stack id) -> (samples, periods).  Absolute counts, so
        # reading one twice never counts a sample twice.
        self._new_stacks: list[tuple[str, int, RawStack]] = []
        self._counts: dict[tuple[str, int], tuple[int, int]] = {}
        # the timeline: (file name, stack id, quarter second of the run) -> [samples,
        # periods], from the rings' record times
        self._timed: dict[tuple[str, int, int], list[int]] = {}
        self._clocks: dict[str, tuple[float, int]] = {}  # file -> (Unix s, its monotonic ns)
        self._ring_lost: dict[Path, int] = {}  # each file's ring overflows seen so far
        self._read_counts: dict[Path, array] = {}  # each file's stack samples as last read
        self._whole_read: set[Path] = set()  # files read whole after the target ended
        # counts a file opened while paused held when it was opened: never shown
        self._before_pause: dict[tuple[str, int], tuple[int, int]] = {}
        self._flags: dict[tuple[str, int], int] = {}  # stacks with SREC_* flags
        self._threads: dict[tuple[int, int], str] = {}
        self._truncated = 0
        self._unreadable = 0  # of those, cut at a stack page the program made unreadable
        self._offstack = 0
        self._too_deep = 0
        self._total = 0
        # Locks, always taken in this order: _lock, _files_lock, _sym_lock.  _lock
        # (Collector's) is held by snapshot() through collect(), symbolizing included, so
        # the drain thread never takes it: it only needs _files_lock (PreloadedCollector's;
        # here it also guards the aggregate and pending mappings), never waits for symbols.
        self._pending_maps: list[tuple[str, int, list[Any]]] = []
        self._maps_seen = 0  # batches of mappings drained (data_version)
        # The live profile: each stack added once, count changes applied (under _sym_lock).
        # --wall shows wall time first: a timer that fires while the thread waits for a
        # CPU (or in an uninterruptible call) delivers one signal for several periods, so
        # the sample count under-counts exactly that time; the ns metric adds the overruns.
        # (CPU clocks are read in the same order as ever: samples, then CPU time.)
        self._wall_first = self.options.wall_clock
        self._profile = StackProfile((WALL_NS, SAMPLES) if self._wall_first
                                     else (SAMPLES, CPU_NS))
        self._periods: dict[str, int] = {}  # file name -> its period, ns

    # -- lifecycle -----------------------------------------------------------------

    def preload(self) -> Preload:
        """Check the options and say what to preload (the runtime and its environment)."""
        if not self.argv:
            raise ProftuiError("no program given")
        hz = int(self.options.frequency_hz)
        if hz < 1:
            raise ProftuiError(f"frequency must be at least 1 Hz (got {hz})")
        if hz > MAX_FREQUENCY:
            self._warnings.append(f"frequency {hz} Hz is above the maximum; "
                                  f"sampling at {MAX_FREQUENCY} Hz")
            hz = MAX_FREQUENCY
        env = {
            "PROFTUI_FREQUENCY": str(hz),
            "PROFTUI_FRONTEND_PID": str(os.getpid()),
            "PROFTUI_WALL_CLOCK": "1" if self.options.wall_clock else "0",
            "PROFTUI_FOLLOW_CHILDREN": "1" if self.options.follow_children else "0",
        }
        if self.options.buffer_bytes:
            env["PROFTUI_BUFFER_BYTES"] = str(int(self.options.buffer_bytes))
        if self.options.wall_clock:
            self._warnings.append("wall-clock sampling: sleeping threads are sampled too, and "
                                  "the signal can cut sleeps short (EINTR) in the target")
        self.run_begins()
        return Preload("proftui_sampler", self.runtime_what, STATIC_HINT, env)

    # -- draining ------------------------------------------------------------------

    def poll(self) -> None:
        """Drain the rings, read new stacks, the counts of the stacks the rings name, and
        new mappings (thread-safe; no symbols here)."""
        with self._files_lock:
            self._open_new_files()
            ended = self.process is not None and self.process.poll() is not None
            for path, sfile in list(self._files.items()):
                name = sfile.path.name
                try:
                    maps = sfile.new_mappings()
                    records = sfile.drain()
                    stacks = sfile.new_stacks()  # after the rings: every id they name is here
                    if name not in self._clocks and not sfile.salvaged:
                        self._clocks[name] = (sfile.header.start_ns / 1e9,
                                              sfile.sampler.start_mono_ns)
                    lost = sfile.ring_lost()
                    whole = lost != self._ring_lost.get(path, 0) or (
                        ended and path not in self._whole_read)
                    for raw in stacks:  # before the records are counted: theirs may be new
                        if raw.flags:
                            self._flags[(name, raw.id)] = raw.flags
                    moved = self._moved(name, records, stacks)
                    if whole:  # a ring overflowed (stacks it named are unknown), or the end
                        self._ring_lost[path] = lost
                        if ended:
                            self._whole_read.add(path)
                        samples, periods = sfile.stacks.counts()
                        last = self._read_counts.setdefault(path, array("Q"))
                        last.frombytes(bytes(8 * max(0, len(samples) - len(last))))
                        counts = [(sid, n, p) for sid, (n, p, seen) in
                                  enumerate(zip(samples, periods, last, strict=False))
                                  if n != seen]
                    else:
                        counts = sfile.stacks.counts_of(sorted(moved))
                    self._note_read(path, counts)
                except ProftuiError as exc:  # truncated under us: keep what was drained
                    self._warnings.append(f"{exc}; samples after this point are lost")
                    self._bad_files.add(path)
                    del self._files[path]
                    sfile.close()
                    continue
                if maps:  # applied by collect(), under _sym_lock
                    self._pending_maps.append((name, sfile.header.pid, maps))
                    self._maps_seen += 1
                self._periods[name] = sfile.header.period_ns
                self._take_stacks(name, sfile.header.pid, stacks)
                for rec in records:  # gone from /proc by now: the runtime kept its name
                    if rec.name and (sfile.header.pid, rec.tid) in self._threads:
                        self._threads[(sfile.header.pid, rec.tid)] = rec.name
                before = self._before_pause
                for sid, n, p in counts:
                    skip = before.get((name, sid))
                    if skip is not None:
                        n, p = n - skip[0], p - skip[1]
                    self._counts[(name, sid)] = (n, p)

    def _note_read(self, path: Path, counts: list[tuple[int, int, int]]) -> None:
        """Remember each stack's sample count as read, so a whole-table read passes on
        only the stacks that changed (caller holds _files_lock)."""
        last = self._read_counts.setdefault(path, array("Q"))
        for sid, n, _p in counts:
            if sid >= len(last):
                last.frombytes(bytes(8 * (sid + 1 - len(last))))
            last[sid] = n

    def _moved(self, name: str, records: list[Records], stacks: list[RawStack]) -> set[int]:
        """Stack ids the ring records name (plus new stacks: a ring may have dropped the
        record of their first sample); counts the samples and their stack flags, and
        notes each in its quarter second of the run (the timeline)."""
        moved = {raw.id for raw in stacks}
        clock = self._clocks.get(name)
        timed = self._timed
        for rec in records:
            moved.update(rec.ids)
            self._total += len(rec.ids)
            if clock is not None:
                unix, mono = clock
                origin = self._start_time or unix
                offset = unix - origin - mono / 1e9
                for sid, weight, t in zip(rec.ids, rec.weights, rec.times, strict=True):
                    key = (name, sid, int((offset + t / 1e9) * TIMELINE_STEPS))
                    slot = timed.get(key)
                    if slot is None:
                        timed[key] = [1, weight]
                    else:
                        slot[0] += 1
                        slot[1] += weight
            for sid in rec.ids:
                flags = self._flags.get((name, sid))
                if flags:
                    self._truncated += bool(flags & SREC_TRUNCATED)
                    self._unreadable += bool(flags & SREC_UNREADABLE)
                    self._offstack += bool(flags & SREC_OFFSTACK)
                    self._too_deep += bool(flags & SREC_DEPTH)
        moved.discard(STACK_NONE)
        return moved

    def _take_stacks(self, name: str, pid: int, stacks: list[RawStack]) -> None:
        """Note newly published stacks (caller holds _files_lock)."""
        for raw in stacks:
            self._new_stacks.append((name, pid, raw))
            if (pid, raw.tid) not in self._threads:
                self._threads[(pid, raw.tid)] = _thread_name(pid, raw.tid)

    def open_reader(self, path: Path) -> SamplerFile:
        return SamplerFile(path)

    def salvage(self, path: Path, error: ProftuiError) -> SamplerFile | None:
        """The target overwrote the file's header: rebuild the layout from its size."""
        try:
            sfile = SamplerFile(path, salvage_period_ns=int(
                1e9 / min(self.options.frequency_hz, MAX_FREQUENCY)))
        except ProftuiError as exc:
            self._warnings.append(f"{exc}: the target overwrote its run file; {self.lost_note}")
            return None
        self._warnings.append(
            f"{sfile.salvaged}: the target overwrote the file's header; its samples "
            "were salvaged with the layout rebuilt from the file's size (lost: the "
            "clock, signal and drop counts)")
        return sfile

    def opened_paused(self, reader: SamplerFile) -> None:
        """What the file counted before it was paused happened after pause(): left out."""
        reader.drain()
        samples, periods = reader.stacks.counts()
        name = reader.path.name
        for sid, (n, p) in enumerate(zip(samples, periods, strict=True)):
            if n:
                self._before_pause[(name, sid)] = (n, p)

    # -- profile -------------------------------------------------------------------

    def data_version(self) -> tuple[object, ...]:
        """Changes whenever the next `collect()` could differ (Collector.data_version):
        samples, mappings, files and warnings drained, or the target ended.  The drain
        thread keeps draining meanwhile, so this reads only its counters."""
        with self._files_lock:
            return (self._resets, self._total, self._maps_seen, len(self._files),
                    len(self._warnings), len(self._whole_read), self._end_time is not None,
                    self.process is not None and self.process.poll() is not None)

    def stack_tables(self) -> list[StackProfile]:
        return [self._profile]

    def apply_drained(self) -> None:
        with self._lock:
            with self._files_lock:
                drained = self._take_drained()
            with self._sym_lock:
                self._apply(drained, defer_totals=True)

    def collect(self) -> Profile:
        # One more drain, besides the poll thread's: a snapshot holds everything the
        # handlers counted up to now (after pause(), all that came before it).
        self.poll()
        with self._files_lock:
            meta = self._meta()
            drained = self._take_drained()
        with self._sym_lock:
            if meta.complete:  # the pids are gone (maybe reused): map logs only from now on
                self._images.forget_pids()
            self._apply(drained)
            profile = self._profile.snapshot(meta)
            profile.meta.warnings.extend(w for w in self._images.warnings()
                                         if w not in profile.meta.warnings)
        return profile

    def _take_drained(self) -> _Drained:
        """What the drain thread gathered since the last call (caller holds _files_lock)."""
        drained = _Drained(self._pending_maps, self._new_stacks, self._counts, self._timed)
        self._pending_maps, self._new_stacks, self._counts, self._timed = [], [], {}, {}
        return drained

    def _apply(self, drained: _Drained, defer_totals: bool = False) -> None:
        """Fold drained mappings, stacks, counts and timeline steps into the live profile
        (caller holds _sym_lock); `defer_totals`: leave the totals to the next snapshot."""
        for name, pid, maps in drained.maps:
            self._images.add_loads(name, pid, loaded_segments(maps))
        built = self._profile
        for name, pid, raw in drained.stacks:
            built.stack((name, raw.id), f"pid {pid} tid {raw.tid}",
                        self._images.frames_for(name, pid), raw.ips)
        updates = []
        for key, (samples, periods) in drained.counts.items():
            index = built.find(key)
            if index is not None:  # else a corrupt entry (never published)
                updates.append((index, self._costs(samples,
                                                   periods * self._periods.get(key[0], 0))))
        built.set_many(updates, defer_totals)
        origin = self._start_time or time.time()
        for (name, sid, step), (samples, periods) in drained.timed.items():
            index = built.find((name, sid))
            if index is not None:
                built.add_at(origin + (step + 0.5) / TIMELINE_STEPS, index,
                             self._costs(samples, periods * self._periods.get(name, 0)), origin)
        built.close_slices(time.time())
        # An unknown address of an earlier stack may resolve now: new objects loaded, or
        # a JIT named more code in its perf map.
        named_more = self._images.jit_grew()  # asked every time: it answers once
        if drained.maps or named_more:
            built.resymbolize()

    def _costs(self, samples: float, ns: float) -> tuple[float, float]:
        """A stack's costs in the profile's metric order."""
        return (ns, samples) if self._wall_first else (samples, ns)

    def _meta(self) -> ProfileMeta:
        """Metadata from the process and the runtime headers; caller holds _files_lock."""
        warnings = list(self._warnings)
        dropped = 0
        period_ns: int | None = None
        clock = ""
        pids: list[int] = []
        sampled_ns = cpu_ns = 0
        no_space = no_cfi = False
        for sfile in self._files.values():
            try:
                header, smp = sfile.refresh()
            except WireVersionError as exc:
                warnings.append(str(exc))
                continue
            except ProftuiError as exc:
                # Overwritten since we opened it: keep its samples with the last good headers.
                sfile.salvaged = str(exc)
                header, smp = sfile.header, sfile.sampler
                self._warnings.append(
                    f"{exc}: the target overwrote the file's header; its samples were kept "
                    "with the headers read before (lost: later drop counts)")
                warnings.append(self._warnings[-1])
            if header.pid not in pids:
                pids.append(header.pid)
            dropped += header.dropped
            no_space = no_space or bool(header.flags & FLAG_NO_SPACE)
            period_ns = period_ns or header.period_ns
            if not clock:
                # Flags of a header the target overwrote (or read before they were all
                # set) say nothing about the unwind tables.
                no_cfi = not smp.sflags & SMP_CFI and not sfile.salvaged
                clock, notes = describe_clock(header.clock, header.period_ns, smp.signal,
                                              smp.sflags, self.options.wall_clock)
                warnings.extend(notes)
            if smp.threads_lost:
                warnings.append(f"pid {header.pid}: {smp.threads_lost} threads were not sampled "
                                f"(more than {smp.nslots} at once)")
            for slot in sfile.slots():
                if slot.cpu_ns:
                    sampled_ns += slot.samples * header.period_ns
                    cpu_ns += slot.cpu_ns
        warnings.extend(self.runtime_notes(len(self._files), no_space, no_cfi,
                                           f"{dropped} samples"))
        if dropped and not no_space:  # each drop named once, with its cause
            warnings.append(f"{count(dropped, 'sample')} {verb(dropped, 'was', 'were')} "
                            "dropped by the sampler runtime: its "
                            "stack table was full (--buffer MB raises the per-process budget)")
        if cpu_ns > 50_000_000 and sampled_ns < 0.5 * cpu_ns and not self.options.wall_clock:
            warnings.append(f"only {100 * sampled_ns / cpu_ns:.0f}% of the threads' CPU time was "
                            f"sampled (did the target block the sampling signal?)")
        if self._total and self._truncated - self._unreadable > 0.1 * self._total:
            warnings.append(f"{100 * (self._truncated - self._unreadable) / self._total:.0f}% "
                            f"of stacks were cut short (code without frame pointers or unwind "
                            f"tables)")
        if self._unreadable:
            warnings.append(f"{self._unreadable:,} of {self._total:,} samples "
                            f"({100 * self._unreadable / self._total:.1f}%) came without their "
                            f"whole stack: a page of it could not be read when the sample was "
                            f"taken (the program had protected it), so their outer frames are "
                            f"unknown and each starts at its innermost frame read")
        if self._total and self._too_deep > 0.01 * self._total:
            warnings.append(f"{100 * self._too_deep / self._total:.0f}% of stacks were deeper "
                            f"than {MAX_FRAMES} frames: their outermost callers are cut off")
        if self._total and self._offstack > 0.01 * self._total:
            warnings.append(f"{100 * self._offstack / self._total:.0f}% of samples hit code "
                            f"running on another stack (sigaltstack, coroutines): pc only")
        threads = {tid: name for (_pid, tid), name in self._threads.items()}
        return self.meta("sampler", pids, dropped, warnings, threads=threads,
                         period_ns=period_ns, clock=clock)




def _thread_name(pid: int, tid: int) -> str:
    # Any bytes (prctl names need not be UTF-8): escaped once, here (runtime/thread_names.py).
    return read_comm(f"/proc/{pid}/task/{tid}/comm") or ""
