"""The push loop: every interval, what the collector added goes to the server, or to the
spool when the server does not take it; the last interval when the run ends.

Runs in the front end, on its own thread, never in the target.  A tick takes the
collector's lock, folds in what the runtime counted (`collect()`), takes the
interval's rows (intervals.py) and makes a Batch; sending happens outside the lock.
Sending goes oldest first and stops at the first failure (the server is down: the
batches are written to the spool and wait; they are retried at the next tick).
A batch whose earlier attempt may have reached the server (a failure after the
insert was sent, or one left by an earlier session) is looked up by its id before
it is sent again, so every interval arrives exactly once.

Every wait on the server has a deadline (guard.py): the start, timeout_s(); each
tick's sending, the same; at the end, FLUSH_S (10 s) from the target's end for
everything, the send in flight included: what is left stays in the spool, said.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet.batch import Batch, metric_spec
from proftui.collectors.fleet.client import FleetClient
from proftui.collectors.fleet.guard import FLUSH_S, SLICE_S
from proftui.collectors.fleet.intervals import Rows, SnapshotIntervals, TableIntervals
from proftui.collectors.fleet.spool import DEFAULT_MAX_BYTES, Spool, Spooled, server_key
from proftui.collectors.fleet.stacks import StackHasher, series_hash
from proftui.collectors.fleet.url import FleetURL
from proftui.collectors.symbols.elf import executable_build_id

if TYPE_CHECKING:
    from proftui.collectors.base import Collector, SeriesParts

DEFAULT_EVERY_S = 10.0
FLUSH_TIMEOUT_S = FLUSH_S  # after the target ends: how long sending may still take
MAX_ROWS = 500_000  # per batch: one insert block (the server's is 1,048,576 rows)
# Stack hashes remembered as on the server (their frames not sent again): past this many
# the set starts afresh, so a run of days stays bounded; a stack sent twice is one row
# (the stacks table replaces by hash).
MAX_CONFIRMED = 100_000


@dataclass
class PushStats:
    """What the session did, for the closing line and the profile's notes."""

    intervals: int = 0
    sent: int = 0  # batches the server has
    duplicates_avoided: int = 0  # retried batches found on the server already
    failures: int = 0  # sends that failed (server unreachable...)
    last_error: str = ""
    take_cpu_s: float = 0.0  # CPU of taking intervals into batches and the spool (thread time)
    send_cpu_s: float = 0.0  # CPU of sending them (thread time)
    notes: list[str] = field(default_factory=list)


def auto_labels(collector: Collector, program: str | None) -> dict[str, str]:
    """host, program, build, mode and pid of the run."""
    labels = {"host": socket.gethostname(), "mode": collector.mode}
    pid = collector.pid
    if pid is not None:
        labels["pid"] = str(pid)
    path = program
    if path is None and pid is not None:
        try:
            path = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            path = None
    if path:
        labels["program"] = os.path.basename(path)
        labels["build"] = executable_build_id(None if program else pid, path)
    return labels


class Pusher:
    """Pushes a running collector's intervals to the server of `url`."""

    def __init__(self, url: FleetURL, labels: dict[str, str], *,
                 every_s: float = DEFAULT_EVERY_S, max_spool_bytes: int = DEFAULT_MAX_BYTES,
                 spool_root: os.PathLike[str] | None = None,
                 flush_timeout_s: float = FLUSH_TIMEOUT_S,
                 clock: Callable[[], float] = time.time) -> None:
        """`clock`: Unix seconds, for the intervals' times (simulations replay their own)."""
        self.url = url
        self.user_labels = dict(labels)
        self.every_s = every_s
        self.flush_timeout_s = flush_timeout_s
        self.clock = clock
        self.stats = PushStats()
        self.client = FleetClient(url)
        self._spool_args = (max_spool_bytes, spool_root)
        self.spool: Spool | None = None
        self._collector: Collector | None = None
        self._source: TableIntervals | SnapshotIntervals | None = None
        # A collector of many processes (series_parts): per part, its intervals, series
        # and labels, made when the part first has rows.
        self._parts: dict[int, tuple[TableIntervals, int, dict[str, str]]] = {}
        self._hasher = StackHasher()
        self._confirmed: set[int] = set()  # stack hashes the server has
        self._labels: dict[str, str] = {}
        self._series = 0
        self._dropped = 0  # what the collector had lost by the last interval taken
        self._last = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._send_lock = threading.Lock()
        self._unsent = ""  # after finish(): what stayed in the spool, and why

    # -- setup -------------------------------------------------------------------------

    def connect(self) -> str:
        """Before the target starts: reach the server and make or check the schema
        (ProftuiError in one line if that fails, or if the server has not answered within
        timeout_s()).  Returns a note when the database was created, else ""."""
        with self.client.within():
            self.client.ensure_schema(create=True)
        if self.client.created_database:
            return f"created database {self.url.database} on {self.url.host}:{self.url.port}"
        return ""

    def start(self, collector: Collector, program: str | None = None) -> None:
        """Begin pushing `collector`'s intervals (it has started: its pid is known)."""
        self._collector = collector
        tables = collector.stack_tables()
        self._source = (TableIntervals(tables, self._hasher) if tables
                        else SnapshotIntervals(self._hasher))
        if collector.series_parts() is not None:  # its metrics: those of every part's table
            self._source.metrics = collector.series_metrics()
        self.client.check_metrics(self._source.metrics)
        self._labels = {**auto_labels(collector, program), **self.user_labels}
        # The session's own nonce in the fingerprint: two sessions with equal labels (one
        # pid attached twice) never share a series, so batch markers never collide.
        self._series = series_hash({**self._labels, "\0session": secrets.token_hex(8)})
        max_bytes, root = self._spool_args
        self.spool = Spool(server_key(self.url.host, self.url.port, self.url.database),
                           max_bytes, None if root is None else Path(root))
        self.stats.notes.extend(self.spool.warnings)
        self.spool.adopt()  # an earlier session's batches: maybe sent already
        self._last = self.clock()
        self._thread = threading.Thread(target=self._loop, name="proftui-push", daemon=True)
        self._thread.start()

    @property
    def labels(self) -> dict[str, str]:
        return dict(self._labels)

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.tick()
            except Exception as exc:  # a push failure must not end the run
                self.stats.last_error = str(exc)

    def tick(self) -> None:
        """Take one interval and send what waits."""
        self._take()
        self.send_pending()

    def take(self) -> None:
        """Take one interval into the spool (the loop's first half; a simulation's step)."""
        self._take()

    def _take(self) -> None:
        collector, source, spool = self._collector, self._source, self.spool
        assert collector is not None and source is not None and spool is not None
        began = time.thread_time()
        parts = collector.series_parts()
        if parts is not None:
            self._take_parts(parts)
            self.stats.take_cpu_s += time.thread_time() - began
            return
        with collector.lock:
            profile = collector.collect()
            with collector.tables_held():  # attach's reader adds stacks outside `lock`
                rows = source.take(profile)
        now = self.clock()
        start, self._last = self._last, now
        self.stats.intervals += 1
        batches = (self._batches(rows, start, now, source, self._series, self._labels)
                   if rows.costs else [])
        self._add_lost(batches, profile.meta.dropped, start, now, source)
        for batch in batches:
            spool.put(batch)
        self.stats.take_cpu_s += time.thread_time() - began

    def _add_lost(self, batches: list[Batch], dropped: int, start: float, end: float,
                  source: TableIntervals | SnapshotIntervals) -> None:
        """What the run lost since the last interval goes with the interval's first batch
        of the run's own series, or alone in a batch without rows."""
        lost, self._dropped = dropped - self._dropped, dropped
        if lost <= 0:
            return
        own = [b for b in batches if b.series == self._series]
        if own:
            own[0].lost += lost
            return
        batches.append(Batch(batch_id=secrets.randbits(63), time=int(start), end=end,
                             series=self._series, labels=self._labels,
                             spec=metric_spec(source.metrics, source.has_calls), lost=lost))

    def _take_parts(self, parts: SeriesParts) -> None:
        """One interval of a collector of many processes: each part's rows under its own
        series (the run's labels, then the part's)."""
        spool = self.spool
        assert spool is not None
        batches = []
        now = self.clock()
        start, self._last = self._last, now
        self.stats.intervals += 1
        items = parts.take()
        with parts.tables_held():  # the collector's reader adds stacks to them meanwhile
            for part in items:
                known = self._parts.get(part.key)
                if known is None:
                    labels = {**self._labels, **part.labels(), **self.user_labels}
                    series = series_hash({**labels, "\0session": secrets.token_hex(8)})
                    known = self._parts[part.key] = (
                        TableIntervals([part.table], self._hasher), series, labels)
                elif known[0].tables[0] is not part.table:  # renewed: its old one was taken
                    known = self._parts[part.key] = (
                        TableIntervals([part.table], self._hasher), known[1], known[2])
                source, series, labels = known
                rows = source.take(None)
                if rows.costs:
                    batches.extend(self._batches(rows, start, now, source, series, labels))
        for part in items:
            if part.gone and parts.release(part):
                del self._parts[part.key]
        assert self._source is not None
        self._add_lost(batches, parts.dropped(), start, now, self._source)
        for batch in batches:
            spool.put(batch)

    def _batches(self, rows: Rows, start: float, end: float,
                 source: TableIntervals | SnapshotIntervals, series: int,
                 labels: dict[str, str]) -> list[Batch]:
        spec = metric_spec(source.metrics, source.has_calls)
        keys = list(rows.costs)
        out = []
        for first in range(0, len(keys), MAX_ROWS):
            chunk = keys[first:first + MAX_ROWS]
            threads: dict[str, int] = {}
            batch = Batch(batch_id=secrets.randbits(63), time=int(start), end=end,
                          series=series, labels=labels, spec=spec)
            costs = batch.costs
            for thread, stack in chunk:
                batch.thread.append(threads.setdefault(thread, len(threads)))
                batch.stack.append(stack)
                costs.extend(rows.costs[(thread, stack)])
                if stack not in self._confirmed and stack not in batch.stacks:
                    batch.stacks[stack] = source.records[stack]
            if source.has_calls:
                batch.calls = array("q", (rows.calls.get(k, 0) for k in chunk))
            batch.threads = list(threads)
            out.append(batch)
        return out

    def send_pending(self, deadline: float | None = None) -> bool:
        """Send spooled batches oldest first until one fails; True when none is left.
        Every operation ends by `deadline` (monotonic; default timeout_s() from now)."""
        spool = self.spool
        assert spool is not None
        client = self.client
        with self._send_lock, (client.within() if deadline is None else
                               client.until(deadline, "no complete answer in time")):
            began = time.thread_time()
            sent = False
            try:
                sent = self._send_all(spool, deadline)
            finally:
                if not sent:  # they wait: on disk, in case this session ends first
                    spool.write()
                self.stats.send_cpu_s += time.thread_time() - began
            return sent

    def _send_all(self, spool: Spool, deadline: float | None) -> bool:
        while True:
            group = self._next_group(spool)
            if not group:
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            if not self._send(spool, group):
                return False

    @staticmethod
    def _next_group(spool: Spool) -> list[Spooled]:
        """The oldest batch and those after it of the same interval (one partition), up
        to MAX_ROWS rows: an agent's processes of one interval go in one insert per
        table.  A batch of unknown time (another session's) goes alone."""
        group: list[Spooled] = []
        rows = 0
        for item in spool.items():
            if group and (item.time < 0 or item.time != group[0].time
                          or rows + item.rows > MAX_ROWS):
                break
            group.append(item)
            rows += item.rows
            if item.time < 0:
                break
        return group

    def _send(self, spool: Spool, group: list[Spooled]) -> bool:
        """Insert `group` at once (what an earlier attempt landed left out); False when
        the server failed (every batch of it waits for the next attempt)."""
        batches: list[tuple[Spooled, Batch]] = []
        for item in group:
            try:
                batches.append((item, spool.load(item)))
            except (OSError, ProftuiError) as exc:
                self.stats.notes.append(f"push: a spooled batch could not be read ({exc}); "
                                        "it was skipped")
                spool.done(item)
        try:
            todo = [(item, batch) for item, batch in batches
                    if not item.maybe_sent or not self.client.has_batch(batch)]
            self.stats.duplicates_avoided += len(batches) - len(todo)
            if todo:
                # from here on an error may hide a landed insert
                for item, _ in todo:
                    item.maybe_sent = True
                self.client.insert([batch for _, batch in todo])
                self.stats.sent += len(todo)
        except ProftuiError as exc:
            self.stats.failures += 1
            self.stats.last_error = str(exc)
            return False
        for item, batch in batches:
            if len(self._confirmed) + len(batch.stacks) > MAX_CONFIRMED:
                self._confirmed.clear()
            self._confirmed.update(batch.stacks)
            spool.done(item)
        return True

    # -- the end -----------------------------------------------------------------------

    def finish(self) -> str:
        """Stop the loop, push the last interval, flush, close the spool: all within
        flush_timeout_s, the loop's send in flight included (what is left stays in the
        spool).  Returns the one-line summary for stderr."""
        deadline = time.monotonic() + self.flush_timeout_s
        self.client.limit(deadline, f"no complete answer in the {self.flush_timeout_s:g} s "
                                    "allowed after the run")
        self._stop.set()
        thread = self._thread
        if thread is not None:  # its send ends by the deadline, noticed within SLICE_S
            thread.join(max(0.0, deadline - time.monotonic()) + 2 * SLICE_S)
        spool = self.spool
        if self._collector is None or spool is None:
            self.client.close()
            return ""
        if thread is not None and thread.is_alive():  # the spool is still its: leave both
            self.stats.last_error = "the push thread did not stop in time"
            in_memory = sum(not item.written for item in spool.items())
            self._unsent = self._unsent_line(len(spool), str(spool.path) + (
                f" ({in_memory} of them not written yet: lost)" if in_memory else ""))
            return self.summary()
        try:
            self._take()
        except ProftuiError as exc:
            self.stats.last_error = str(exc)
        kept = str(spool.path)
        try:
            while not self.send_pending(deadline) and time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        except OSError as exc:  # the spool could not be written (a full disk)
            kept = f"nowhere: the spool could not be written ({exc})"
        self._unsent = self._unsent_line(len(spool), kept)
        spool.close()
        self.client.close()
        return self.summary()

    def _unsent_line(self, left: int, kept: str) -> str:
        if not left:
            return ""
        return (f"{left} interval batch{'es' if left != 1 else ''} not sent "
                f"({self.stats.last_error or 'server unreachable'}): kept in {kept}, sent by "
                "the next push to this server")

    def summary(self) -> str:
        """The closing line: what was sent, dropped, and (after finish) left unsent."""
        spool = self.spool
        s = self.stats
        where = self.url.display()
        line = f"pushed {s.sent} interval batch{'es' if s.sent != 1 else ''} to {where}"
        if s.failures:
            line += f" ({s.failures} sends failed and were retried)"
        if s.duplicates_avoided:
            line += f" ({s.duplicates_avoided} found there already after a retry)"
        if spool is not None and spool.dropped_batches:
            line += (f"; {spool.dropped_batches} dropped ({spool.dropped_weight:,.0f} "
                     f"{self._first_metric()}): the spool's {spool.max_bytes >> 20} MiB bound "
                     "was reached while the server was unreachable")
        if self._unsent:
            line += f"; {self._unsent}"
        return line

    def notes(self) -> list[str]:
        """Warnings for the profile's notes: drops and unsent batches."""
        out = list(self.stats.notes)
        spool = self.spool
        if spool is not None and spool.dropped_batches:
            out.append(f"fleet push: {spool.dropped_batches} intervals "
                       f"({spool.dropped_weight:,.0f} {self._first_metric()}) were dropped: "
                       "the spool was full while the server was unreachable")
        if self._unsent:
            out.append(f"fleet push: {self._unsent}")
        return out

    def _first_metric(self) -> str:
        source = self._source
        return source.metrics[0].name if source is not None and source.metrics else "samples"
