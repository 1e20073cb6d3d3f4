"""Which source files proftui may read from disk, for the source pane (`source_text`)
and for the text `storage.save` embeds in a profile.

A path named by debug info is attacker-controlled (a target's DWARF can name
/etc/shadow, a FIFO or a device), and a saved profile travels to other
people.  So a source file is read only when:

* the debug info read by this process named it, and it lies under a root of
  the module that named it: a unit's compile directory (DW_AT_comp_dir) or
  the directory of its primary source file (DW_AT_name; out-of-tree builds
  compile in build/ and name ../src/x.c).  `ORIGINS` records both (the
  symbolizer reports them), symlinks are resolved before the comparison;
* the profiled process's owner could read it: for a launched target that is
  proftui's own identity, for an attached process the real uid and groups in
  its /proc/PID/status, checked with mode bits on the file and search
  permission on every directory above it (a file with an ACL is refused
  when the owner is not us: its bits do not tell);
* it is a regular file (opened O_NOFOLLOW|O_NONBLOCK, fstat S_ISREG: a FIFO
  never blocks proftui) of at most MAX_SOURCE_READ bytes, without NUL bytes.

The source pane also shows files of profiles read from disk, which no
symbolizer of this process has seen (`need_origin=False`): that is the
user reading their own files for themselves, so only the regular-file and
reader checks apply, and only when the reader is proftui's own identity.

A file every user of this machine may read leaks nothing, wherever it lies and
whoever profiled: C++ template code costs in system headers
(/usr/include/c++/12/bits/stl_tree.h), libc's sources under /usr/src.  So a
regular file readable by others, every directory above it searchable by
others and none of them with an ACL (whose named entries can refuse someone
what others get), is read and embedded without the checks above.  Kernel
pseudo-files (/proc, /sys, /dev) are never read: their text is the reading
process's state, not a source file's.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass

from proftui.collectors.model.profile import Profile
from proftui.collectors.procfs import proc_status, status_ints

MAX_SOURCE_READ = 4 << 20  # bytes: a bigger file is not read (generated code)
PSEUDO = ("/proc/", "/sys/", "/dev/")  # kernel pseudo-files: no source text there
_ACL_XATTR = "system.posix_acl_access"


@dataclass(frozen=True, slots=True)
class Reader:
    """The identity whose permissions decide what may be read: uid, gid, groups."""

    uid: int
    gid: int
    groups: frozenset[int]


def own_reader() -> Reader:
    """proftui's own effective identity (the owner of every target it launches)."""
    return Reader(os.geteuid(), os.getegid(), frozenset(os.getgroups()) | {os.getegid()})


def process_reader(pid: int) -> Reader | None:
    """The real uid, real gid and groups of process `pid` (None if unknown)."""
    fields = proc_status(pid)
    uids, gids = status_ints(fields, "Uid"), status_ints(fields, "Gid")
    if not uids or not gids:
        return None
    return Reader(uids[0], gids[0], frozenset(status_ints(fields, "Groups")) | {gids[0]})


class SourceOrigins:
    """Source paths named by debug info read in this process, and their modules' roots.

    Roots are computed lazily (a DWARF walk per module) the first time a path
    of that module is read; symbolizers only note names, which is cheap.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modules: dict[str, Callable[[], frozenset[str]]] = {}
        self._roots: dict[str, frozenset[str]] = {}
        self._paths: dict[str, set[str]] = {}  # source path -> module keys
        self._readers: dict[int, Reader] = {}

    def note_module(self, key: str, roots: Callable[[], frozenset[str]]) -> None:
        """Module `key` (its debug file) has roots `roots()` (called at most once)."""
        with self._lock:
            self._modules.setdefault(key, roots)

    def note_path(self, path: str, key: str) -> None:
        """The debug info of module `key` named source `path`."""
        keys = self._paths.get(path)
        if keys is None or key not in keys:
            with self._lock:
                self._paths.setdefault(path, set()).add(key)

    def named(self, path: str) -> bool:
        """Whether debug info read in this process named `path`."""
        with self._lock:
            return bool(self._paths.get(path))

    def roots(self, path: str) -> frozenset[str] | None:
        """The roots `path` may lie under; None when no debug info named it."""
        with self._lock:
            keys = list(self._paths.get(path, ()))
        if not keys:
            return None
        found: set[str] = set()
        for key in keys:
            roots = self._roots.get(key)
            if roots is None:
                compute = self._modules.get(key)
                try:
                    roots = compute() if compute is not None else frozenset()
                except Exception:  # a malformed debug file gives no roots, not a crash
                    roots = frozenset()
                self._roots[key] = roots
            found |= roots
        return frozenset(found)

    def note_process(self, pid: int, reader: Reader | None) -> None:
        """Remember the owner of `pid` while it runs (attach reads it after the exit)."""
        if reader is not None:
            with self._lock:
                self._readers[pid] = reader

    def reader(self, pid: int) -> Reader | None:
        with self._lock:
            found = self._readers.get(pid)
        return found if found is not None else process_reader(pid)


# Process-wide on purpose: every symbolizer of this proftui process feeds the
# same views and the same `save`, and the model cannot reach the symbolizers.
ORIGINS = SourceOrigins()


def reader_of(mode: str, pids: list[int]) -> Reader | None:
    """Whose permissions apply to a profile of `mode` over `pids` (None: nobody's)."""
    if mode == "attach":
        return ORIGINS.reader(pids[0]) if pids else None
    return own_reader()


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _may_read(reader: Reader, st: os.stat_result, want: int) -> bool:
    """POSIX permission bits: `want` is 4 (read) or 1 (search)."""
    if reader.uid == 0:
        return True  # root reads any file and searches any directory (DAC override)
    if reader.uid == st.st_uid:
        return bool((st.st_mode >> 6) & want)
    if st.st_gid in reader.groups:
        return bool((st.st_mode >> 3) & want)
    return bool(st.st_mode & want)


def _has_acl(target: int | str) -> bool:
    try:
        os.getxattr(target, _ACL_XATTR)
    except OSError:
        return False
    return True


def _every_directory_above(real: str, allows: Callable[[str, os.stat_result], bool]) -> bool:
    """Whether `allows(directory, its stat)` holds for every directory above `real`."""
    directory = os.path.dirname(real)
    while True:
        try:
            dst = os.stat(directory)
        except OSError:
            return False
        if not allows(directory, dst):
            return False
        parent = os.path.dirname(directory)
        if parent == directory:
            return True
        directory = parent


def _reader_can_read(real: str, fd: int, st: os.stat_result, reader: Reader) -> bool:
    if not _may_read(reader, st, 4) or (reader.uid != 0 and _has_acl(fd)):
        return False
    return _every_directory_above(real, lambda directory, dst: _may_read(reader, dst, 1) and (
        reader.uid == 0 or not _has_acl(directory)))


def _public(real: str, fd: int, st: os.stat_result) -> bool:
    """Whether every user may read the file `real` (open as `fd`): readable by others,
    every directory above searchable by others, no ACL on any of them."""
    if not st.st_mode & stat.S_IROTH or _has_acl(fd):
        return False
    return _every_directory_above(real, lambda directory, dst: bool(
        dst.st_mode & stat.S_IXOTH) and not _has_acl(directory))


def read_source(path: str, reader: Reader | None, *, need_origin: bool = True) -> str | None:
    """The text of source file `path`, or None when the rules above refuse it."""
    if not os.path.isabs(path):
        return None  # a relative name would be read from proftui's working directory
    own = reader is not None and reader == own_reader()
    # Origin first: a name no debug info gave is not even opened unless everyone may read
    # it, and whether they may is known only once it is open.
    gated = reader is None or ((need_origin or not own) and not ORIGINS.named(path))
    try:
        real = os.path.realpath(path)
        if real.startswith(PSEUDO) or not stat.S_ISREG(os.stat(real).st_mode):
            return None  # not a file on disk: never opened (a device may act on open)
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_READ:
            return None
        # The file opened is the one checked: no directory was swapped for a symlink since.
        if os.readlink(f"/proc/self/fd/{fd}") != real:
            return None
        if not _public(real, fd, st):
            if gated or reader is None:
                return None
            # Roots last: computing them walks a module's DWARF, worth it only for a file.
            roots = ORIGINS.roots(path)
            if roots is not None and not any(_under(real, os.path.realpath(root))
                                             for root in roots if os.path.isabs(root)):
                return None
            if not own and not _reader_can_read(real, fd, st, reader):
                return None
        data = os.read(fd, MAX_SOURCE_READ + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > MAX_SOURCE_READ or b"\0" in data:
        return None  # grew past the bound, or not a text file
    return data.decode("utf-8", errors="replace")


def source_text(profile: Profile, path: str) -> list[str] | None:
    """Lines of `path` for a listing of `profile`: the text embedded in the profile, else
    the file on disk when the rules above allow reading it, else None."""
    text = profile.sources.get(path)
    if text is None:
        text = read_source(path, reader_of(profile.meta.mode, profile.meta.pids),
                           need_origin=False)
        if text is None:
            return None
    return text.splitlines()
