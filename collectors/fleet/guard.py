"""Every wait on a ClickHouse server ends by a deadline, and no answer, however
malformed, can make the client allocate what the server merely claims.

Socket timeouts alone bound nothing: a server that sends a Progress packet every
second, or one byte every half second, never lets a read time out.  So each
operation has a deadline (`Deadline`), and the client's socket (`DeadlineSocket`)
looks at it before every read and write and at least every SLICE_S while one
blocks: past it, the read raises DeadlinePassed, which the driver does not catch.
Another thread may bring the deadline forward (a push's end): a blocked read
notices within SLICE_S, without touching the socket from that thread.

The driver allocates a block's rows, and an array's items, as the server announces
them, before any data arrives: 2^34 claimed rows were a MemoryError, 2^28 two GiB.
`BoundedBlockInput` refuses blocks of more rows, and strings, than any answer to
proftui's queries holds, and columns of types those queries never return.

Both hook into clickhouse-driver 0.2's Connection (`_create_socket`,
`_init_connection`: the same from 0.2.0 to 0.2.11; pyproject pins `<0.3`).
"""

from __future__ import annotations

import functools
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from proftui.collectors.errors import ProftuiError

ENV = "PROFTUI_FLEET_TIMEOUT"
DEFAULT_TIMEOUT_S = 25.0  # a query, or a push's start: the command ends within 30 s
FLUSH_S = 10.0  # after the target ends: the last intervals' sending
CONNECT_TIMEOUT_S = 5.0  # one TCP connect, within the deadline
SLICE_S = 0.5  # a blocked read or write looks at its deadline this often
# An aggregation's result comes as one block of all its keys (a block per distinct stack);
# a plain read's blocks hold <= 65,536 rows (max_block_size), so the frames of a
# block of stacks are <= 65,536 x depth.  The driver's tuple of 2^26 strings: 512 MiB.
MAX_BLOCK_ROWS = 1 << 26
MAX_ITEMS = 1 << 26  # strings in one column of one block (arrays of frames included)
MAX_COLUMNS = 64  # proftui's widest result has 21
# The column types proftui's queries return (system tables of current releases return
# LowCardinality(String) for some names).
_TYPE = re.compile(r"^(?:(?:Array|Nullable|LowCardinality)\()*"
                   r"(?:String|U?Int(?:8|16|32|64)|Float(?:32|64)|Date|DateTime)\)*$")


def timeout_s() -> float:
    """The deadline of a query and of a push's start: PROFTUI_FLEET_TIMEOUT or 25 s."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < 1e6:
        raise ProftuiError(f"{ENV}={raw!r}: expected a number of seconds (default "
                           f"{DEFAULT_TIMEOUT_S:g})")
    return value


class DeadlinePassed(Exception):
    """The operation in flight passed its deadline (not an OSError: the driver's ping
    would swallow that and reconnect)."""


class MalformedAnswer(Exception):
    """The server's answer cannot be a ClickHouse answer to proftui's queries."""


class Deadline:
    """When the operation in flight must end.  The thread running operations sets its
    own budget (`until`); any thread may bring the end forward for good (`limit`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._end, self._why = math.inf, ""
        self._limit, self._limit_why = math.inf, ""

    @contextmanager
    def until(self, end: float, why: str) -> Iterator[None]:
        """Operations inside end by `end` (monotonic seconds); `why` says what was
        allowed ("no complete answer within 25 s").  Nested: the earlier end holds."""
        saved = self._end, self._why
        if end < self._end:
            self._end, self._why = end, why
        try:
            yield
        finally:
            self._end, self._why = saved

    def limit(self, end: float, why: str) -> None:
        """From now on nothing ends later than `end`, the operation in flight included."""
        if end < self._limit:
            self._limit_why = why  # before the end: a reader of both sees a reason
            self._limit = end

    @property
    def end(self) -> float:
        return min(self._end, self._limit)

    def left(self) -> float:
        return self.end - self.clock()

    def passed(self) -> bool:
        return self.clock() >= self.end

    def why(self) -> str:
        return self._limit_why if self._limit <= self._end else self._why


class DeadlineSocket:
    """A connected socket whose reads and writes end by the deadline; the driver's own
    timeout (settimeout) still bounds each wait for data, as a plain socket's would."""

    def __init__(self, sock: Any, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._timeout: float | None = sock.gettimeout()

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def _idle_end(self) -> float:
        return math.inf if self._timeout is None else self._deadline.clock() + self._timeout

    def _slice(self, idle_end: float) -> float:
        """How long the next blocking call may wait; raises when nothing is left."""
        now = self._deadline.clock()
        end = self._deadline.end
        if now >= end:
            raise DeadlinePassed
        if now >= idle_end:
            raise TimeoutError("timed out")
        return min(SLICE_S, end - now, idle_end - now)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        idle_end = self._idle_end()
        while True:
            self._sock.settimeout(self._slice(idle_end))
            try:
                return int(self._sock.recv_into(buffer, nbytes, flags))
            except TimeoutError:
                continue

    def recv(self, size: int, flags: int = 0) -> bytes:
        data = bytearray(size)
        n = self.recv_into(data, size, flags)
        return bytes(data[:n])

    def sendall(self, data: Any, flags: int = 0) -> None:
        view = memoryview(data).cast("B")
        idle_end = self._idle_end()
        while view.nbytes:
            self._sock.settimeout(self._slice(idle_end))
            try:
                sent = self._sock.send(view, flags)
            except TimeoutError:
                continue
            view = view[sent:]
            idle_end = self._idle_end()

    def __getattr__(self, name: str) -> Any:  # shutdown, close, setsockopt, fileno...
        return getattr(self._sock, name)


class _CheckedReader:
    """The connection's reader for one column: refuses to read more strings at once than
    one block of an answer can hold (the driver allocates them before reading)."""

    def __init__(self, fin: Any) -> None:
        self._fin = fin

    def read_strings(self, n_items: int, encoding: Any = None) -> Any:
        if n_items > MAX_ITEMS:
            raise MalformedAnswer(f"a column of {n_items:,} strings (at most {MAX_ITEMS:,} "
                                  "expected)")
        return self._fin.read_strings(n_items, encoding=encoding)

    def __getattr__(self, name: str) -> Any:  # read, read_one, read_fixed_strings...
        return getattr(self._fin, name)


@functools.cache
def _bounded_block_input() -> type:
    """A BlockInputStream (driver 0.2's, without NumPy) that checks a block's shape and
    column types before reading its data."""
    from proftui.collectors.fleet.client import _driver

    _driver()  # loaded the way the client loads it (its lazy date table)
    from clickhouse_driver import defines
    from clickhouse_driver.block import BlockInfo, ColumnOrientedBlock
    from clickhouse_driver.columns.service import read_column
    from clickhouse_driver.reader import read_binary_str, read_binary_uint8
    from clickhouse_driver.streams.native import BlockInputStream
    from clickhouse_driver.varint import read_varint

    class BoundedBlockInput(BlockInputStream):
        def read(self, use_numpy: Any = None) -> Any:
            info = BlockInfo()
            revision = self.context.server_info.used_revision
            if revision >= defines.DBMS_MIN_REVISION_WITH_BLOCK_INFO:
                info.read(self.fin)
            n_columns = read_varint(self.fin)
            n_rows = read_varint(self.fin)
            if n_rows > MAX_BLOCK_ROWS:
                raise MalformedAnswer(f"a block of {n_rows:,} rows (at most "
                                      f"{MAX_BLOCK_ROWS:,} expected)")
            if n_columns > MAX_COLUMNS:
                raise MalformedAnswer(f"a block of {n_columns:,} columns (at most "
                                      f"{MAX_COLUMNS} expected)")
            data, names, types = [], [], []
            for _ in range(n_columns):
                name = read_binary_str(self.fin)
                kind = read_binary_str(self.fin)
                if not _TYPE.match(kind):
                    raise MalformedAnswer(f"a column of type {kind[:80]!r}, which proftui's "
                                          "queries never return")
                names.append(name)
                types.append(kind)
                custom = False
                if revision >= defines.DBMS_MIN_REVISION_WITH_CUSTOM_SERIALIZATION:
                    custom = bool(read_binary_uint8(self.fin))
                if n_rows:
                    data.append(read_column(self.context, kind, n_rows, _CheckedReader(self.fin),
                                            use_numpy=False, has_custom_serialization=custom))
            return ColumnOrientedBlock(columns_with_types=list(zip(names, types, strict=True)),
                                       data=data, info=info)

    return BoundedBlockInput


def install(client: Any, deadline: Deadline) -> None:
    """Give every connection of driver Client `client` deadline sockets and bounded block
    reading (compression stays off: the client never asks for it)."""
    blocks = _bounded_block_input()
    # The client holds the connection in use apart from the others (alt_hosts).
    for connection in {id(c): c for c in (client.connection, *client.connections)}.values():
        if connection.compression:
            raise ProftuiError("fleet client: compressed connections are not supported")
        _hook(connection, deadline, blocks)


def _hook(connection: Any, deadline: Deadline, blocks: type) -> None:
    create_socket = connection._create_socket
    init_connection = connection._init_connection

    def _create_socket(host: str, port: int) -> DeadlineSocket:
        left = deadline.left()
        if left <= 0:
            raise DeadlinePassed
        connection.connect_timeout = min(CONNECT_TIMEOUT_S, left)
        return DeadlineSocket(create_socket(host, port), deadline)

    def _init_connection(host: str, port: int) -> Any:
        result = init_connection(host, port)
        # Data, totals, logs and profile events all read blocks through these two.
        connection.block_in = blocks(connection.fin, connection.context)
        connection.block_in_raw = blocks(connection.fin, connection.context)
        return result

    connection._create_socket = _create_socket
    connection._init_connection = _init_connection
