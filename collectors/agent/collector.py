"""Agent mode (`proftui agent`): every process of the host, through proftui-attach's
system-wide method.

The helper (csrc/attach/pt_attach_system.c) opens one perf event per CPU, unwinds
each sample in its own process's address space and streams the attach stream
(docs/attach-stream.md) with two more records: PROCESS (an address space began,
its executable mappings changed, it ended) and TASK (the serial that names a thread
of it in the STACK records).  Here each address space is one `AgentProcess`: its
own `StackProfile` (when a pusher takes it; else the host profile, shared), its
mappings (from /proc while it runs and from the PROCESS records, so a process that
has exited is still symbolized through the host's files), and the labels it is
pushed under (program, build, pid, user).  A reader thread
decodes, aggregates and symbolizes each new stack at once, while the process most
likely still runs; `collect()` applies the counts that moved.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from array import array
from typing import Any, ClassVar

from proftui.collectors.agent import procinfo
from proftui.collectors.agent.host import HostProfile
from proftui.collectors.agent.process import (
    METRICS,
    AgentProcess,
    process_table,
    truncated_name_of,
    watch_jit,
)
from proftui.collectors.agent.tally import Tally
from proftui.collectors.attach import notes as attach_notes
from proftui.collectors.attach.stacks import stack_key
from proftui.collectors.base import Collector, CollectorOptions, SeriesPart
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Metric, Profile, ProfileMeta
from proftui.collectors.runtime.helper import Helper, wait_for_stop
from proftui.collectors.runtime.launch import ExitInfo
from proftui.collectors.runtime.wire_attach import (
    FLAG_KERNEL_TIME,
    LOST_TABLE,
    PROCESS_GONE,
    PROCESS_NEW,
    SAMPLE_DEPTH,
    SAMPLE_NO_STACK,
    SAMPLE_TRUNCATED,
    THREAD_NEW,
    Buffers,
    Counts,
    End,
    Forget,
    Lost,
    Message,
    ProcessEvent,
    Record,
    Stack,
    StreamDecoder,
    TaskEvent,
)
from proftui.collectors.symbols.maps import AddressSpace
from proftui.collectors.symbols.stacks import (
    StackFrames,
)

HEADER_TIMEOUT_S = 10.0
RELEASE_AFTER_S = 1.0  # a process's table is dropped this long after its end was pushed
CLOCK = "perf_event cpu-clock, every CPU"


class AgentCollector(Collector):
    """Samples every process of the host until stopped; one stack table per process
    (pushed), or one for every process (`-o`, `--all`)."""

    mode: ClassVar[str] = "agent"
    options_honoured = frozenset({"frequency_hz", "buffer_bytes", "duration_s"})

    def __init__(self, argv: list[str], options: CollectorOptions | None = None, *,
                 programs: tuple[str, ...] = (), users: tuple[str, ...] = (),
                 keep_profile: bool = True, pushed: bool = True, max_stacks: int = 0) -> None:
        """`keep_profile`: also keep every process together for `collect()` (-o); without
        it the agent holds only the processes alive (a push is the profile), and
        `collect()` gives its notes and counts, no stacks.  `pushed`: a pusher takes
        each process's own table (`take`); without one, and without a filter, every
        process's stacks go straight into the one profile `collect()` gives, none kept
        apart (folding per-process tables in cost as much as building them).
        `max_stacks`: without `keep_profile`, once the helper holds this many stacks, it
        and each process's table forget them (a long run's memory stays bounded; each
        push carries its interval's costs all the same); 0: never."""
        super().__init__(argv, options)
        self.keep_profile = keep_profile
        self.programs = frozenset(programs)
        self.users = frozenset(users)
        self._helper: Helper | None = None
        self._reader: threading.Thread | None = None
        self._decoder = StreamDecoder()
        self._processes: dict[int, AgentProcess] = {}  # pid -> its current address space
        self._all: dict[int, AgentProcess] = {}  # key -> every address space of the run
        self._tasks: dict[int, tuple[AgentProcess, int]] = {}  # serial -> (process, tid)
        self._ids: dict[int, tuple[AgentProcess, int]] = {}  # helper's id -> canonical
        # A canonical id is the helper's id plus the ids it gave before its last FORGET:
        # unique in the run, while the helper's own start at 0 again.
        self._id_base = 0
        self.max_stacks = max_stacks if not keep_profile else 0
        self._forget_asked = False
        self._cut_ids: set[int] = set()
        self._unread_ids: set[int] = set()
        self._next_key = 0
        self._warnings: list[str] = []
        self._tally = Tally()
        # What released processes' perf maps and jitdumps had wrong (their notes outlive
        # them: a run's notes name every file refused)
        self._jit_notes: dict[str, None] = {}
        self._buffers: Buffers | None = None
        self._period_ns: int | None = None
        self._header_flags = 0
        self._start_time: float | None = None
        self._end_time: float | None = None
        self._ended = threading.Event()
        # The aggregate, shared with the reader thread; then, when both are held, always
        # taken first: tables, symbolizers and the host profile (_sym_lock).
        self._data_lock = threading.RLock()
        self._sym_lock = threading.Lock()
        # One symbolizer per mount namespace: it knows files by path, and a path names
        # one file only within a namespace (containers).
        self._symbolizers: dict[object, Any] = {}
        self._host = HostProfile()  # every process together, for collect()
        # No table per process: the host profile is every process's table.
        self._shared = keep_profile and not pushed and not programs and not users
        self.reader_cpu_s = 0.0  # CPU time of the reader thread (decode, symbolize)

    @property
    def pid(self) -> int | None:
        return None

    @property
    def owns_target(self) -> bool:
        return False

    def quit_question(self) -> str:
        return "Stop sampling every process and quit?\nNo process is touched."

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        from proftui.collectors.runtime.libraries import runtime_executable_path

        hz = max(1, int(self.options.frequency_hz))
        self._helper = Helper([runtime_executable_path("proftui-attach"), "0", str(hz),
                               "system", str(int(self.options.buffer_bytes or 0)),
                               str(os.getpid())], self._ended)
        self._start_time = time.time()
        try:
            self._read_header(self._helper)
        except BaseException:
            self._helper.abort()
            raise
        self._reader = threading.Thread(target=self._read_loop, args=(self._helper,),
                                        name="proftui-agent-reader", daemon=True)
        self._reader.start()

    def _read_header(self, helper: Helper) -> None:
        """Read until the stream's first record; the helper's own line on failure."""
        assert helper.proc.stdout is not None
        fd = helper.proc.stdout.fileno()
        deadline = time.monotonic() + HEADER_TIMEOUT_S
        while self._decoder.header is None or self._buffers is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise ProftuiError("the agent's sampler did not start within "
                                   f"{HEADER_TIMEOUT_S:g} s")
            data = os.read(fd, 65536)
            if not data:
                err = helper.reap() or helper.stderr()
                raise ProftuiError(err.splitlines()[-1] if err else
                                   "the agent's sampler ended with status "
                                   f"{helper.proc.returncode}")
            self._consume(data)
        header = self._decoder.header
        self._period_ns = header.period_ns
        self._header_flags = header.flags
        self._warnings.extend(attach_notes.stream_warnings("system", header.flags))

    def _read_loop(self, helper: Helper) -> None:
        began = time.thread_time()
        try:
            for data in helper.chunks():
                self._consume(data)
        except (OSError, ProftuiError) as exc:
            with self._data_lock:
                self._warnings.append(f"agent sampler stream failed: {exc}")
        finally:
            self.reader_cpu_s = time.thread_time() - began
            err = helper.reap()
            with self._data_lock:
                if self._end_time is None:
                    self._end_time = time.time()
                if err or helper.proc.returncode not in (0, None):
                    self._warnings.append(f"agent sampler ended with status "
                                          f"{helper.proc.returncode}: {err[-200:]}")
            self._ended.set()

    def _consume(self, data: bytes) -> None:
        """Decode, aggregate and symbolize what one read of the helper's pipe returned."""
        records = list(self._decoder.feed(data))
        new: list[tuple[AgentProcess, int]] = []
        with self._data_lock:
            for record in records:
                added = self._handle(record)
                if added is not None:
                    new.append(added)
        with self._sym_lock:  # now, while the processes most likely still run
            for process, sid in new:
                process.index_of[sid] = self._table_index(process, sid)

    def _table_index(self, process: AgentProcess, sid: int) -> int:
        """The index of canonical stack `sid` in the process's table, symbolized and
        added on first sight (caller holds _sym_lock)."""
        key = process.keys[sid]
        return process.table.stack((process.key, key) if process.table is self._host.table else key,
                                   f"pid {process.pid} tid {key[0]}", process.frames, key[1])

    def _handle(self, record: Record) -> tuple[AgentProcess, int] | None:
        """Fold one record in (caller holds _data_lock); a new stack of a wanted process
        is returned (with its canonical id), to be symbolized outside the lock."""
        if isinstance(record, Counts):
            self._add_counts(record)
        elif isinstance(record, Stack):
            task = self._tasks.get(record.tid)
            if task is None:
                raise ProftuiError(f"agent sampler stream: stack of unknown task {record.tid}")
            process, tid = task
            key = stack_key(tid, record)
            canonical = self._id_base + record.id
            sid = process.sids.setdefault(key, canonical)
            self._ids[record.id] = (process, sid)
            if record.flags & (SAMPLE_TRUNCATED | SAMPLE_DEPTH):
                self._cut_ids.add(record.id)
            if record.flags & SAMPLE_TRUNCATED and record.flags & SAMPLE_NO_STACK:
                self._unread_ids.add(record.id)
            if sid == canonical:
                process.keys[sid] = key
                if process.wanted and not process.released:
                    return process, sid
        elif isinstance(record, TaskEvent):
            if record.flags & THREAD_NEW:
                owner = self._processes.get(record.pid)
                if owner is None or owner.gone:  # no PROCESS record (yet): see _fill_in
                    owner = self._new_process(record.pid, "", "", implicit=True)
                self._tasks[record.serial] = (owner, record.tid)
                owner.threads[record.tid] = record.comm
        elif isinstance(record, ProcessEvent):
            self._process_event(record)
        elif isinstance(record, Lost):
            self._tally.lost += record.count
            if record.where == LOST_TABLE:
                self._tally.lost_table += record.count
        elif isinstance(record, Buffers):
            self._buffers = record
        elif isinstance(record, Message):
            self._warnings.append(record.text)
        elif isinstance(record, End):
            self._end_time = time.time()
        elif isinstance(record, Forget):
            self._forgot(record)
        return None

    def _forgot(self, record: Forget) -> None:
        """The helper emptied its table: its ids start again (caller holds _data_lock).
        Each process's counts so far came before this; its table is renewed at the next
        take, once those are applied and pushed (`_renew_tables`)."""
        self._id_base += record.stacks
        self._ids.clear()
        self._cut_ids.clear()
        self._unread_ids.clear()
        for process in self._all.values():
            process.sids = {}
            process.renew = True
        self._forget_asked = False
        self._tally.forgets += 1

    def _add_counts(self, record: Counts) -> None:
        """The samples of one COUNTS record, added to their processes' counts (caller
        holds _data_lock).  Per entry: ints hashed only (a sampled program at 1 kHz
        sends thousands of entries a second)."""
        ids, cut_ids, unread_ids = self._ids, self._cut_ids, self._unread_ids
        sampled = self._tally.sampled
        taken = 0
        for helper_id, samples, weight_ns in record.counts:
            found = ids.get(helper_id)
            if found is None:
                raise ProftuiError(f"agent sampler stream: counts of unknown stack {helper_id}")
            process, sid = found
            if not process.wanted:
                self._tally.skipped += samples
                continue
            if process.released:  # counts that came after its end was pushed
                self._tally.late += samples
                continue
            if helper_id in cut_ids:
                self._tally.cut += samples
                if helper_id in unread_ids:
                    self._tally.unreadable += samples
            counts = process.counts.get(sid)
            if counts is None:
                process.counts[sid] = [float(samples), float(weight_ns)]
            else:
                counts[0] += samples
                counts[1] += weight_ns
            process.samples += samples
            taken += samples
            sampled.add(process.key)
        self._tally.samples += taken

    def _process_event(self, record: ProcessEvent) -> None:
        current = self._processes.get(record.pid)
        if record.flags & PROCESS_NEW and current is not None and current.implicit \
                and not current.gone:
            self._fill_in(current, record)
        elif record.flags & PROCESS_NEW:
            if current is not None:  # exec'd: what follows is another program
                current.gone, current.gone_at = True, time.monotonic()
            process = self._new_process(record.pid, record.exe, record.maps, record.mnt_ns)
            if current is not None and current.sids and current.wanted and process.wanted:
                self._tally.shared_pids.append((record.pid, current.program, process.program))
        elif record.flags & PROCESS_GONE:
            if current is not None:
                current.gone, current.gone_at = True, time.monotonic()
        elif current is not None:  # new mappings
            with self._sym_lock:
                current.space.add_maps(record.maps)

    def _fill_in(self, process: AgentProcess, record: ProcessEvent) -> None:
        """Late news of an address space first known from a TASK alone (the helper read
        its mappings only after its first samples: perf's records come per CPU, in no
        order between CPUs): its program, files and the filter's verdict, its stacks
        symbolized again (caller holds _data_lock)."""
        process.implicit = False
        process.exe = record.exe.removesuffix(" (deleted)") or process.exe
        process.read_build()
        with self._sym_lock:
            if record.mnt_ns and record.mnt_ns == procinfo.own_mount_namespace():
                process.space.root = "/"
            process.space.add_maps(record.maps)
            process.table.resymbolize()
        if not self._passes_filter(process):
            self._drop_samples(process)

    def _drop_samples(self, process: AgentProcess) -> None:
        """A process the filter turned out to leave out: its samples so far, counted in
        provisionally, are counted as skipped (caller holds _data_lock)."""
        process.wanted = False
        self._tally.samples -= process.samples
        self._tally.skipped += process.samples
        self._tally.sampled.discard(process.key)
        process.counts, process.samples = {}, 0

    def _passes_filter(self, process: AgentProcess) -> bool:
        return ((not self.programs or process.program in self.programs
                 or (truncated_name_of(process.comm, self.programs) and not process.exe))
                and (not self.users or process.user in self.users))

    def _new_process(self, pid: int, exe: str, maps: str, mnt_ns: int = 0,
                     implicit: bool = False) -> AgentProcess:
        """A new address space of `pid` (caller holds _data_lock).  Its files open
        through /proc/PID/root while it runs; when it shares our mount namespace, by
        their own paths too, so a process gone by now is still symbolized."""
        comm = ""
        if not exe:
            with contextlib.suppress(OSError):
                exe = os.readlink(f"/proc/{pid}/exe")
        if not exe:  # /proc/PID/exe needs ptrace access; comm is anyone's to read
            with contextlib.suppress(OSError), open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        uid = procinfo.uid_of(pid)
        user = procinfo.user_name(uid)
        ours = mnt_ns != 0 and mnt_ns == procinfo.own_mount_namespace()
        with self._sym_lock:
            space = AddressSpace(pid, root="/" if ours else f"/proc/{pid}/root")
            space.add_maps(maps)
            frames = StackFrames(space, self._symbolizer_of(mnt_ns, pid))
        process = AgentProcess(self._next_key, pid, exe.removesuffix(" (deleted)"), user,
                               True, space, frames, comm=comm, uid=uid)
        frames.watch_jit_on_miss(lambda: watch_jit(process))
        if self._shared and not implicit:  # else its stacks wait for its maps: folded in
            process.table = self._host.table
        process.implicit = implicit
        process.read_build()
        # Not known yet: kept until its PROCESS record says what it is (_fill_in).
        process.wanted = implicit or self._passes_filter(process)
        self._next_key += 1
        self._processes[pid] = process
        self._all[process.key] = process
        return process

    def _symbolizer_of(self, mnt_ns: int, pid: int) -> Any:
        """The symbolizer of mount namespace `mnt_ns` (one of its own for process `pid`
        when that is unknown: it was gone before the helper looked)."""
        from proftui.collectors.symbols.symbolizer import Symbolizer

        namespace: object = mnt_ns or ("pid", pid, self._next_key)
        found = self._symbolizers.get(namespace)
        if found is None:
            found = self._symbolizers[namespace] = Symbolizer()
        return found

    def exit_info(self) -> ExitInfo | None:
        return None

    def is_running(self) -> bool:
        return self._helper is not None and not self._ended.is_set()

    def wait(self) -> Profile:
        """Sample until --duration passes, Ctrl-C, SIGTERM or SIGHUP; then stop."""
        def on_signal(signum: int) -> None:
            self.stop_signal = self.stop_signal or signum

        wait_for_stop(self._ended, self.options.duration_s, on_signal)
        self.stop()
        return self.snapshot()

    def stop(self) -> None:
        """Ask the helper to stop and wait for its last record (idempotent)."""
        if self._helper is not None:
            self._helper.stop()

    def end(self, signum: int) -> str:
        return "the agent stopped sampling; no process was touched"

    # -- profiles ----------------------------------------------------------------------

    def data_version(self) -> tuple[object, ...]:
        with self._data_lock:
            return (self._tally.samples, self._tally.lost, len(self._warnings), len(self._all),
                    self._ended.is_set())

    def apply_pending(self) -> list[AgentProcess]:
        """Put the counts that moved into each process's table; every wanted process
        of the run is returned (the pusher takes each one's changes)."""
        with self._data_lock:
            moved = []
            for process in self._all.values():
                if process.counts:
                    moved.append((process, process.counts))
                    process.counts = {}
            # One known from a TASK alone waits for its PROCESS record (its labels); once
            # gone without one it is a process of unknown program: pushed as that, unless
            # a filter asks for programs or users (it cannot be shown to pass).
            for p in self._all.values():
                if p.implicit and p.gone and p.wanted and (self.programs or self.users):
                    self._drop_samples(p)
            wanted = [p for p in self._all.values() if p.wanted and (p.gone or not p.implicit)]
        with self._sym_lock:
            for process, updates in moved:
                table = process.table
                # Counts since the last apply, added to the table's (two ids may name one
                # stack: before and after a FORGET).
                indices, samples, weights = array("q"), array("d"), array("d")
                index_of = process.index_of
                for sid, (count, weight) in updates.items():
                    index = index_of.get(sid)
                    if index is None:  # its STACK came in the same read: symbolize now
                        index = index_of[sid] = self._table_index(process, sid)
                    indices.append(index)
                    samples.append(count)
                    weights.append(weight)
                table.add_columns(indices, [samples, weights], defer_totals=True)
                if self.keep_profile and table is not self._host.table:
                    process.unfolded.update(indices)
            self._resymbolize_jit(wanted)
        return wanted

    def _resymbolize_jit(self, processes: list[AgentProcess]) -> None:
        """Stacks through generated code whose perf map or jitdump has grown since are
        symbolized again: in the process's table, and in the host profile that holds
        copies of them (caller holds _sym_lock)."""
        tables = {}
        for process in processes:
            if process.frames.jit is not None and not process.released \
                    and process.frames.jit_grew():
                tables[id(process.table)] = process.table
                if self.keep_profile:
                    tables[id(self._host.table)] = self._host.table
        for table in tables.values():
            table.resymbolize()

    def series_parts(self) -> AgentCollector:
        return self

    def series_metrics(self) -> tuple[Metric, ...]:
        return METRICS

    def take(self) -> list[AgentProcess]:
        """SeriesParts: the counts applied; every wanted process not yet released.  A
        table the helper forgot is renewed first (its costs were pushed); when the helper
        holds `max_stacks`, it is asked to forget them."""
        self._renew_tables()
        processes = self.apply_pending()
        with self._data_lock:
            if (self.max_stacks and not self._forget_asked and self._helper is not None
                    and len(self._ids) >= self.max_stacks):
                self._forget_asked = self._helper.forget()
        return processes

    def _renew_tables(self) -> None:
        """Each process whose stacks the helper forgot, and whose table's costs were all
        taken, starts a new table: the old one's memory goes (its stacks come again, as
        new, when next sampled)."""
        with self._data_lock, self._sym_lock:
            for process in self._all.values():
                if not process.renew or process.table is self._host.table \
                        or process.table.has_changes():
                    continue
                process.renew = False
                process.table = process_table()
                process.index_of = {}
                # The stacks of ids given since the FORGET, and of counts not applied yet.
                live = set(process.sids.values()).union(process.counts)
                process.keys = {sid: process.keys[sid] for sid in live}

    def tables_held(self) -> threading.Lock:
        """SeriesParts: the lock under which tables change (symbolizing, applying)."""
        return self._sym_lock

    def release(self, part: SeriesPart) -> bool:
        """SeriesParts: forget a process that is gone and whose last changes were taken
        (a long run's memory follows the processes alive, not every one it saw); its
        costs stay in the host profile.  Held back a second after its end, for counts
        the helper had not sent yet."""
        with self._data_lock:
            process = self._all.get(part.key)
            if (self._shared or process is None or not process.gone or process.counts
                    or time.monotonic() - process.gone_at < RELEASE_AFTER_S):
                return False
            with self._sym_lock:
                # Costs applied since the pusher took its rows (a snapshot's collect()
                # in between) are still to be pushed: not yet.
                if process.table.has_changes():
                    return False
                if self.keep_profile:
                    self._host.name_threads(process)
                    self._host.fold([process])
            self._host.release(process)
            if process.wanted and process.frames.jit is not None:
                self._jit_notes.update(dict.fromkeys(process.frames.jit.warnings()))
            process.released = True
            del self._all[process.key]
            process.table = process_table()
            process.counts, process.index_of, process.sids, process.keys = {}, {}, {}, {}
            return True

    def dropped(self) -> int:
        """SeriesParts: samples lost in the rings or the helper's table, and samples of
        processes already pushed for the last time."""
        with self._data_lock:
            return self._tally.lost + self._tally.late

    def collect(self) -> Profile:
        """Every process together, one part per thread ("pid P tid T"); the picker merges
        a process's threads, named by its program."""
        processes = self.apply_pending()
        if self.keep_profile:
            with self._sym_lock:
                for process in processes:
                    self._host.name_threads(process)
                self._host.fold([p for p in processes if p.table is not self._host.table])
        # Never _data_lock inside _sym_lock: the reader takes them the other way round.
        with self._data_lock:
            running = self.is_running()
            meta = ProfileMeta(
                mode="agent", argv=["every process"], pids=[p.pid for p in processes],
                period_ns=self._period_ns,
                clock=CLOCK + ("" if self._header_flags & FLAG_KERNEL_TIME
                               else ", user time only"),
                start_time=self._start_time, end_time=None if running else self._end_time,
                complete=not running, dropped=self._tally.lost, warnings=list(self._warnings))
            meta.warnings.extend(self._notes())
        with self._sym_lock:
            return self._host.snapshot(meta)

    def _notes(self) -> list[str]:
        """What the profile does not hold, said (caller holds _data_lock)."""
        symbols = list(dict.fromkeys(
            [w for s in list(self._symbolizers.values()) for w in s.warnings]
            + list(self._jit_notes)
            + [w for p in list(self._all.values()) if p.wanted and p.frames.jit is not None
               for w in p.frames.jit.warnings()]))
        return self._tally.notes(self._buffers, symbols, keep_profile=self.keep_profile,
                                 filter_names=sorted(self.programs | self.users),
                                 max_stacks=self.max_stacks)

    def failure(self) -> str:
        """Why the sampling helper ended on its own ("" when it was stopped, or runs)."""
        helper = self._helper
        if helper is None or helper.proc.returncode in (0, None):
            return ""
        code = helper.proc.returncode
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def counted(self) -> tuple[int, int]:
        """(processes, samples) the run took, of the processes the filter keeps."""
        with self._data_lock:
            return len(self._tally.sampled), self._tally.samples

    def notes(self) -> list[str]:
        with self._data_lock:
            return self._notes()
