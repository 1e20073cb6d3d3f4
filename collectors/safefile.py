"""The files proftui writes for itself, written safely: one function, `write_output`,
that every writer calls (`record -o` and saved profiles, `export -o`, the TUI's save
dialog, the settings file), and `read_regular` for the files it reads back.

* A new name, or a regular file, is replaced atomically in the directory the user
  named (not the one a symlink leads to): the bytes go to a temporary file that
  `tempfile.mkstemp` creates there (O_EXCL, a random name, mode 0600), are fsync'ed,
  then `os.replace`d over the name.  A symlink or file planted under a predictable
  name in a shared directory can neither redirect nor read the profile.
* A symlink is written through, as `cp` does (the file it leads to is written in
  place), except where the kernel's fs.protected_symlinks would refuse to follow it:
  a link in a sticky world-writable directory (/tmp) owned by neither us nor the
  directory's owner.  Following it would let that user aim our write at any file we
  can write, so it is refused.
* A device or FIFO (`-o /dev/null`, `-o /dev/stdout`, a pipe) is written in place,
  opened without blocking: a FIFO nobody reads is refused at once rather than waited
  for (a blocked open ignores SIGTERM and keeps the TUI from quitting).  Callers
  that want a file (`regular_only`: the TUI's save dialog, settings) refuse them.
* Permissions: a new file is 0600 whatever the umask (a profile holds paths, argv,
  symbol names and source text); replacing a regular file of ours keeps its
  permission bits (without execute bits): `chmod 644 run.proftui` once is how a
  user asks for a shareable file, as with editors and `cp`.

Every failure is a ProftuiError with one line; nothing is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from proftui.collectors.errors import ProftuiError

NEW_FILE_MODE = 0o600


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _refused_symlink(path: str) -> str | None:
    """Why following the symlink `path` is refused (fs.protected_symlinks' rule), or None."""
    directory = os.path.dirname(path) or "."
    try:
        link, parent = os.lstat(path), os.stat(directory)
    except OSError:
        return None  # gone meanwhile: the write says what is wrong
    euid = os.geteuid()
    shared = parent.st_mode & stat.S_ISVTX and parent.st_mode & stat.S_IWOTH
    if shared and link.st_uid not in (euid, parent.st_uid):
        return (f"{path}: refusing to follow a symlink owned by uid {link.st_uid} in the "
                f"sticky world-writable directory {directory} (the kernel's "
                "fs.protected_symlinks rule)")
    return None


def _kind(path: str) -> tuple[str, os.stat_result | None]:
    """("new" | "regular" | "symlink" | "special", stat of the name itself);
    ProftuiError for what is never written: a directory, a socket, a symlink the
    protected_symlinks rule refuses."""
    if not path:
        raise ProftuiError("empty output file name")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "new", None
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    if stat.S_ISLNK(st.st_mode):
        refused = _refused_symlink(path)
        if refused:
            raise ProftuiError(refused)
        return "symlink", st
    if stat.S_ISDIR(st.st_mode):
        raise ProftuiError(f"{path}: is a directory")
    if stat.S_ISSOCK(st.st_mode):
        raise ProftuiError(f"{path}: is a socket, not a file")
    return ("regular" if stat.S_ISREG(st.st_mode) else "special"), st


def _open_in_place(path: str, regular_only: bool) -> int:
    """An fd to write `path` through (a symlink followed, a device or FIFO), opened
    without blocking; ProftuiError (one line) for what must not be written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                     NEW_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise ProftuiError(f"{path}: a FIFO with no reader (proftui does not wait for "
                               "one)") from None
        if exc.errno == errno.ELOOP:
            raise ProftuiError(f"{path}: cannot resolve: {_reason(exc)}") from None
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISSOCK(st.st_mode) or stat.S_ISDIR(st.st_mode):
            raise ProftuiError(f"{path}: not a file")
        if regular_only and not stat.S_ISREG(st.st_mode):
            raise ProftuiError(f"{path}: not a regular file")
        os.set_blocking(fd, True)  # a reader is there: wait for it like any writer
        if stat.S_ISREG(st.st_mode):
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _final_mode(existing: os.stat_result | None) -> int:
    if existing is not None and stat.S_ISREG(existing.st_mode) \
            and existing.st_uid == os.geteuid():
        return stat.S_IMODE(existing.st_mode) & 0o666
    return NEW_FILE_MODE


def write_output(path: str | os.PathLike[str], data: bytes, *,
                 regular_only: bool = False) -> Path:
    """Write `data` to `path` (see the module docstring); returns the path written.

    `regular_only`: refuse devices and FIFOs (the TUI's save dialog, settings).
    ProftuiError with a one-line reason on any failure; nothing is left behind.
    """
    name = os.fspath(path)
    kind, existing = _kind(name)
    if kind in ("symlink", "special"):
        with contextlib.suppress(OSError):  # a dangling link: created through it
            if regular_only and not stat.S_ISREG(os.stat(name).st_mode):
                raise ProftuiError(f"{name}: not a regular file")
        fd = _open_in_place(name, regular_only)
        try:
            _write_all(fd, data)
        except OSError as exc:
            raise ProftuiError(f"{name}: cannot write: {_reason(exc)}") from None
        finally:
            os.close(fd)
        return Path(name)
    directory = os.path.dirname(name) or "."
    base = os.path.basename(name)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{base}.", suffix=".tmp")
    except OSError as exc:
        raise ProftuiError(f"{name}: cannot write: {_reason(exc)}") from None
    try:
        try:
            os.fchmod(fd, _final_mode(existing))
            _write_all(fd, data)
            os.fsync(fd)  # the data is on disk before the name points at it
        finally:
            os.close(fd)
        os.replace(tmp, name)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ProftuiError(f"{name}: cannot write: {_reason(exc)}") from None
        raise
    return Path(name)


def check_output(path: str | os.PathLike[str]) -> None:
    """Fail early (ProftuiError, one line) when `path` cannot be written.

    Called before a target starts, so a run is never lost to a typo in `-o`.  A new
    or regular file is probed by creating (and removing) a temporary file in its
    directory, which catches read-only mounts and missing permissions alike; a
    symlink is checked against the protected_symlinks rule; a device or FIFO is
    checked for write permission without opening it (opening a FIFO would take, or
    wait for, its reader).
    """
    name = os.fspath(path)
    kind, _ = _kind(name)
    if kind == "symlink":
        try:
            os.stat(name)
        except FileNotFoundError:
            return  # dangling: the write creates its target, as cp does
        except OSError as exc:
            raise ProftuiError(f"{name}: cannot resolve: {_reason(exc)}") from None
    if kind in ("symlink", "special"):
        if not os.access(name, os.W_OK):
            raise ProftuiError(f"{name}: cannot write: Permission denied")
        return
    directory = os.path.dirname(name) or "."
    if not os.path.isdir(directory):
        raise ProftuiError(f"{name}: cannot write: directory {directory} does not exist")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(name)}.",
                                     suffix=".tmp")
    except OSError as exc:
        raise ProftuiError(f"{name}: cannot write: {_reason(exc)}") from None
    os.close(fd)
    os.unlink(probe)


def write_fallback(data: bytes, directories: list[Path], stem: str) -> Path | None:
    """Write `data` to a new file `<stem>-<random>.proftui` in the first of
    `directories` that takes it (created O_EXCL, 0600); None when none does."""
    for directory in directories:
        try:
            fd, name = tempfile.mkstemp(dir=directory, prefix=f"{stem}-", suffix=".proftui")
        except OSError:
            continue
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
            continue
        return Path(name)
    return None


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """Up to `limit` + 1 bytes of the regular file `path`, opened without blocking (a
    FIFO there must not stall the reader); FileNotFoundError when it does not exist,
    ProftuiError (one line) when it is not a regular file or cannot be read."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ProftuiError(f"{name}: cannot read: {_reason(exc)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProftuiError(f"{name}: not a regular file")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ProftuiError(f"{name}: cannot read: {_reason(exc)}") from None
    finally:
        os.close(fd)
