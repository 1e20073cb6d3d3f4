"""Heap mode: LD_PRELOAD csrc/heap/proftui_heap into the target.

The runtime interposes the malloc family and C++ operator new/delete, interns
each allocating call stack as a bucket of a shared-memory file per process
(wire_heap.py) and keeps its counters there: bytes and blocks allocated, live,
freed, temporary, and what was live at the last whole-heap peak.  A poll
thread reads the whole-process live bytes and the RSS every POLL_INTERVAL_S
(the heap chart) and, every SLICE_S, what each bucket that moved allocated and
freed since (the timeline's slices: bytes and blocks allocated, live bytes
gained or lost, temporary allocations), which `apply_drained()` adds to the live profile
every second of a headless run; `collect()` reads every bucket,
symbolizes the stacks through the mappings the runtime logged (plus
/proc/PID/maps while it runs) and builds
a Profile with HEAP_METRICS, line and address costs included, so the source
pane shows which line allocated the bytes that are still live.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import ClassVar

from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import (
    HEAP_METRICS,
    Frame,
    LeakFrame,
    LeakStack,
    Profile,
    ProfileMeta,
    Timeline,
)
from proftui.collectors.model.units import format_bytes
from proftui.collectors.preloaded import PreloadedCollector
from proftui.collectors.runtime.preload import Preload
from proftui.collectors.runtime.wire import FLAG_NO_SPACE
from proftui.collectors.runtime.wire_heap import (
    BUCKET_DEPTH,
    BUCKET_TRUNCATED,
    HEAP_CFI,
    MAX_FRAMES,
    Bucket,
    HeapFile,
)
from proftui.collectors.runtime.wire_maplog import loaded_segments
from proftui.collectors.stacktable.builder import StackProfile
from proftui.collectors.symbols.stacks import StackFrames

POLL_INTERVAL_S = 0.1
SLICE_S = 0.25  # how often the buckets' changes are noted for the timeline (its slices)
MAX_TIMELINE_ROWS = 4000  # then every other old row is dropped
FILE_GLOB = "heap.*.ptw"
LEAK_NOTE = "leaks are blocks live at exit; reachability is not checked (valgrind does that)"
STATIC_HINT = "relink it dynamically, or use valgrind --tool=massif on it"
OVERFLOW_FRAME = Frame(function="[stack not recorded: bucket table full]")
MAX_LEAK_STACKS = 200  # the stacks that leaked most, with each call's line, kept per profile


class HeapCollector(PreloadedCollector[HeapFile]):
    """Runs the target with the preloaded heap profiler and reads its buckets live."""

    mode: ClassVar[str] = "heap"
    options_honoured = frozenset({"buffer_bytes", "follow_children", "heap_sample_bytes"})
    runtime_what = "the heap profiler"
    static_hint = STATIC_HINT
    poll_thread_name: ClassVar[str] = "proftui-heap-poll"
    poll_interval_s: ClassVar[float] = POLL_INTERVAL_S
    file_glob: ClassVar[str] = FILE_GLOB
    lost_note: ClassVar[str] = "its allocations are lost"
    runtime_name: ClassVar[str] = "the heap profiler"
    note_kind: ClassVar[str] = "heap"
    unwind_variable: ClassVar[str] = "PROFTUI_HEAP_UNWIND"

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        self._timeline = Timeline(names=["live_bytes", "rss_bytes"])  # under _files_lock
        # The live profile: each bucket's stack added once, its counters set (_sym_lock).
        self._profile = StackProfile(HEAP_METRICS)
        # The timeline (under _files_lock): each bucket's counters when last noted, and
        # (Unix time, key, change per metric) noted since the last collect().
        self._noted: dict[tuple[str, int], tuple[float, float, float, float]] = {}
        self._pending_slices: list[tuple[float, tuple[str, int], tuple[float, ...]]] = []
        self._noted_slice = 0  # slices of the run noted so far
        # Buckets with timeline entries since the last fold or collect (under
        # _files_lock): key -> (pid, return addresses), so apply_drained() can add the stacks
        # the live profile lacks.
        self._unbuilt: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}
        self._maps_folded = False  # apply_drained() applied new mappings: resymbolize (_sym_lock)

    # -- lifecycle -----------------------------------------------------------------

    def preload(self) -> Preload:
        """Check the options and say what to preload (the runtime and its environment)."""
        if not self.argv:
            raise ProftuiError("no program given")
        env = {
            "PROFTUI_FRONTEND_PID": str(os.getpid()),
            "PROFTUI_FOLLOW_CHILDREN": "1" if self.options.follow_children else "0",
        }
        sample = self.options.heap_sample_bytes
        if sample is not None:
            if sample < 1:
                raise ProftuiError(f"--heap-sample must be at least 1 byte (got {sample})")
            env["PROFTUI_HEAP_SAMPLE"] = str(int(sample))
        if self.options.buffer_bytes:
            env["PROFTUI_BUFFER_BYTES"] = str(max(int(self.options.buffer_bytes), 1 << 20))
        self.run_begins()
        return Preload("proftui_heap", self.runtime_what, STATIC_HINT, env)

    def poll(self) -> None:
        """Open new files and append one timeline row (thread-safe)."""
        with self._files_lock:
            self._open_new_files()
            live = 0.0
            rss = 0.0
            for sfile in list(self._files.values()):
                try:
                    header, heap = sfile.refresh()
                except ProftuiError:
                    continue
                live += heap.live_bytes
                if not header.exited:
                    rss += _rss_bytes(header.pid)
            if rss == 0.0 and self._timeline.values:
                # Every process exited (a zombie's statm reads 0): the chart keeps the
                # last RSS seen rather than drop to zero at the end.
                rss = self._timeline.values[-1][1]
            now = time.time()
            if self._start_time is not None:
                ended = int((now - self._start_time) / SLICE_S)  # slices wholly past
                if ended > self._noted_slice:  # the first poll past a slice's end notes it
                    self._noted_slice = ended
                    self._note_slices(self._start_time + (ended - 0.5) * SLICE_S)
            if self._start_time is not None and self._files:
                self._timeline.append(now - self._start_time, [live, rss])
                if len(self._timeline.times) > MAX_TIMELINE_ROWS:
                    keep = len(self._timeline.times) // 2
                    self._timeline.times[:keep] = self._timeline.times[:keep:2]
                    self._timeline.values[:keep] = self._timeline.values[:keep:2]

    def open_reader(self, path: Path) -> HeapFile:
        return HeapFile(path)

    def _note_slices(self, when: float) -> None:
        """Note, at Unix time `when`, what each bucket that moved since the last note
        allocated, freed and threw away (caller holds _files_lock).  Peak and leaked
        bytes are states, not events: a time range has none of its own."""
        noted, pending = self._noted, self._pending_slices
        for hfile in self._files.values():
            name = hfile.path.name
            try:
                moved = hfile.moved_buckets()
            except ProftuiError:
                continue  # collect() says what became of the file
            for b in moved:
                key = (name, b.index)
                now_counts = (b.alloc_bytes, b.allocs, b.live_bytes, b.temporary)
                before = noted.get(key, (0.0, 0.0, 0.0, 0.0))
                noted[key] = now_counts
                delta = [a - c for a, c in zip(now_counts, before, strict=True)]
                if any(delta):
                    # apply_drained() gives it a stack if it has none (a dict update: cheap)
                    self._unbuilt[key] = (hfile.header.pid, b.ips)
                    pending.append((when, key, (delta[0], delta[1], delta[2], 0.0, 0.0, 0.0,
                                               delta[3])))

    # -- profile -------------------------------------------------------------------

    def stack_tables(self) -> list[StackProfile]:
        return [self._profile]

    def apply_drained(self) -> None:
        """Add the stacks of buckets first noted and the timeline entries noted since
        the last fold or collect to the live profile: a long headless run keeps slices
        of stacks, not a list of raw entries that grows by every moving bucket four
        times a second.  Counters are set by `collect()`, from one read of every bucket."""
        with self._lock:
            with self._files_lock:
                maps = []
                for hfile in self._files.values():
                    try:
                        maps.append((hfile.path.name, hfile.header.pid, hfile.new_mappings()))
                    except ProftuiError:
                        continue  # collect() says what became of the file
                unbuilt, self._unbuilt = self._unbuilt, {}
                pending, self._pending_slices = self._pending_slices, []
            with self._sym_lock:
                for name, pid, entries in maps:
                    self._images.add_loads(name, pid, loaded_segments(entries))
                    self._maps_folded = self._maps_folded or bool(entries)
                self._add_stacks(unbuilt)
                self._add_slices(pending)

    def _add_stacks(self, unbuilt: dict[tuple[str, int], tuple[int, tuple[int, ...]]]) -> None:
        """Give each bucket of `unbuilt` its stack in the live profile (caller holds
        _sym_lock and has added the mappings its addresses need)."""
        for key, (pid, ips) in unbuilt.items():
            self._stack_index(key, pid, ips)

    def _stack_index(self, key: tuple[str, int], pid: int, ips: tuple[int, ...]) -> int:
        """The live profile's stack of bucket `key`, added if new (caller holds _sym_lock)."""
        built = self._profile
        index = built.find(key)
        if index is not None:
            return index
        if not ips:  # allocations whose stacks found no room
            return built.stack_of_frames(key, f"pid {pid}", [OVERFLOW_FRAME])
        # The innermost address is a return address into the allocating function:
        # one byte back is inside the call, on the calling line.
        return built.stack(key, f"pid {pid}", self._images.frames_for(key[0], pid), ips,
                           leaf_is_return=True)

    def _add_slices(self, pending: list[tuple[float, tuple[str, int], tuple[float, ...]]]
                    ) -> None:
        """Add timeline entries to the slices of their stacks (caller holds _sym_lock)."""
        built = self._profile
        origin = self._start_time or time.time()
        for when, key, delta in pending:
            index = built.find(key)
            if index is not None:  # else a bucket with nothing allocated nor live
                built.add_at(when, index, delta, origin)
        built.close_slices(time.time())

    def collect(self) -> Profile:
        with self._files_lock:
            self._open_new_files()
            files = list(self._files.values())
            snapshot: list[tuple[HeapFile, list[Bucket], list]] = []
            for hfile in files:
                try:
                    hfile.refresh()
                    snapshot.append((hfile, hfile.buckets(), hfile.new_mappings()))
                except ProftuiError as exc:
                    self._warnings.append(f"{exc}; allocations after this point are lost")
                    self._bad_files.add(hfile.path)
                    self._files.pop(hfile.path, None)
                    hfile.close()
            self._note_slices(time.time())  # the timeline holds everything counted so far
            unbuilt, self._unbuilt = self._unbuilt, {}
            pending, self._pending_slices = self._pending_slices, []
            meta = self._meta([h for h, _b, _m in snapshot])
            maps_seen = any(maps for _h, _b, maps in snapshot)
            timeline = Timeline(list(self._timeline.names), list(self._timeline.times),
                                [list(row) for row in self._timeline.values])
        total_allocs = cut_allocs = 0.0
        leaking: list[tuple[float, float, StackFrames, tuple[int, ...]]] = []
        with self._sym_lock:
            if meta.complete:  # the pids are gone (maybe reused): map logs only from now on
                self._images.forget_pids()
            built = self._profile
            for hfile, buckets, maps in snapshot:
                name, pid = hfile.path.name, hfile.header.pid
                self._images.add_loads(name, pid, loaded_segments(maps))
                frames = self._images.frames_for(name, pid)
                exited = hfile.header.exited
                for b in buckets:
                    if not b.allocs and not b.live_bytes:
                        continue
                    total_allocs += b.allocs
                    cut_allocs += b.allocs if b.flags & (BUCKET_TRUNCATED | BUCKET_DEPTH) else 0
                    leaked = b.live_bytes if exited else 0.0
                    leaks = b.live_blocks if exited else 0.0
                    if leaked > 0 and b.ips:
                        leaking.append((leaked, leaks, frames, tuple(b.ips)))
                    index = self._stack_index((name, b.index), pid, b.ips)
                    built.set(index, (b.alloc_bytes, b.allocs, b.live_bytes, b.peak_bytes,
                                      leaked, leaks, b.temporary))
            # Noted buckets the read above missed (published since) get their stacks too,
            # so none of their timeline entries is lost.
            self._add_stacks(unbuilt)
            self._add_slices(pending)
            if maps_seen or self._maps_folded:  # an unknown address may resolve now
                self._maps_folded = False
                built.resymbolize()
            profile = built.snapshot(meta)
            profile.timeline = timeline
            profile.leaks = _leak_stacks(leaking, profile.meta.warnings)
            profile.meta.warnings.extend(w for w in self._images.warnings()
                                         if w not in profile.meta.warnings)
        if total_allocs and cut_allocs > 0.1 * total_allocs:
            profile.meta.warnings.append(
                f"{100 * cut_allocs / total_allocs:.0f}% of allocations have a cut-short stack "
                f"(no unwind info, a signal frame, or deeper than {MAX_FRAMES} frames)")
        return profile

    def _meta(self, files: list[HeapFile]) -> ProfileMeta:
        """Metadata and warnings from the process and the runtime headers."""
        running = self.process is None or self.process.poll() is None
        warnings = list(self._warnings)
        pids: list[int] = []
        dropped = ptr_dropped = stack_dropped = untracked = 0
        no_space = sampled = False
        sample_bytes = 0
        alloc_total = 0.0
        not_exited: list[int] = []
        peak_short: list[str] = []
        no_cfi = False
        for hfile in files:
            header, heap = hfile.header, hfile.heap
            if header.pid not in pids:
                pids.append(header.pid)
            dropped += header.dropped
            ptr_dropped += heap.ptr_dropped
            stack_dropped += heap.stack_dropped
            untracked += heap.untracked_frees
            no_space = no_space or bool(header.flags & FLAG_NO_SPACE)
            no_cfi = no_cfi or not heap.hflags & HEAP_CFI
            if heap.sampled:
                sampled, sample_bytes = True, heap.sample_bytes
            if not running and not header.exited:
                not_exited.append(header.pid)
            if heap.peak_snapshot and heap.peak_bytes > heap.peak_snapshot:
                peak_short.append(f"pid {header.pid}: {format_bytes(heap.peak_bytes)} "
                                  f"(per-path column taken at {format_bytes(heap.peak_snapshot)})")
        warnings.append(LEAK_NOTE)
        if sampled:
            for hfile in files:
                alloc_total += sum(b.alloc_bytes for b in hfile.buckets())
            rel = math.sqrt(sample_bytes / alloc_total) if alloc_total else 1.0
            warnings.append(
                f"sampled heap profile (one sample per {format_bytes(sample_bytes)} on average, "
                f"Poisson on bytes): every figure is an unbiased estimate; a path that "
                f"allocated B bytes is off by about sqrt({format_bytes(sample_bytes)}/B) relative "
                f"(1 standard deviation; {100 * rel:.1f}% for the whole run); 'at peak' is "
                f"taken when the sampled estimate of live bytes peaked, and the largest of "
                f"many noisy estimates runs high: it overstates the true peak by up to a few "
                f"times sqrt({format_bytes(sample_bytes)} x peak)")
        if peak_short:
            warnings.append("the heap peak, and what each path held: the per-path peak_bytes "
                            "are copied each time the heap grows 1% past the last copy, so "
                            "they may fall short of the peak by up to 1%: "
                            + "; ".join(peak_short))
        if not_exited:
            warnings.append(f"pid {', '.join(map(str, not_exited))} did not exit normally (killed, "
                            "crashed or _exit): live bytes are shown, no leaks are counted")
        if ptr_dropped:
            warnings.append(f"{ptr_dropped} allocations were counted but not tracked as live "
                            "(the pointer table was full): raise --buffer")
        if stack_dropped:
            warnings.append(f"{stack_dropped} allocations' stacks did not fit (bucket table or "
                            f"frame pool full): they are counted under {OVERFLOW_FRAME.function}; "
                            "raise --buffer")
        if untracked:
            warnings.append(f"{untracked} frees of blocks allocated before profiling started "
                            "(or by a parent before fork) were ignored")
        warnings.extend(self.runtime_notes(len(files), no_space, no_cfi, "some stacks"))
        return self.meta("heap", pids, dropped, warnings,
                         clock="exact (every allocation)" if not sampled else
                         f"sampled, mean {format_bytes(sample_bytes)}",
                         lines_note="heap: bytes and blocks allocated by the calls on each line")


def _leak_stacks(leaking: list[tuple[float, float, StackFrames, tuple[int, ...]]],
                 warnings: list[str]) -> list[LeakStack]:
    """The stacks that leaked most (bytes, blocks, where they were and their addresses
    innermost first), each frame at the line of its call, as valgrind reports leaks."""
    leaking.sort(key=lambda leak: -leak[0])
    if len(leaking) > MAX_LEAK_STACKS:
        warnings.append(f"the leak summary details the {MAX_LEAK_STACKS} stacks that leaked "
                        f"most, of {len(leaking):,}")
    return [LeakStack(leaked, blocks, tuple(
        LeakFrame(frame.function, frame.module, file, line, frame.inlined)
        for frame, file, line in space.call_sites(ips, leaf_is_return=True)))
        for leaked, blocks, space, ips in leaking[:MAX_LEAK_STACKS]]


def _rss_bytes(pid: int) -> float:
    """Resident set size of `pid` from /proc (0 when gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return float(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        return 0.0
