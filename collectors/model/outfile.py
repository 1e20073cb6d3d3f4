"""Writing the files proftui produces (saved profiles, exports) safely.

One function, `write_output`, is used by `storage.save` and by every export
path (CLI and TUI), so they all behave alike:

* A regular file (or a new name) is replaced atomically: the bytes go to a
  temporary file that `tempfile.mkstemp` creates in the same directory
  (O_EXCL, a random name, mode 0600), are fsync'ed, then `os.replace`d over
  the name.  A symlink or file planted under a predictable name in a shared
  directory can neither redirect nor read the profile; the temporary file is
  removed on every failure path.
* A symlink is written through, like `cp` and `gcc -o`: its target is
  replaced and the link stays a link.
* A device or FIFO (`-o /dev/null`, `-o /dev/stdout`, a pipe) is written
  directly: it is never replaced by a regular file.  ENOSPC (`/dev/full`)
  and friends become one line.
* Permissions: a new file is 0600 whatever the umask, because a profile
  holds program paths, argv, symbol names and source text.  Replacing a
  regular file that we own keeps its permission bits (without execute bits):
  `chmod 644 run.proftui` once is how a user asks for a shareable file, as
  with editors and `cp` onto an existing file.  A file owned by someone else
  gives no such hint and is replaced by a 0600 one.
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


def resolve_output(path: str | os.PathLike[str]) -> Path:
    """The file a write to `path` lands in: symlinks followed (dangling ones too).

    ProftuiError for an empty name, a directory or a symlink loop.
    """
    if not os.fspath(path):  # a str: Path("") already means "."
        raise ProftuiError("empty output file name")
    try:
        real = Path(os.path.realpath(path, strict=False))
    except OSError as exc:  # a symlink loop (Python 3.13 raises instead of returning it)
        raise ProftuiError(f"{path}: cannot resolve: {_reason(exc)}") from None
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ProftuiError(f"{path}: cannot resolve: {_reason(exc)}") from None
        return real  # let the write report it (EACCES on a parent, ...)
    if stat.S_ISDIR(st.st_mode):
        raise ProftuiError(f"{path}: is a directory")
    return real


def check_output(path: str | os.PathLike[str]) -> None:
    """Fail early (ProftuiError, one line) when `path` cannot be written.

    Called before a target starts, so a run is never lost to a typo in `-o`.
    A regular file is probed by creating (and removing) a temporary file
    beside it, which catches read-only mounts and missing permissions alike;
    a device or FIFO is checked for write permission without opening it
    (opening a FIFO would wait for, or consume, its reader).
    """
    real = resolve_output(path)
    try:
        st = os.stat(real)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISSOCK(st.st_mode):
            raise ProftuiError(f"{path}: is a socket, not a file")
        if not os.access(real, os.W_OK):
            raise ProftuiError(f"{path}: cannot write: Permission denied")
        return
    directory = real.parent
    if not directory.is_dir():
        raise ProftuiError(f"{path}: cannot write: directory {directory} does not exist")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    os.close(fd)
    os.unlink(probe)


def _final_mode(existing: os.stat_result | None) -> int:
    if existing is not None and stat.S_ISREG(existing.st_mode) \
            and existing.st_uid == os.geteuid():
        return stat.S_IMODE(existing.st_mode) & 0o666
    return NEW_FILE_MODE


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_device(path: Path, real: Path, data: bytes) -> None:
    """Write into an existing non-regular file (device, FIFO) in place."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    try:
        _write_all(fd, data)
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    finally:
        os.close(fd)


def write_output(path: Path, data: bytes) -> Path:
    """Write `data` to `path` (see the module docstring); returns the file written.

    ProftuiError with a one-line reason on any failure; nothing is left behind.
    """
    real = resolve_output(path)
    try:
        existing: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        if stat.S_ISSOCK(existing.st_mode):
            raise ProftuiError(f"{path}: is a socket, not a file")
        _write_device(path, real, data)
        return real
    try:
        fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
    try:
        try:
            os.fchmod(fd, _final_mode(existing))
            _write_all(fd, data)
            os.fsync(fd)  # the data is on disk before the name points at it
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ProftuiError(f"{path}: cannot write: {_reason(exc)}") from None
        raise
    return real


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
