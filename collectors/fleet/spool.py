"""Batches until the server has them: in memory while the first attempt to send them
runs, then, if it failed, on disk in a private, bounded spool directory.

Each push session keeps its own directory under $XDG_CACHE_HOME/proftui/spool
(0700, every directory on the way checked as the symbol cache's are; a private
temporary directory when that one cannot be trusted), one file per batch
(`O_CREAT|O_EXCL|O_NOFOLLOW`, 0600), sent oldest first.  A batch the server took at
the first attempt is never written (the usual case: writing and encoding every
interval cost the push ~10% of its CPU).  When the files would pass `max_bytes`,
the oldest go first and are counted: what the bound dropped is said at the end of
the run and in the profile's notes.  A session that ended with batches unsent
leaves them (and the server they were for); the next session pushing to the same
server sends them too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from proftui.collectors.fleet.batch import Batch
from proftui.collectors.symbols.cachedir import CacheDir

DEFAULT_MAX_BYTES = 64 << 20
# The newest batches, up to this many bytes (as written), are also kept in memory: sent
# without reading them back.  An agent puts one batch per process each interval.
KEEP_DECODED_BYTES = 8 << 20
SUFFIX = ".batch"


@dataclass
class Spooled:
    path: Path  # its file (once written)
    size: int  # bytes of its file (0 until written)
    weight: float  # the batch's first-metric total (samples, bytes)
    # An insert of it may have landed: left by an earlier session, or an attempt
    # failed after sending it (looked up on the server before it is sent again).
    maybe_sent: bool = False
    batch: Batch | None = None  # kept decoded while few batches wait (the usual case)
    time: int = -1  # the batch's interval start (-1: unknown, an adopted file)
    rows: int = 0
    written: bool = True


def _open_private(path: Path, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class Spool:
    """The spool of one push session to one server (`server_key`: host:port/database)."""

    def __init__(self, server_key: str, max_bytes: int = DEFAULT_MAX_BYTES,
                 root: Path | None = None) -> None:
        self.max_bytes = max_bytes
        self.server_key = server_key
        self.warnings: list[str] = []
        self.dropped_batches = 0
        self.dropped_weight = 0.0
        self._queue: list[Spooled] = []
        self._bytes = 0
        self._decoded_bytes = 0  # of the batches kept in memory too
        self._seq = 0
        base = root
        if base is not None:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        else:
            cache_base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
            wanted = CacheDir(cache_base / "proftui" / "spool", cache_base, self.warnings,
                              what="spool directory")
            base = wanted.path if wanted.usable(create=True) else None
        self.shared_root = base  # where other sessions' spools are (None: a private temp)
        self.path = Path(tempfile.mkdtemp(prefix="push-", dir=base))  # 0700
        self._lock_fd = _open_private(self.path / "lock", os.O_CREAT | os.O_EXCL | os.O_RDWR)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fd = _open_private(self.path / "server", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        with os.fdopen(fd, "w") as f:
            f.write(server_key)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def pending_bytes(self) -> int:
        """Bytes of batches waiting.  Test seam."""
        return self._bytes

    def put(self, batch: Batch) -> None:
        """Queue `batch` as the newest, in memory: `write` puts it on disk if it was not
        sent at once."""
        self._seq += 1
        self._queue.append(Spooled(self.path / f"{self._seq:012d}{SUFFIX}", 0, batch.weight(),
                                   batch=batch, time=batch.time, rows=len(batch),
                                   written=False))

    def write(self) -> None:
        """Write every batch held only in memory (its send failed, or the session ends)
        to its file; drop the oldest past the bound."""
        for item in self._queue:
            if item.written or item.batch is None:
                continue
            data = item.batch.encode()
            fd = _open_private(item.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            item.size, item.written = len(data), True
            self._bytes += len(data)
            self._decoded_bytes += len(data)
        if self._decoded_bytes > KEEP_DECODED_BYTES:  # an outage: read back when sent
            for item in self._queue[:-1]:
                if item.batch is not None:
                    self._forget_decoded(item)
                    if self._decoded_bytes <= KEEP_DECODED_BYTES:
                        break
        while self._bytes > self.max_bytes and len(self._queue) > 1:
            old = self._queue.pop(0)
            self._forget_decoded(old)
            self._bytes -= old.size
            self.dropped_batches += 1
            self.dropped_weight += old.weight
            with contextlib.suppress(OSError):
                os.unlink(old.path)

    def items(self) -> list[Spooled]:
        """The waiting batches, oldest first."""
        return list(self._queue)

    def oldest(self) -> Spooled | None:
        return self._queue[0] if self._queue else None

    def load(self, item: Spooled) -> Batch:
        if item.batch is not None:
            return item.batch
        fd = _open_private(item.path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as f:
            return Batch.decode(f.read())

    def done(self, item: Spooled) -> None:
        """`item` is on the server (or unreadable): forget it."""
        if self._queue and self._queue[0] is item:
            self._queue.pop(0)
        else:
            self._queue.remove(item)
        self._forget_decoded(item)
        if item.written:
            self._bytes -= item.size
            with contextlib.suppress(OSError):
                os.unlink(item.path)
        item.batch = None

    def _forget_decoded(self, item: Spooled) -> None:
        """`item` is read back from its file when sent (or is gone): its batch's memory
        goes."""
        if item.batch is not None and item.written:
            item.batch = None
            self._decoded_bytes -= item.size

    def adopt(self) -> int:
        """Take over the batches other ended sessions left for the same server (sent
        before this session's own); how many."""
        if self.shared_root is None:
            return 0
        taken: list[Spooled] = []
        for other in sorted(self.shared_root.glob("push-*")):
            if other == self.path or not other.is_dir() or other.is_symlink():
                continue
            try:
                lock = _open_private(other / "lock", os.O_RDWR)
            except OSError:
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its session has ended
                key_fd = _open_private(other / "server", os.O_RDONLY)
                with os.fdopen(key_fd) as f:
                    if f.read() != self.server_key:
                        continue
                for path in sorted(other.glob(f"*{SUFFIX}")):
                    st = os.lstat(path)
                    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                        continue
                    self._seq += 1
                    mine = self.path / f"{self._seq:012d}{SUFFIX}"
                    os.rename(path, mine)
                    taken.append(Spooled(mine, st.st_size, 0.0, maybe_sent=True))
                shutil.rmtree(other, ignore_errors=True)
            except OSError:
                continue
            finally:
                os.close(lock)
        self._queue[:0] = taken
        self._bytes += sum(t.size for t in taken)
        return len(taken)

    def close(self) -> bool:
        """End the session: remove the directory when nothing is left in it (True), else
        write and keep the files for a later session (what cannot be written is lost:
        the caller wrote first, to say why)."""
        with contextlib.suppress(OSError):
            self.write()
        os.close(self._lock_fd)
        if self._queue:
            return False
        shutil.rmtree(self.path, ignore_errors=True)
        return True


def server_key(host: str, port: int, database: str) -> str:
    """What identifies a push target in a spool (no credentials)."""
    return f"{host}:{port}/{database}"

