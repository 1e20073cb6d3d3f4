"""Fake ClickHouse servers that never finish or answer malformed: a TCP server speaking
just enough of the native protocol (Hello, then one hostile answer to the first query)
to hold or break a client.  Modes:

- `progress`: answers Hello, then sends Progress packets forever (every 10 ms);
- `drip`: answers Hello, then an endless stream of Progress packets, one byte per 0.5 s;
- `mute`: accepts the connection and never says a word;
- `bad_hello`: a Hello whose server name is not UTF-8;
- `bad_exception`: answers Hello, then an Exception packet whose message is not UTF-8;
- `huge_block`: answers Hello, then a Data block header claiming `rows` rows (2^34 by
  default) of one column of type `kind` (String), then `data` (none by default).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

REVISION = 54060  # server timezone in Hello; no display name, patch or addendum
HELLO, DATA, EXCEPTION, PROGRESS = 0, 1, 2, 3
MODES = ("progress", "drip", "mute", "bad_hello", "bad_exception", "huge_block")


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def text(data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return varint(len(raw)) + raw


def hello(name: bytes = b"ClickHouse") -> bytes:
    return varint(HELLO) + text(name) + varint(18) + varint(16) + varint(REVISION) + text("UTC")


def progress() -> bytes:
    return varint(PROGRESS) + varint(1) + varint(100) + varint(1_000_000)


def exception(message: bytes) -> bytes:
    return (varint(EXCEPTION) + (1000).to_bytes(4, "little") + text("DB::Exception")
            + text(message) + text(b"\xc3\x28 stack") + b"\0")


def block_header(rows: int, kind: str = "String") -> bytes:
    """A Data packet's start: no table name, block info (field 1, 2, end), one column
    of type `kind` and `rows` rows, then nothing of the data."""
    return (varint(DATA) + text("") + varint(1) + b"\0" + varint(2)
            + (-1).to_bytes(4, "little", signed=True) + varint(0) + varint(1) + varint(rows)
            + text("name") + text(kind))


class HostileServer:
    """A listening server in `mode` on a free loopback port; `close()` ends it."""

    def __init__(self, mode: str, rows: int = 1 << 34, kind: str = "String",
                 data: bytes = b"", drip_s: float = 0.5) -> None:
        assert mode in MODES, mode
        self.mode, self.rows, self.kind, self.data = mode, rows, kind, data
        self.drip_s = drip_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.connections = 0
        self._closed = threading.Event()
        self._peers: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str = "prof", query: str = "") -> str:
        return f"clickhouse://127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        for peer in list(self._peers):
            with contextlib.suppress(OSError):
                peer.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                peer, _addr = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self._peers.append(peer)
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _serve(self, peer: socket.socket) -> None:
        with contextlib.suppress(OSError):
            peer.recv(65536)  # the client's Hello
            if self.mode == "mute":
                self._closed.wait()
                return
            if self.mode == "bad_hello":
                peer.sendall(hello(b"Click\xffHouse\xfe"))
                self._closed.wait()
                return
            peer.sendall(hello())
            peer.recv(65536)  # the query (what follows it is never read)
            if self.mode == "progress":
                while not self._closed.wait(0.01):
                    peer.sendall(progress() * 4)
            elif self.mode == "drip":
                while not self._closed.is_set():
                    for byte in progress():
                        if self._closed.wait(self.drip_s):
                            return
                        peer.sendall(bytes([byte]))
            elif self.mode == "bad_exception":
                peer.sendall(exception(b"table \xff\xfe is broken"))
                self._closed.wait()
            elif self.mode == "huge_block":
                peer.sendall(block_header(self.rows, self.kind) + self.data)
                self._closed.wait()


@contextlib.contextmanager
def hostile_server(mode: str, **kwargs: Any) -> Iterator[HostileServer]:
    """A HostileServer (HostileServer's keywords), closed afterwards."""
    server = HostileServer(mode, **kwargs)
    try:
        yield server
    finally:
        server.close()

