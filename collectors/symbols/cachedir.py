"""The symbol cache directory, trusted only when nobody else can write to it.

SymCaches in it decide which source files a profile names (and so embeds):
a cache in a directory another user can write to could be poisoned.  Every
directory from the cache base ($XDG_CACHE_HOME or ~/.cache) down must be a
real directory (no symlink below the base) owned by us or root and not
writable by group or others; missing ones are created 0700.  A directory
that fails is not used at all (one warning), and proftui reads symbols from
the binaries each run instead.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def default_cache_dir() -> tuple[Path, Path]:
    """(the base, the symbol cache under it): $XDG_CACHE_HOME/proftui/symbols."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))
    return base, base / "proftui" / "symbols"


def entry_key(build_id: str | None, path: str) -> str | None:
    """The name (without suffix) of the cache entries of an ELF file: its build-id, or,
    without one, a hash of `path`'s real path, size and mtime; None if `path` is gone."""
    if build_id:
        return build_id
    try:
        st = os.stat(path)
    except OSError:
        return None
    import hashlib  # rarely needed: not at every start

    return "nobuildid-" + hashlib.sha256(
        f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:32]


def own_regular_file(path: Path) -> bool:
    """A regular file of ours (entries are trusted only so, in a private CacheDir)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def _problem(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class CacheDir:
    """`path`, checked (and created) from `base` down before each use."""

    def __init__(self, path: Path, base: Path | None = None,
                 warnings: list[str] | None = None, what: str = "symbol cache") -> None:
        self.path = path
        self.what = what
        self.base = base if base is not None and path.is_relative_to(base) else path
        self._warnings = warnings if warnings is not None else []
        self._refused = False

    def _chain(self) -> list[Path]:
        parts = [self.base]
        for name in self.path.relative_to(self.base).parts:
            parts.append(parts[-1] / name)
        return parts

    def usable(self, create: bool = False) -> bool:
        """Whether the directory exists (or was created, with `create`) and is private."""
        if self._refused:
            return False
        for i, directory in enumerate(self._chain()):
            try:
                # The base may be a symlink (~/.cache -> elsewhere); nothing below it may.
                st = os.stat(directory) if i == 0 else os.lstat(directory)
            except FileNotFoundError:
                if not create:
                    return False
                try:
                    os.mkdir(directory, 0o700)
                    st = os.lstat(directory)
                except OSError:
                    return False  # a read-only home: no cache, no warning needed
            except OSError:
                return False
            problem = _problem(directory, st)
            if problem is not None:
                self._refused = True
                self._warnings.append(f"{self.what} not used: {problem}")
                return False
        return True

    def entry(self, name: str) -> Path:
        return self.path / name
