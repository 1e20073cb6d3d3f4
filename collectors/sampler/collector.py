"""Sampler mode (the default): LD_PRELOAD csrc/sampler/proftui_sampler into the target.

The runtime samples every thread on its own CPU clock (perf_event task-clock,
or POSIX CPU timers where perf is not allowed) and writes stacks of runtime
addresses into per-thread rings of a shared-memory file per process
(wire_sampler.py).  A drain thread empties the rings every DRAIN_INTERVAL_S
while the target runs, so they never fill; `collect()` symbolizes the
distinct addresses through the mappings the runtime logged (dlclose'd code
included) plus /proc/PID/maps, and builds the Profile.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CPU_NS, SAMPLES, WALL_NS, Profile, ProfileMeta
from proftui.collectors.preloaded import PreloadedCollector
from proftui.collectors.runtime.clock import MAX_FREQUENCY, describe_clock
from proftui.collectors.runtime.names import read_comm
from proftui.collectors.runtime.preload import Preload
from proftui.collectors.runtime.wire import FLAG_NO_SPACE, WireVersionError
from proftui.collectors.runtime.wire_sampler import (
    MAX_FRAMES,
    SMP_CFI,
    SREC_DEPTH,
    SREC_OFFSTACK,
    SREC_TRUNCATED,
    SamplerFile,
    loaded_segments,
)
from proftui.collectors.symbols.live import LiveStacks
from proftui.collectors.symbols.stacks import ImageSpaces
from proftui.collectors.symbols.symbolizer import Symbolizer

DRAIN_INTERVAL_S = 0.1
FILE_GLOB = "sampler.*.ptw"
STATIC_HINT = "use attach mode instead: start it, then run `proftui --pid PID`"


class SamplerCollector(PreloadedCollector[SamplerFile]):
    """Runs the target with the preloaded stack sampler and drains it live."""

    mode: ClassVar[str] = "sampler"
    poll_thread_name: ClassVar[str] = "proftui-sampler-drain"
    poll_interval_s: ClassVar[float] = DRAIN_INTERVAL_S
    file_glob: ClassVar[str] = FILE_GLOB

    def __init__(self, argv: list[str], options: CollectorOptions | None = None, *,
                 images: ImageSpaces | None = None,
                 sym_lock: threading.Lock | None = None) -> None:
        """`images` and `sym_lock`: address spaces (and the lock guarding them) shared
        with another collector reading the same run (--heap), so that one address
        gives one frame in both."""
        super().__init__(argv, options)
        # (file name, pid, tid, stack innermost first) -> [samples, ns]; one file is one
        # process image (a process that exec'd writes a new file), one address space.
        self._stacks: dict[tuple[str, int, int, tuple[int, ...]], list[float]] = {}
        self._threads: dict[tuple[int, int], str] = {}
        self._truncated = 0
        self._offstack = 0
        self._too_deep = 0
        self._total = 0
        # Locks, always taken in this order.  _lock (Collector's) is held by snapshot()
        # through collect(), symbolizing included, so the drain thread never takes it:
        # it only needs _files_lock (PreloadedCollector's; here it also guards the
        # aggregate and pending mappings), never waits for symbols.
        self._sym_lock = sym_lock or threading.Lock()  # the symbolizer and address spaces
        self._pending_maps: list[tuple[str, int, list[Any]]] = []
        self._maps_seen = 0  # batches of mappings drained (data_version)
        self._images = images or ImageSpaces()  # file name -> its image's address space
        # The profile built incrementally from the stacks whose counts moved (symbols/live.py).
        self._live: LiveStacks[tuple[str, int, int, tuple[int, ...]]] = LiveStacks(
            (SAMPLES, WALL_NS if self.options.wall_clock else CPU_NS))

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
        if self._images.symbolizer is None:
            self._images.symbolizer = Symbolizer()
        self._start_time = time.time()
        return Preload("proftui_sampler", "the sampler", STATIC_HINT, env)

    # -- draining ------------------------------------------------------------------

    def poll(self) -> None:
        """Read new files, mappings and samples into the aggregate (thread-safe)."""
        with self._files_lock:
            self._open_new_files()
            for path, sfile in list(self._files.items()):
                pid, name = sfile.header.pid, sfile.path.name
                try:
                    maps = sfile.new_mappings()
                    samples = sfile.drain()
                except ProftuiError as exc:  # truncated under us: keep what was drained
                    self._warnings.append(f"{exc}; samples after this point are lost")
                    self._bad_files.add(path)
                    del self._files[path]
                    sfile.close()
                    continue
                if maps:  # applied by collect(), under _sym_lock
                    self._pending_maps.append((name, pid, maps))
                    self._maps_seen += 1
                period = sfile.header.period_ns
                for sample in samples:
                    key = (name, pid, sample.tid, sample.ips)
                    counts = self._stacks.get(key)
                    ns = float(sample.weight * period)
                    if counts is None:
                        self._stacks[key] = [1.0, ns]
                    else:
                        counts[0] += 1.0
                        counts[1] += ns
                    self._live.add(key, (1.0, ns))
                    self._total += 1
                    self._truncated += bool(sample.flags & SREC_TRUNCATED)
                    self._offstack += bool(sample.flags & SREC_OFFSTACK)
                    self._too_deep += bool(sample.flags & SREC_DEPTH)
                    if (pid, sample.tid) not in self._threads:
                        self._threads[(pid, sample.tid)] = _thread_name(pid, sample.tid)

    def open_reader(self, path: Path) -> SamplerFile:
        return SamplerFile(path)

    def salvage(self, path: Path, error: ProftuiError) -> SamplerFile | None:
        """The target overwrote the file's header: rebuild the layout from its size."""
        try:
            sfile = SamplerFile(path, salvage_period_ns=int(
                1e9 / min(self.options.frequency_hz, MAX_FREQUENCY)))
        except ProftuiError as exc:
            self._warnings.append(str(exc))
            return None
        self._warnings.append(
            f"{sfile.salvaged}: the target overwrote the file's header; its samples "
            "were salvaged with the layout rebuilt from the file's size (lost: the "
            "clock, signal and drop counts)")
        return sfile

    def opened_paused(self, reader: SamplerFile) -> None:
        reader.drain()  # everything it holds was recorded after pause()

    # -- profile -------------------------------------------------------------------

    def data_version(self) -> tuple[object, ...]:
        """Changes whenever the next `collect()` could differ (Collector.data_version):
        samples, mappings, files and warnings drained, or the target ended.  The drain
        thread keeps draining meanwhile, so this reads only its counters."""
        with self._files_lock:
            return (self._resets, self._total, self._maps_seen, len(self._files),
                    len(self._warnings), self._end_time is not None,
                    self.process is not None and self.process.poll() is not None)

    def collect(self) -> Profile:
        self.poll()
        with self._files_lock:
            meta = self._meta()
            pending, self._pending_maps = self._pending_maps, []
            if pending:  # frames may resolve differently now: fold every stack in again
                self._live.rebuild()
            whole, fresh = self._live.take()
            source = self._stacks if whole else fresh
            stacks = [(key, list(c)) for key, c in source.items()]
        with self._sym_lock:
            if meta.complete:  # the pids are gone (maybe reused): map logs only from now on
                self._images.forget_pids()
            for name, pid, maps in pending:
                self._images.add_loads(name, pid, loaded_segments(maps))
            profile = self._live.build(
                meta, ((f"pid {pid} tid {tid}", self._images.frames_for(name, pid), ips, costs)
                       for (name, pid, tid, ips), costs in stacks), whole)
            profile.meta.warnings.extend(w for w in self._images.warnings()
                                         if w not in profile.meta.warnings)
        return profile

    def _meta(self) -> ProfileMeta:
        """Metadata from the process and the runtime headers; caller holds _files_lock."""
        exit_info = self.process.poll() if self.process is not None else None
        running = exit_info is None
        warnings = list(self._warnings)
        dropped = 0
        period_ns: int | None = None
        clock = ""
        pids: list[int] = []
        sampled_ns = cpu_ns = 0
        no_space = False
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
                if not smp.sflags & SMP_CFI and os.environ.get("PROFTUI_SAMPLER_UNWIND") != "fp":
                    warnings.append("no DWARF CFI unwind tables were built (CFI unwinding is "
                                    "x86-64 only): stacks are walked through frame pointers")
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
        if no_space:
            warnings.append(f"the run directory's file system ({self.run_dir.path.parent}) is "
                            f"full or nearly full: the sampler's buffers were cut down and "
                            f"{dropped} samples could not be stored (dropped); point TMPDIR at "
                            "a file system with more space")
        if not running and not self._files:
            warnings.append(_no_file_warning(self.run_dir.path))
        if cpu_ns > 50_000_000 and sampled_ns < 0.5 * cpu_ns and not self.options.wall_clock:
            warnings.append(f"only {100 * sampled_ns / cpu_ns:.0f}% of the threads' CPU time was "
                            f"sampled (did the target block the sampling signal?)")
        if self._total and self._truncated > 0.1 * self._total:
            warnings.append(f"{100 * self._truncated / self._total:.0f}% of stacks were cut "
                            f"short (code without frame pointers or unwind tables)")
        if self._total and self._too_deep > 0.01 * self._total:
            warnings.append(f"{100 * self._too_deep / self._total:.0f}% of stacks were deeper "
                            f"than {MAX_FRAMES} frames: their outermost callers are cut off")
        if self._total and self._offstack > 0.01 * self._total:
            warnings.append(f"{100 * self._offstack / self._total:.0f}% of samples hit code "
                            f"running on another stack (sigaltstack, coroutines): pc only")
        threads = {tid: name for (_pid, tid), name in self._threads.items()}
        return ProfileMeta(
            mode="sampler", argv=list(self.argv), pids=sorted(pids) or (
                [self.process.pid] if self.process is not None else []),
            threads=threads, period_ns=period_ns, clock=clock, start_time=self._start_time,
            end_time=None if running else self._end_time,
            exit_status=None if exit_info is None else exit_info.status,
            exit_signal=None if exit_info is None else exit_info.signal,
            complete=not running, dropped=dropped, warnings=warnings,
        )


def _no_file_warning(run_dir: Path) -> str:
    """Why the target wrote no runtime file: a full run directory, or no preload."""
    with contextlib.suppress(OSError):
        st = os.statvfs(run_dir)
        if st.f_bavail * st.f_frsize < 1 << 20:
            return (f"the sampler could not create its file: the run directory's file system "
                    f"({run_dir.parent}) has {st.f_bavail * st.f_frsize >> 10} KiB free; the "
                    "target ran unprofiled (point TMPDIR at a file system with more space)")
    return ("the sampler did not start in the target (no runtime file): "
            "was LD_PRELOAD removed or the program static?")


def _thread_name(pid: int, tid: int) -> str:
    # Any bytes (prctl names need not be UTF-8): escaped once, here (runtime/names.py).
    return read_comm(f"/proc/{pid}/task/{tid}/comm") or ""
