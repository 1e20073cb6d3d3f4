"""The TUI target's stdout and stderr, bounded: a pseudo-terminal drained into memory.

The TUI cannot let the target write on the screen, and a log file in the run
directory lets a chatty target fill TMPDIR (1 GiB of output = 1 GiB file).
So the target writes to a pseudo-terminal whose other end a thread drains as
fast as it can, keeping the first HEAD_BYTES and the last TAIL_BYTES exactly
and counting the bytes (and lines) between them.  The thread never writes to
disk and never waits on the rest of proftui, so the target never blocks for
longer than a thread switch.

A terminal, not a pipe, because that is what the target would write to in a
shell: its stdio line-buffers stdout there, so stdout and stderr (one
terminal, both) arrive in the order it wrote them; through a pipe stdout is
block-buffered and stderr lands in the middle of a line.  Output processing is
off (no "\n" -> "\r\n"): the bytes kept are the bytes written.  The terminal
is not the target's controlling terminal (it has its own session and opens
nothing), so closing it never sends SIGHUP.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import struct
import termios
import threading
from collections import deque

from proftui.collectors.model.textsafe import display

HEAD_BYTES = 1 << 20  # the start of the output: banners, the first errors
TAIL_BYTES = 4 << 20  # the rolling end: what the program says now
READ_BYTES = 1 << 20
STOP_BYTES = 1 << 20  # read at most this much more once asked to stop
POLL_MS = 200  # how often the drain thread checks whether it was asked to stop


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave), both close-on-exec, output processing off, the
    size of proftui's own terminal (80x24 without one)."""
    master, slave = os.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    columns, rows = shutil.get_terminal_size()
    with contextlib.suppress(OSError):
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return master, slave


class OutputLog:
    """Collects what the target writes to the terminal `write_fd` (give it as stdout and
    stderr).

    Thread-safe readers: `head()`, `tail(n)`, `total_bytes`, `total_lines`,
    `dropped_bytes`, `read_from(offset, n)` (a reader following the output, the
    TUI's panel) and `last_lines(n)` (what the CLI prints after the TUI when the
    target failed).  Call `start()` after the child has the write end (it closes
    ours), and `close()` when done (drains what is left, then stops the thread).
    """

    def __init__(self, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> None:
        self.head_limit = head_bytes
        self.tail_limit = tail_bytes
        self._read_fd, self.write_fd = _terminal()
        self._lock = threading.Lock()
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self._total = 0
        self._newlines = 0
        self._last = b"\n"  # the last byte written (a line is open unless it is "\n")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, name="proftui-target-output",
                                        daemon=True)

    def start(self) -> None:
        """Close our copy of the write end (EOF comes when the target's copies close) and
        start draining."""
        os.close(self.write_fd)
        self._thread.start()

    def settle(self, timeout: float) -> bool:
        """Wait up to `timeout` s for EOF (the target ended: what it wrote last is still in
        the terminal); False when a descendant still holds it open."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop draining (idempotent).  Output still buffered is read first; descendants
        that outlive the target and keep the terminal open find it closed (EIO)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        elif self._thread.ident is None:  # never started: both ends are still ours
            for fd in (self.write_fd, self._read_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._read_fd = -1

    # -- readers ---------------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        """Bytes the target wrote so far."""
        with self._lock:
            return self._total

    @property
    def total_lines(self) -> int:
        """Lines the target wrote so far (a last one without its newline counts)."""
        with self._lock:
            return self._newlines + (self._last != b"\n")

    @property
    def dropped_bytes(self) -> int:
        """Bytes written between the kept head and the kept tail."""
        with self._lock:
            return self._total - len(self._head) - self._tail_len

    def head(self) -> bytes:
        """The first min(total, HEAD_BYTES) bytes, exactly."""
        with self._lock:
            return bytes(self._head)

    @property
    def ended(self) -> bool:
        """True once the drain thread stopped (EOF or `close()`): nothing more will come."""
        return (self._thread.ident is not None and not self._thread.is_alive()) \
            or self._read_fd < 0

    def read_from(self, offset: int, max_bytes: int, keep_head: bool = True
                  ) -> tuple[int, bytes, int]:
        """What was written from byte `offset` on: (skipped, data, next offset).

        With `keep_head` the kept head comes in order, at most `max_bytes` per call;
        past it (or without `keep_head`), `data` starts `skipped` bytes after
        `offset`: those were not kept (dropped between head and tail), or the reader
        fell more than `max_bytes` behind and gets only the newest `max_bytes`.
        A reader calls again from `next offset`.
        """
        max_bytes = max(1, max_bytes)
        with self._lock:
            total = self._total
            if offset >= total:
                return 0, b"", total
            head_len = len(self._head)
            tail_start = total - self._tail_len
            start = offset if keep_head else max(offset, total - max_bytes)
            if start < head_len:
                end = min(head_len, start + max_bytes)
                data = bytes(self._head[start:end])
                if end == head_len == tail_start and total - start <= max_bytes:
                    return start - offset, data + self._tail_bytes(self._tail_len), total
                return start - offset, data, end
            start = max(start, total - max_bytes, tail_start)
            return start - offset, self._tail_bytes(total - start), total

    def last_lines(self, n: int, max_bytes: int = 64 << 10) -> list[str]:
        """The last `n` lines (from at most the last `max_bytes`), decoded leniently and
        made safe for a terminal (`textsafe.display`: no escape sequences)."""
        with self._lock:
            data = self._tail_bytes(max_bytes)
            kept_before = len(self._head) if self._tail_len < max_bytes else 0
            if kept_before and self._total - len(self._head) == self._tail_len:
                data = bytes(self._head[-(max_bytes - len(data)):]) + data  # contiguous
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        return [terminal_line(raw) for raw in lines[-n:]] if n > 0 else []


    def tail(self, n_bytes: int) -> bytes:
        """The last n_bytes kept after the head (fewer when less was kept)."""
        with self._lock:
            return self._tail_bytes(n_bytes)

    def _tail_bytes(self, n_bytes: int) -> bytes:
        """`tail` with the lock held."""
        chunks: list[bytes] = []
        need = max(0, n_bytes)
        for chunk in reversed(self._tail):
            if need <= 0:
                break
            chunks.append(chunk[-need:] if len(chunk) > need else chunk)
            need -= len(chunks[-1])
        return b"".join(reversed(chunks))

    def text(self) -> str:
        """Everything kept, decoded leniently, with a marker where bytes were dropped."""
        with self._lock:
            head, tail = bytes(self._head), b"".join(self._tail)
            dropped = self._total - len(head) - len(tail)
        middle = f"\n[... {dropped:,} bytes of output dropped ...]\n".encode() if dropped else b""
        return (head + middle + tail).decode(errors="replace")

    # -- drain thread ----------------------------------------------------------------

    def _drain(self) -> None:
        """Read until EOF (every copy of the write end closed) or close(); never blocks
        on anything but the pipe."""
        fd = self._read_fd
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        left = -1  # bytes still to read once close() was asked (what the pipe held)
        try:
            while left != 0:
                stopping = self._stop.is_set()
                if stopping and left < 0:
                    left = STOP_BYTES  # a writer that keeps writing must not hold us here
                if not poller.poll(0 if stopping else POLL_MS):
                    if stopping:
                        return  # asked to stop and nothing left buffered
                    continue
                # EIO once every copy of the terminal's other end is closed and read
                data = os.read(fd, READ_BYTES if left < 0 else min(left, READ_BYTES))
                if not data:
                    return
                self._add(data)
                if left > 0:
                    left -= len(data)
        except OSError:
            return
        finally:
            os.close(fd)
            self._read_fd = -1

    def _add(self, data: bytes) -> None:
        with self._lock:
            self._total += len(data)
            self._newlines += data.count(b"\n")
            self._last = data[-1:]
            room = self.head_limit - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if not data:
                return
            if len(data) >= self.tail_limit:
                self._tail.clear()
                data = data[-self.tail_limit:] if self.tail_limit else b""
                self._tail_len = 0
            if data:
                self._tail.append(data)
                self._tail_len += len(data)
            excess = self._tail_len - self.tail_limit
            while excess > 0:
                first = self._tail[0]
                if len(first) <= excess:
                    self._tail.popleft()
                    self._tail_len -= len(first)
                    excess -= len(first)
                else:
                    self._tail[0] = first[excess:]
                    self._tail_len -= excess
                    excess = 0


def terminal_line(raw: bytes) -> str:
    """One line of output, safe to show: undecodable bytes and controls escaped
    (`textsafe.display`), tabs expanded on what is shown."""
    text = raw.decode("utf-8", "surrogateescape").rstrip("\r")
    return "\t".join(display(part) for part in text.split("\t")).expandtabs()
