"""perf map files: names a JIT or interpreter gives the code it generates.

CPython 3.12+ (`-X perf`), Node (`--perf-basic-prof`), JVM agents and .NET write
`/tmp/perf-PID.map`, one line per piece of generated code: `START SIZE name` (hex
START and SIZE).  An address no ELF mapping covers is looked up there and shown
as the runtime named it, in module `[jit]`.

The file lives in /tmp, so anyone could have planted it: it is opened with
O_NOFOLLOW, and used only if it is a regular file owned by the target's user,
not writable by group or others, and not last written before the process
started (a file left by an earlier process with the same pid).  Its lines are
data, never trusted over the ELF symbols: an entry whose range overlaps a
file-backed mapping is ignored.  Whatever is wrong with a file (owner, mode, a
symlink, its age, malformed lines, entries over real code, its size) is said in
one warning per file, never raised.

A target in another mount namespace (a container) wrote the file in its own
/tmp under the pid it has in its own pid namespace: it is read through
/proc/PID/root, as perf does (`JitPlace`).
"""

from __future__ import annotations

import bisect
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from proftui.collectors.procfs import proc_status, status_ints

PERF_MAP = "/tmp/perf-{pid}.map"
MAX_BYTES = 64 << 20  # a map larger than this is read this far
MAX_NAME = 512  # longer names are cut
RECHECK_S = 0.1  # a miss re-reads a growing file at most this often
_CONTROL = dict.fromkeys(range(32), "?")  # control characters in names (str.translate)
STALE_SLACK_S = 1.0  # a file last written this long before the process started is stale


@dataclass(frozen=True)
class JitPlace:
    """Where a process writes its perf map and jitdump files: `root` ("" for our own
    mount namespace, else /proc/PID/root), the pid it knows itself by (`ns_pid`), and
    when it started (epoch seconds; None when unknown: files are then not aged)."""

    root: str
    ns_pid: int
    started: float | None

    def tmp_path(self, pattern: str) -> str:
        """`pattern` ("/tmp/perf-{pid}.map") for this process, seen from here."""
        return self.root + pattern.format(pid=self.ns_pid)

    def path(self, target_path: str) -> str:
        """A path as the process names it (a mapping's), seen from here."""
        return self.root + target_path


def jit_place(pid: int, alive: bool = True) -> JitPlace:
    """The JitPlace of process `pid` (`alive` False: it ended, its pid maybe reused:
    our namespace and no start time)."""
    if not alive:
        return JitPlace("", pid, None)
    root = ""
    try:
        if os.stat(f"/proc/{pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino:
            root = f"/proc/{pid}/root"
    except OSError:
        pass
    ns_pid = (status_ints(proc_status(pid), "NSpid") or [pid])[-1]
    return JitPlace(root, ns_pid, process_started(pid))


def process_started(pid: int) -> float | None:
    """When process `pid` started (epoch seconds, to a clock tick), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        ticks = int(data[data.rindex(b")") + 2:].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


class PerfMap:
    """The perf map of one process, read incrementally as it grows.

    `uid`: the user the target runs as (the file's owner must be that user);
    `overlaps(start, end)`: whether a range touches a file-backed mapping (such
    entries are ignored).
    """

    KIND = "perf map"  # how warnings name the file

    def __init__(self, pid: int, uid: int, overlaps: Callable[[int, int], bool],
                 path: str | None = None, place: JitPlace | None = None) -> None:
        place = place or JitPlace("", pid, None)
        self.path = path or place.tmp_path(PERF_MAP)
        self._uid, self._overlaps, self._started = uid, overlaps, place.started
        self._in_root = bool(place.root)  # read through /proc/PID/root
        self._offset = 0  # bytes read so far (whole lines only)
        self._entries: dict[int, tuple[int, str]] = {}  # start -> (size, name); last wins
        self._starts: list[int] = []
        self._stale = False
        self._checked = 0.0  # monotonic time of the last look at the file
        self._size = -1  # the file's size at that look
        self._refused = ""  # why the file is not to be trusted ("": it is); never read again
        self._bad = self._over = 0  # malformed lines, entries over file-backed code
        self._cut = False  # larger than MAX_BYTES
        self._news = False  # entries were added since the last grew()

    def lookup(self, address: int) -> tuple[int, str] | None:
        """(start, name) of the entry holding runtime `address`, or None."""
        found = self._find(address)
        if found is None and self._update():
            found = self._find(address)
        return found

    def grew(self) -> bool:
        """Whether entries were added since the last call, reading what the file gained
        first (a cheap lstat when it did not change): stacks that missed before may
        resolve now.  A lookup's own read counts too, so that the stacks which missed
        before it are looked at again."""
        if not self._refused:
            try:
                size = os.stat(self.path, follow_symlinks=False).st_size
            except OSError:
                size = self._size
            if size != self._size and size > self._offset:
                self._update(force=True)
        news, self._news = self._news, False
        return news

    def _find(self, address: int) -> tuple[int, str] | None:
        if self._stale:
            self._starts = sorted(self._entries)
            self._stale = False
        i = bisect.bisect_right(self._starts, address) - 1
        for j in range(i, max(i - 16, -1), -1):  # a few back: entries may nest or overlap
            start = self._starts[j]
            size, name = self._entries[start]
            if address < start + size:
                if self._overlaps(start, start + size):  # a mapping added since it was read
                    del self._entries[start]
                    self._stale = True
                    self._over += 1
                    return None
                return start, name
        return None

    def _update(self, force: bool = False) -> bool:
        """Read what was added since the last read (at most every RECHECK_S unless
        `force`); True if entries were added."""
        now = time.monotonic()
        if self._refused or (now - self._checked < RECHECK_S and not force):
            return False
        self._checked = now
        if self._in_root and not self._dir_is_real():
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                         | os.O_NOCTTY)
        except FileNotFoundError:
            return False
        except OSError as exc:  # ELOOP: a symlink someone planted
            self._refuse(f"cannot be opened safely ({exc.strerror})")
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                self._refuse("is not a regular file")
                return False
            if st.st_uid != self._uid:
                self._refuse(f"is owned by uid {st.st_uid}, not the target's ({self._uid})")
                return False
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                self._refuse(f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})")
                return False
            if self._started is not None and st.st_mtime < self._started - STALE_SLACK_S:
                self._refuse(f"was last written {self._started - st.st_mtime:.0f} s before "
                             "the process started (left by an earlier process with its pid)")
                return False
            if st.st_size <= self._offset or st.st_size == self._size:
                return False
            self._size = st.st_size
            end = min(st.st_size, MAX_BYTES)
            self._cut = st.st_size > MAX_BYTES
            data = os.pread(fd, max(0, end - self._offset), self._offset)
        except OSError:
            return False
        finally:
            os.close(fd)
        return self._consume(data)

    def _consume(self, data: bytes) -> bool:
        """Take what `data` (read at self._offset) holds whole; True if entries were added."""
        whole = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self._offset += whole
        return self._parse(data[:whole])

    def _parse(self, data: bytes) -> bool:
        added = False
        for line in data.split(b"\n"):
            if not line:
                continue
            parts = line.split(None, 2)
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
                name = parts[2].decode("utf-8", "replace").strip().translate(_CONTROL)
            except (IndexError, ValueError):
                self._bad += 1
                continue
            added = self._add(start, size, name) or added
        self._stale = self._stale or added
        return added

    def _add(self, start: int, size: int, name: str) -> bool:
        """Keep one entry unless it is malformed or lies over file-backed code (both
        counted for the warning); whether it was kept."""
        if size <= 0 or start <= 0 or start + size >= 1 << 64 or not name:
            self._bad += 1
        elif self._overlaps(start, start + size):
            self._over += 1
        else:
            self._entries[start] = (size, name[:MAX_NAME])
            self._news = True
            return True
        return False

    def _dir_is_real(self) -> bool:
        """Whether the file's folder in the target's root is a folder, not a symlink
        (which the kernel would resolve in our root, not the target's)."""
        try:
            if stat.S_ISDIR(os.lstat(os.path.dirname(self.path)).st_mode):
                return True
        except OSError:
            return False  # not there (yet): looked at again later
        self._refuse("lies in a folder that is a symlink in the target's root")
        return False

    def _refuse(self, why: str) -> None:
        self._refused = why
        self._entries.clear()
        self._stale = True

    def warning(self) -> str | None:
        """What was wrong with the file, in one line; None when nothing was."""
        if self._refused:
            return f"{self.KIND} {self.path} {self._refused}: not used (JIT code stays unnamed)"
        problems = self._problems()
        return f"{self.KIND} {self.path}: {'; '.join(problems)}" if problems else None

    def _problems(self) -> list[str]:
        problems = []
        if self._bad:
            problems.append(f"{self._bad} malformed line{'s' * (self._bad > 1)} ignored")
        if self._over:
            problems.append(f"{self._over} entr{'ies' if self._over > 1 else 'y'} over "
                            "file-backed code ignored (the ELF symbols name it)")
        if self._cut:
            problems.append(f"only its first {MAX_BYTES >> 20} MiB read")
        return problems


def process_uid(pid: int) -> int:
    """The effective uid `pid` runs as (ours when /proc cannot say: we launched it)."""
    uids = status_ints(proc_status(pid), "Uid")
    return uids[1] if len(uids) > 1 else os.geteuid()
