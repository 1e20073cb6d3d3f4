"""The one place that talks to ClickHouse: connect, check or create the schema, insert a
batch exactly once, run the reads.  Every failure becomes a one-line ProftuiError
(exit status 2) that names the server, never the password: an unreachable server,
a refusal, an answer that never completes by its deadline, a malformed one.

The client library is clickhouse-driver (native protocol, port 9000): it speaks to
Debian's clickhouse-server 18.16 and to current releases, inserts columns without
text formatting, and sends external tables.  It is an optional dependency
(`pip install proftui[fleet]`), imported only when a fleet URL is used.  guard.py
bounds what a server can make it wait for or allocate.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet import schema
from proftui.collectors.fleet.batch import Batch, parse_spec
from proftui.collectors.fleet.guard import (
    CONNECT_TIMEOUT_S,
    ENV,
    Deadline,
    DeadlinePassed,
    MalformedAnswer,
    install,
    timeout_s,
)
from proftui.collectors.fleet.stacks import StackRecord
from proftui.collectors.fleet.url import FleetURL
from proftui.collectors.model.profile import Metric

MISSING = "the fleet needs the ClickHouse client: pip install 'proftui[fleet]' (clickhouse-driver)"
IO_TIMEOUT_S = 60.0  # the longest silence within an operation (its deadline comes first)
MAX_MESSAGE = 300  # characters of a server's message shown
# Server error codes worth their own words (ClickHouse's ErrorCodes).
UNKNOWN_TABLE, UNKNOWN_DATABASE = 60, 81
AUTH_CODES = {192, 193, 194, 516}  # unknown user, wrong password, required password, auth
ACCESS_CODES = {164, 497}  # readonly, access denied


# clickhouse-driver fills a table of every date from 1900 to 2299 when its date column
# module loads: ~0.1 s of CPU and ~20 MB, in every agent and fleet view, whose rows
# carry no Date.  The driver's own switch (its spelling) makes the table lazy, filled as
# dates are seen; it is read once, at that import, and set only around it: the
# environment is what launched targets inherit.
_LAZY_DATES = ("CLICKHOUSE_DRIVER_LASY_DATE_LUT", "1970-01-01:1970-01-01")


def _driver() -> Any:
    name, value = _LAZY_DATES
    ours = name not in os.environ and "clickhouse_driver" not in sys.modules
    if ours:
        os.environ[name] = value
    try:
        import clickhouse_driver
    except ImportError:
        raise ProftuiError(MISSING) from None
    finally:
        if ours:
            os.environ.pop(name, None)
    # The driver logs a traceback for each failed connection attempt: proftui says it
    # in one line instead.
    log = logging.getLogger("clickhouse_driver")
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return clickhouse_driver


def server_message(exc: BaseException) -> str:
    """The first line of a server exception, without "Code: N." or a stack trace, its
    control characters shown as "?" (a server's text never breaks proftui's line)."""
    text = getattr(exc, "message", None) or str(exc)
    text = re.sub(r"^Code: \d+\.\s*", "", text.strip())
    text = text.removeprefix("DB::Exception: ")
    text = text.split("Stack trace:")[0].split("\n")[0].strip()
    text = "".join(c if c.isprintable() else "?" for c in text)
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "..."
    return text.rstrip(".") or type(exc).__name__


def _malformed(exc: BaseException) -> str:
    """Why an answer could not be read, in words."""
    if isinstance(exc, MemoryError):
        return "it announces more data than this host's memory holds"
    if isinstance(exc, UnicodeDecodeError):
        return f"text that is not UTF-8 (byte 0x{exc.object[exc.start]:02x})"
    return server_message(exc) if isinstance(exc, MalformedAnswer) else \
        f"{type(exc).__name__}: {server_message(exc)}"


class FleetClient:
    """A connection to the server of `url` (opened on first use, reopened after errors).
    Operations run inside `within` or `until` end by that deadline."""

    def __init__(self, url: FleetURL, *, io_timeout_s: float = IO_TIMEOUT_S) -> None:
        self.url = url
        driver = _driver()
        self._errors = driver.errors
        self._client = driver.Client(
            url.host, port=url.port, user=url.user, password=url.password,
            connect_timeout=CONNECT_TIMEOUT_S, send_receive_timeout=io_timeout_s,
            sync_request_timeout=io_timeout_s, client_name="proftui")
        self.deadline = Deadline()
        install(self._client, self.deadline)
        self.db = url.database
        self.created_database = False
        self._series_sent: set[int] = set()

    def close(self) -> None:
        self._disconnect()

    def _disconnect(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection is dropped all the same
            self._client.disconnect()

    # -- deadlines ---------------------------------------------------------------------

    @contextmanager
    def within(self, seconds: float | None = None) -> Iterator[None]:
        """Operations inside end within `seconds` (default: timeout_s(), the
        PROFTUI_FLEET_TIMEOUT a user may raise for slow queries)."""
        budget = timeout_s() if seconds is None else seconds
        with self.deadline.until(self.deadline.clock() + budget,
                                 f"no complete answer within {budget:g} s ({ENV}=SECONDS "
                                 "allows longer)"):
            yield

    def until(self, end: float, why: str) -> Any:
        """Operations inside end by monotonic time `end`."""
        return self.deadline.until(end, why)

    def limit(self, end: float, why: str) -> None:
        """Nothing ends after `end`, the operation in flight in another thread included."""
        self.deadline.limit(end, why)

    # -- errors ------------------------------------------------------------------------

    def fail(self, exc: BaseException, doing: str) -> ProftuiError:
        """`exc` as one line: what failed, on which server, why."""
        where = f"{self.url.host}:{self.url.port}"
        if isinstance(exc, DeadlinePassed) or self.deadline.passed():
            return ProftuiError(f"ClickHouse at {where}: {doing}: {self.deadline.why()}")
        code = getattr(exc, "code", None)
        if isinstance(exc, self._errors.ServerException) and code is not None:
            if code in AUTH_CODES:
                return ProftuiError(f"ClickHouse at {where} refused user {self.url.user!r}: "
                                    f"{server_message(exc)} (credentials come from the URL or "
                                    "PROFTUI_CLICKHOUSE_USER/_PASSWORD)")
            if code == UNKNOWN_DATABASE:
                return ProftuiError(f"ClickHouse at {where} has no database {self.db!r} "
                                    "(nothing was pushed there; check the URL's database)")
            if code in ACCESS_CODES:
                return ProftuiError(f"ClickHouse at {where}: {server_message(exc)} "
                                    f"({doing} needs that right)")
            return ProftuiError(f"ClickHouse at {where}: {doing}: {server_message(exc)}")
        if isinstance(exc, self._errors.Error | OSError | EOFError):
            reason = server_message(exc)
            return ProftuiError(f"cannot reach ClickHouse at {where} ({reason})")
        return ProftuiError(f"ClickHouse at {where}: {doing}: malformed answer: "
                            f"{_malformed(exc)}")

    def execute(self, sql: str, params: Any = None, *,
                doing: str = "query", **kwargs: Any) -> Any:
        if self.deadline.passed():
            raise self.fail(DeadlinePassed(), doing)
        try:
            return self._client.execute(sql, params, **kwargs)
        except Exception as exc:  # any answer, however malformed: one line
            self._disconnect()
            raise self.fail(exc, doing) from None

    # -- schema ------------------------------------------------------------------------

    def ensure_schema(self, create: bool) -> None:
        """Check the tables are version 1's; with `create`, make the database and any table
        missing.  Without it, a database with no fleet tables is an error."""
        databases = {row[0] for row in self.execute("SELECT name FROM system.databases",
                                                    doing="listing databases")}
        if self.db not in databases:
            if not create:
                raise ProftuiError(f"ClickHouse at {self.url.host}:{self.url.port} has no "
                                   f"database {self.db!r} (nothing was pushed there)")
            self.execute(f"CREATE DATABASE IF NOT EXISTS {self.db}", doing="creating the "
                         "database")
            self.created_database = True
        found = self._tables()
        bad = schema.mismatch(found)
        if bad is not None:
            raise ProftuiError(f"{self.db}.{bad} on {self.url.host}:{self.url.port} is not a "
                               f"proftui fleet table of schema version {schema.VERSION} (its "
                               "columns differ): push to another database")
        if schema.SCHEMA in found:
            versions = {row[0] for row in self.execute(
                f"SELECT DISTINCT version FROM {self.db}.{schema.SCHEMA}")}
            other = versions - {schema.VERSION}
            if other:
                raise ProftuiError(
                    f"{self.db} on {self.url.host}:{self.url.port} holds proftui fleet schema "
                    f"version {max(other)}; this proftui reads and writes version "
                    f"{schema.VERSION}: use another database")
        missing = [t for t in schema.COLUMNS if t not in found]
        if missing and not create:
            if all(t in missing for t in (schema.SAMPLES, schema.STACKS)):
                raise ProftuiError(f"database {self.db!r} on {self.url.host}:{self.url.port} "
                                   "holds no proftui fleet data (nothing was pushed there)")
            raise ProftuiError(f"{self.db} on {self.url.host}:{self.url.port} lacks the fleet "
                               f"tables {', '.join(missing)}")
        if missing:
            for statement in schema.create_statements(self.db):
                self.execute(statement, doing="creating the fleet tables")
            if schema.SCHEMA in missing:
                self.execute(f"INSERT INTO {self.db}.{schema.SCHEMA} (version, created) VALUES",
                             [[schema.VERSION], [_now()]], columnar=True,
                             doing="creating the fleet tables")

    def _tables(self) -> dict[str, list[tuple[str, str]]]:
        rows = self.execute(
            "SELECT table, name, type FROM system.columns WHERE database = %(db)s AND "
            "table IN %(tables)s", {"db": self.db, "tables": tuple(schema.COLUMNS)},
            doing="reading the schema")
        found: dict[str, list[tuple[str, str]]] = {}
        for table, name, kind in rows:
            found.setdefault(table, []).append((name, kind))
        return found

    def ensure_distributed(self, cluster: str) -> None:
        """The Distributed tables over `cluster`'s shards (created when missing)."""
        known = {row[0] for row in self.execute(
            "SELECT DISTINCT cluster FROM system.clusters", doing="listing clusters")}
        if cluster not in known:
            raise ProftuiError(f"ClickHouse at {self.url.host}:{self.url.port} knows no cluster "
                               f"{cluster!r} (its remote_servers configuration)")
        for statement in schema.distributed_statements(self.db, cluster):
            self.execute(statement, doing="creating the Distributed tables")

    # -- pushing -----------------------------------------------------------------------

    def has_batch(self, batch: Batch) -> bool:
        """Whether an earlier attempt inserted `batch`: its marker row is there (an insert
        block is atomic, so then all of its rows are)."""
        rows = self.execute(
            f"SELECT count() FROM {self.db}.{schema.SAMPLES} WHERE toStartOfHour(time) = "
            "toStartOfHour(toDateTime(%(t)s)) AND series = %(s)s AND time = toDateTime(%(t)s) "
            "AND thread = '' AND stack = 0 AND batch = %(b)s",
            {"t": schema.bucket(batch.time), "s": batch.series, "b": batch.batch_id},
            doing="checking an earlier insert")
        return bool(rows and rows[0][0])

    def check_metrics(self, metrics: Sequence[Metric]) -> None:
        """Every metric has its column (a metric newer than schema version 1 has not)."""
        for metric in metrics:
            if metric.name not in schema.METRICS:
                raise ProftuiError(f"fleet schema version {schema.VERSION} has no column for "
                                   f"metric {metric.name!r}")

    def insert(self, batches: Sequence[Batch]) -> None:
        """Insert the batches' stacks, their series, then their rows and markers (one
        block: atomic).  One statement per table for all of them (each costs a round
        trip and the server's parse, whatever its rows): the caller gives batches of one
        interval, so their rows fall in one partition, and at most MAX_ROWS of them."""
        stacks: dict[int, StackRecord] = {}
        for batch in batches:
            stacks.update(batch.stacks)
        if stacks:
            self.execute(f"INSERT INTO {self.db}.{schema.STACKS} VALUES",
                         _stack_columns(stacks), columnar=True, doing="inserting stacks")
        series: dict[int, Batch] = {}  # each new series with its first batch's time
        for batch in batches:
            if batch.series not in self._series_sent:
                series.setdefault(batch.series, batch)
        if series:
            labelled: list[list] = [[], [], [], []]
            for batch in series.values():
                keys = sorted(batch.labels)
                for column, value in zip(labelled, (batch.series, keys,
                                                   [batch.labels[k] for k in keys],
                                                   batch.time), strict=True):
                    column.append(value)
            self.execute(f"INSERT INTO {self.db}.{schema.SERIES} VALUES", labelled,
                         columnar=True, doing="inserting the series")
            self._series_sent.update(series)
        rows: list[list] = []
        for batch in batches:
            parts = sample_columns(batch)
            if not rows:  # new lists: a batch's columns may share one (its zeros)
                rows = [[] for _ in parts]
            for column, part in zip(rows, parts, strict=True):
                column.extend(part)
        self.execute(f"INSERT INTO {self.db}.{schema.SAMPLES} VALUES", rows,
                     columnar=True, types_check=False, doing="inserting samples")


def sample_columns(batch: Batch) -> list[list]:
    """The samples table's columns for `batch`: its cost rows, then its marker row
    (which carries what the interval lost)."""
    rows = len(batch)
    metrics, _calls = parse_spec(batch.spec)
    n = len(metrics)
    costs = batch.costs.tolist()
    by_name = {m.name: i for i, m in enumerate(metrics)}
    zeros = [0.0] * (rows + 1)
    metric_columns = []
    for name in schema.METRICS:
        i = by_name.get(name)
        column = zeros if i is None else [*costs[i::n], 0.0]
        if name == schema.LOST_IN and batch.lost:
            column = [*column[:rows], float(batch.lost)]
        metric_columns.append(column)
    return [[schema.bucket(batch.time)] * (rows + 1), [batch.series] * (rows + 1),
            [*(batch.threads[t] for t in batch.thread), ""], [*batch.stack.tolist(), 0],
            [*([0] * rows), batch.batch_id], [batch.spec] * (rows + 1),
            [*([0] * rows), max(1, rows)],
            [*(batch.calls.tolist() if len(batch.calls) else [0] * rows), 0],
            *metric_columns]


def _now() -> int:
    import time

    return int(time.time())


def _stack_columns(stacks: dict[int, StackRecord]) -> Sequence[list]:
    cols: list[list] = [[] for _ in range(14)]
    for stack, record in stacks.items():
        frames = record.frames
        cols[0].append(stack)
        cols[1].append([f.function for f in frames])
        cols[2].append([f.module for f in frames])
        cols[3].append([f.build_id for f in frames])
        cols[4].append(["" if f.file is None else f.file for f in frames])
        cols[5].append([f.line or 0 for f in frames])
        cols[6].append([-1 if f.address is None else f.address for f in frames])
        cols[7].append([f.raw_name for f in frames])
        cols[8].append([1 if f.inlined else 0 for f in frames])
        site = record.site
        if site is None:
            cols[9].append("")
            cols[10].append(-1)
            cols[11].append(-1)
            cols[12].append("")
            cols[13].append(0)
        else:
            module, address, code = site
            cols[9].append(module)
            cols[10].append(address)
            cols[11].append(-1 if code.function is None else code.function)
            cols[12].append("" if code.file is None else code.file)
            cols[13].append(code.line or 0)
    return cols
