"""Attach mode (`proftui --pid N`): drive the out-of-process sampler proftui-attach.

The helper (csrc/attach/proftui_attach.c) samples every thread of a running process
with perf_event or, where that is denied, ptrace, unwinds each sample itself
(the C runtimes' one CFI unwinder, csrc/common/pt_unwind.c) and streams stacks
of runtime addresses over a pipe (docs/attach-stream.md).
The helper aggregates them (each distinct stack announced once, then counts
of the stacks that moved every tenth of a second); a reader thread keeps
those counts by (tid, stack) and, while the target lives
(/proc/PID/root and map_files go with it), symbolizes each new stack once and
adds it to the live profile (stacktable/builder.py); `collect()` applies the
counts of the stacks that moved since the last one.  Detaching = closing the
helper's stdin (or a byte on it); if proftui dies the helper sees EOF /
PR_SET_PDEATHSIG and detaches too.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from typing import Any, ClassVar

from proftui.collectors.attach import checks as attach_checks
from proftui.collectors.attach import notes as attach_notes
from proftui.collectors.attach.stacks import stack_key
from proftui.collectors.base import Collector, CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CPU_NS, SAMPLES, Frame, Profile, ProfileMeta
from proftui.collectors.runtime.helper import Helper, wait_for_stop
from proftui.collectors.runtime.launch import ExitInfo
from proftui.collectors.runtime.tasks import live_task
from proftui.collectors.runtime.wire_attach import (
    COUNTS_INTERVAL_S,
    FLAG_KERNEL_TIME,
    LOST_TABLE,
    SAMPLE_DEPTH,
    SAMPLE_NO_STACK,
    SAMPLE_TRUNCATED,
    Buffers,
    Counts,
    End,
    Lost,
    MapsChanged,
    Message,
    Record,
    Stack,
    StreamDecoder,
    TargetExit,
    ThreadEvent,
)
from proftui.collectors.stacktable.builder import StackProfile
from proftui.collectors.symbols.perfmap import process_uid
from proftui.collectors.symbols.stacks import (
    StackFrames,
    make_symbolizer,
)

HEADER_TIMEOUT_S = 10.0  # attaching to thousands of threads takes a while
CLOCKS = {
    "perf": "perf_event task-clock",
    "ptrace": "ptrace interrupts, CPU time from /proc schedstat",
}


class AttachCollector(Collector):
    """Samples a running process it did not start; detaches on stop()."""

    mode: ClassVar[str] = "attach"
    options_honoured = frozenset({"frequency_hz", "buffer_bytes", "duration_s", "method", "pid"})

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        if self.options.pid is None:
            raise ProftuiError("attach mode needs a pid (--pid N)")
        self.target_pid: int = self.options.pid
        self._helper: Helper | None = None
        self._reader: threading.Thread | None = None
        self._decoder = StreamDecoder()
        # (tid, addresses innermost first) -> [samples, ns]; keys that moved since the
        # last collect() (their counts go into the live profile then)
        self._stacks: dict[tuple[int, tuple[int, ...]], list[float]] = {}
        self._moved: set[tuple[int, tuple[int, ...]]] = set()
        self._ids: dict[int, tuple[int, tuple[int, ...]]] = {}  # the helper's stack ids
        self._cut_ids: set[int] = set()  # of them, stacks without their outer frames
        self._unread_ids: set[int] = set()  # of those, stacks whose memory was unreadable
        # (Unix time, key, samples, ns) of each count since the last collect(): the timeline
        self._timed: list[tuple[float, tuple[int, tuple[int, ...]], int, int]] = []
        self._threads: dict[int, str] = {}
        self._warnings: list[str] = []
        self._lost = 0
        self._lost_table = 0  # of _lost: dropped because the helper's stack table was full
        self._buffers: Buffers | None = None  # the helper's ring and stream buffer sizes
        self._method = ""
        self._period_ns: int | None = None
        self._ended = threading.Event()  # helper finished (detached or target gone)
        self._target_exit: ExitInfo | None = None
        self._start_time: float | None = None
        self._end_time: float | None = None
        self._target_argv: list[str] = []
        self._maps_dirty = False
        self._stopped_note: str | None = None  # the target was stopped when attached
        self._header_flags = 0  # FLAG_* of the stream header
        self._space: Any = None  # collectors.maps.AddressSpace, imported lazily
        self._symbolizer: Any = None  # collectors.symbols.Symbolizer
        self._stackframes = StackFrames(None, None)  # addresses -> frames (stack_frames.py)
        self._sym_lock = threading.Lock()  # the symbolizer is not thread-safe
        # The aggregate and stream state, shared by the reader thread and collect().  Not
        # the base class's _lock, which snapshot() holds while it symbolizes and builds:
        # the reader must never wait that long (the helper drops what the pipe cannot take).
        self._data_lock = threading.RLock()
        self._samples = 0  # samples received (data_version)
        self._cut = 0  # of them, with their outer frames unknown (STACK_CUT, STACK_TOO_DEEP)
        self._unreadable = 0  # of those, whose stack memory was unreadable (STACK_UNREADABLE)
        self._maps_seen = 0  # MAPS records received (data_version)
        # the live profile: each (tid, addresses) stack added once (under _sym_lock)
        self._profile = StackProfile((SAMPLES, CPU_NS))

    @property
    def pid(self) -> int | None:
        return self.target_pid

    @property
    def owns_target(self) -> bool:
        return False

    def quit_question(self) -> str:
        return f"Detach from pid {self.target_pid} and quit?\nThe process keeps running."

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        from proftui.collectors.runtime.libraries import runtime_executable_path

        pid = self.target_pid
        attach_checks.check_target(pid)
        method = self.options.method or "auto"
        if method == "ptrace" and attach_checks.tracer_of(pid):
            raise ProftuiError(f"cannot attach to process {pid}: "
                               f"{attach_checks.ptrace_denied_reason(pid)}")
        # A leader that called pthread_exit shows no memory (empty maps and cmdline):
        # read them through a thread that runs on.
        self._target_argv = _cmdline(live_task(pid) or pid)
        # Read before attaching: a ptrace-stop of our own looks alike afterwards.
        self._stopped_note = attach_checks.stopped_note(pid)
        self._open_symbols()
        helper = runtime_executable_path("proftui-attach")
        hz = max(1, int(self.options.frequency_hz))
        argv = [helper, str(pid), str(hz), method]
        if self.options.buffer_bytes:  # --buffer: the perf rings' total size
            argv.append(str(int(self.options.buffer_bytes)))
        self._helper = Helper(argv, self._ended)
        self._start_time = time.time()
        try:
            self._read_until_attached(self._helper, method)
        except BaseException:
            self._helper.abort()
            raise
        self._reader = threading.Thread(target=self._read_loop, args=(self._helper,),
                                        name="proftui-attach-reader", daemon=True)
        self._reader.start()

    def _read_until_attached(self, helper: Helper, method: str) -> None:
        """Read the header and the first record; raise the real reason on failure."""
        assert helper.proc.stdout is not None
        fd = helper.proc.stdout.fileno()
        deadline = time.monotonic() + HEADER_TIMEOUT_S
        got_record = False
        while not got_record:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise ProftuiError(f"attaching to process {self.target_pid} timed out")
            data = os.read(fd, 65536)
            if not data:
                err = helper.reap() or helper.stderr()
                raise ProftuiError(attach_checks.explain_failure(self.target_pid, method, err))
            for record in self._decoder.feed(data):
                if isinstance(record, Message) and record.fatal:
                    raise ProftuiError(
                        attach_checks.explain_failure(self.target_pid, method, record.text))
                with self._data_lock:
                    self._handle(record)
                got_record = got_record or not isinstance(record, Message)
        header = self._decoder.header
        assert header is not None
        self._method = header.method
        self._period_ns = header.period_ns
        self._header_flags = header.flags
        self._warnings.insert(0, f"attached to running process {self.target_pid} "
                                 f"(method: {header.method}"
                                 f"{attach_notes.buffer_text(self._buffers)})")
        self._warnings.extend(attach_notes.buffer_warnings(self._buffers))
        self._warnings.extend(attach_notes.stream_warnings(header.method, header.flags))
        self._warnings.extend(attach_notes.clock_notes(header.method, header.flags))
        if self._stopped_note:
            self._warnings.append(self._stopped_note)

    def _read_loop(self, helper: Helper) -> None:
        """Reader thread: decode the helper's stream until it ends."""
        try:
            for data in helper.chunks():
                self._consume(data)
        except (OSError, ProftuiError) as exc:
            with self._data_lock:
                self._warnings.append(f"attach helper stream failed: {exc}")
        finally:
            err = helper.reap()
            with self._data_lock:
                if self._end_time is None:
                    self._end_time = time.time()
                if helper.proc.returncode not in (0, None):
                    self._warnings.append(f"attach helper ended with status "
                                          f"{helper.proc.returncode}: {err[-200:]}")
            self._ended.set()

    def _open_symbols(self) -> None:
        """The target's address space and symbolizer, its modules' symbols loaded."""
        self._space, self._symbolizer = make_symbolizer(
            live_task(self.target_pid) or self.target_pid)
        self._stackframes = StackFrames(self._space, self._symbolizer)
        pid = live_task(self.target_pid) or self.target_pid
        self._stackframes.watch_jit(pid, process_uid(pid))
        self._preload_symbols()

    def _preload_symbols(self) -> None:
        """Load every mapped module's symbols now, at attach time, rather than on
        the first samples, when the work would compete with the target for CPU."""
        for mapping in self._space.mappings:  # read from /proc/PID/maps by make_symbolizer
            with contextlib.suppress(ProftuiError, OSError, ValueError):
                self._frames_at(mapping.start, True)

    def _consume(self, data: bytes) -> None:
        """Decode, aggregate and symbolize what one read of the helper's pipe returned."""
        records = list(self._decoder.feed(data))
        with self._data_lock:
            for record in records:
                self._handle(record)
        self._symbolize_new(records)

    def _symbolize_new(self, records: list[Record]) -> None:
        """Symbolize new stacks (and add them to the profile) while the target lives:
        once it exits, /proc/PID/root and /proc/PID/map_files are gone with it."""
        with self._sym_lock:
            if any(isinstance(r, MapsChanged) for r in records) and self._space is not None:
                self._refresh_space()
            for record in records:
                if isinstance(record, Stack):
                    self._add_stack(stack_key(record.tid, record))

    def _add_stack(self, key: tuple[int, tuple[int, ...]]) -> int:
        """The live profile's index of stack `key`; caller holds _sym_lock."""
        found = self._profile.find(key)
        if found is not None:
            return found
        return self._profile.stack(key, f"pid {self.target_pid} tid {key[0]}",
                                   self._stackframes, key[1])

    def _handle(self, record: Record) -> None:
        """Fold one record into the aggregate; caller holds self._data_lock."""
        if isinstance(record, Counts):
            for sid, samples, weight_ns in record.counts:
                key = self._ids.get(sid)
                if key is None:
                    raise ProftuiError(f"attach helper stream: counts of unknown stack {sid}")
                self._cut += samples if sid in self._cut_ids else 0
                self._unreadable += samples if sid in self._unread_ids else 0
                counts = self._stacks.get(key)
                if counts is None:
                    self._stacks[key] = [float(samples), float(weight_ns)]
                else:
                    counts[0] += samples
                    counts[1] += weight_ns
                self._moved.add(key)
                self._samples += samples
                self._timed.append((record.time - COUNTS_INTERVAL_S / 2, key, samples,
                                    weight_ns))
        elif isinstance(record, Stack):
            self._ids[record.id] = stack_key(record.tid, record)
            if record.flags & (SAMPLE_TRUNCATED | SAMPLE_DEPTH):
                self._cut_ids.add(record.id)
            if record.flags & SAMPLE_TRUNCATED and record.flags & SAMPLE_NO_STACK:
                self._unread_ids.add(record.id)
        elif isinstance(record, ThreadEvent):
            if record.comm:
                self._threads[record.tid] = record.comm
            else:
                self._threads.setdefault(record.tid, "")
        elif isinstance(record, MapsChanged):
            self._maps_dirty = True
            self._maps_seen += 1
        elif isinstance(record, Lost):
            self._lost += record.count
            if record.where == LOST_TABLE:
                self._lost_table += record.count
        elif isinstance(record, Buffers):
            self._buffers = record
        elif isinstance(record, TargetExit):
            self._target_exit = ExitInfo(record.status, record.signal)
            how = ("" if record.status is None and record.signal is None
                   else f" ({self._target_exit.describe()})")
            self._warnings.append(f"target exited{how} while attached; profile kept")
        elif isinstance(record, Message):
            self._warnings.append(record.text)
        elif isinstance(record, End):
            self._end_time = time.time()

    def exit_info(self) -> ExitInfo | None:
        """None while the target runs; its exit (status when ptrace saw it) afterwards."""
        with self._data_lock:
            return self._target_exit

    def is_running(self) -> bool:
        return self._helper is not None and not self._ended.is_set()

    def wait(self) -> Profile:
        """Sample until --duration passes, the target exits, Ctrl-C or SIGTERM; detach."""
        def on_signal(signum: int) -> None:  # SIGTERM, SIGHUP: detach, keep the profile
            self.stop_signal = self.stop_signal or signum

        wait_for_stop(self._ended, self.options.duration_s, on_signal,
                      self.applying_drained())
        self.detach()
        return self.snapshot()

    def detach(self) -> None:
        """Ask the helper to detach and wait for its last record (idempotent)."""
        if self._helper is not None:
            self._helper.stop()

    def stop(self) -> None:
        self.detach()

    # -- profile -------------------------------------------------------------------

    def data_version(self) -> tuple[object, ...]:
        """Changes whenever the next `collect()` could differ (Collector.data_version)."""
        with self._data_lock:
            return (self._resets, self._samples, self._lost, len(self._warnings),
                    len(self._threads), self._maps_seen, self._ended.is_set())

    def stack_tables(self) -> list[StackProfile]:
        return [self._profile]

    def tables_held(self) -> threading.Lock:
        """The reader thread adds new stacks to the table under this lock."""
        return self._sym_lock

    def apply_drained(self) -> None:
        with self._lock:
            with self._data_lock:
                moved, timed, maps_dirty = self._take_drained()
            with self._sym_lock:
                self._apply(moved, timed, maps_dirty, defer_totals=True)

    def collect(self) -> Profile:
        with self._data_lock:
            moved, timed, maps_dirty = self._take_drained()
            running = self.is_running()
            ended = self._target_exit  # ptrace reaps the target's status; perf cannot
            meta = ProfileMeta(
                mode="attach", argv=list(self._target_argv), pids=[self.target_pid],
                threads=dict(self._threads), period_ns=self._period_ns,
                clock=CLOCKS.get(self._method, self._method) + (
                    "" if self._header_flags & FLAG_KERNEL_TIME else ", user time only"),
                start_time=self._start_time,
                end_time=None if running else self._end_time, complete=not running,
                exit_status=ended.status if ended is not None else None,
                exit_signal=ended.signal if ended is not None else None,
                dropped=self._lost, warnings=list(self._warnings),
            )
            meta.warnings.extend(self._rate_warnings())
            meta.warnings.extend(self._lost_warnings())
            meta.warnings.extend(attach_notes.cut_warnings(self._cut, self._samples,
                                                           self._unreadable))
        with self._sym_lock:
            self._apply(moved, timed, maps_dirty)
            profile = self._profile.snapshot(meta)
            profile.meta.warnings.extend(w for w in self._symbol_warnings()
                                         if w not in profile.meta.warnings)
            return profile

    def _take_drained(self) -> tuple[list[tuple[Any, list[float]]], list[Any], bool]:
        """Stacks whose counts moved, timeline steps and whether mappings changed, since
        the last call (caller holds _data_lock)."""
        moved = [(key, list(self._stacks[key])) for key in self._moved]
        self._moved = set()
        timed, self._timed = self._timed, []
        maps_dirty, self._maps_dirty = self._maps_dirty, False
        return moved, timed, maps_dirty

    def _apply(self, moved: list[tuple[Any, list[float]]], timed: list[Any],
               maps_dirty: bool, defer_totals: bool = False) -> None:
        """Fold what `_take_drained` gave into the live profile (caller holds _sym_lock);
        `defer_totals`: leave the totals to the next snapshot."""
        if maps_dirty and self._space is not None:
            self._refresh_space()
            self._profile.resymbolize()
        self._profile.set_many([(self._add_stack(key), counts) for key, counts in moved],
                               defer_totals)
        origin = self._start_time or time.time()
        for when, key, samples, weight_ns in timed:
            self._profile.add_at(when, self._add_stack(key), (samples, weight_ns), origin)
        self._profile.close_slices(time.time())
        # Asked after the new stacks: a lookup of theirs may have read the names that
        # the earlier stacks with unknown addresses missed.
        if self._stackframes.jit_grew():
            self._profile.resymbolize()

    def _lost_warnings(self) -> list[str]:
        """Where dropped samples were lost and what helps; caller holds self._data_lock."""
        return attach_notes.lost_warnings(self._lost, self._lost_table, self._buffers)

    def _rate_warnings(self) -> list[str]:
        """The rate ptrace reached, when below the asked one; caller holds _data_lock."""
        samples = sum(c[0] for c in self._stacks.values())
        cpu_s = sum(c[1] for c in self._stacks.values()) / 1e9
        return attach_notes.rate_warnings(self._method, self._period_ns, self._header_flags,
                                          samples, cpu_s)

    def _refresh_space(self) -> None:
        """Re-read the maps through a live thread (the one used before may have
        ended, or the leader may have called pthread_exit); caller holds _sym_lock."""
        live = live_task(self.target_pid)
        if live is not None and live != self._space.pid:
            self._space.pid = live
            self._space.root = f"/proc/{live}/root"  # the zombie leader's root is gone too
        self._space.refresh()

    def _frames_at(self, address: int, leaf: bool) -> list[Frame]:
        return self._stackframes.frames_at(address, leaf)

    def _symbol_warnings(self) -> list[str]:
        return self._stackframes.warnings()


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]
