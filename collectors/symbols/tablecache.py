"""Function tables of ELF files, kept in the symbol cache directory between runs.

Building a module's table (.symtab, or .dynsym, MiniDebugInfo and .eh_frame FDEs when
stripped, plus PLT stubs) costs 10-25 ms per big library (libc, libstdc++) in every
run that symbolizes it; read back from here it costs about 1 ms.  An entry is named by
the module's cache key (cachedir.entry_key: its build-id) and holds the size and mtime
of the files the table was read from, the module's base name (FDE rows are named
after it) and the size and mtime of the modules that build tables (BUILDERS: a table
built by other code is not this code's table); it is used only while all of those
still match, and only from a CacheDir that nobody else can write.  A damaged entry
is ignored (and rebuilt), never raised.  A module's alias table (the addresses with
more than one function name, for inlined code shown under another name) is an entry of
the same format, `KEY.aliases`, one row per (address, name), sizes 0.

Entry format, native-endian: MAGIC, then u32 header length, a JSON header
{"n": rows, "names": bytes of names, "minidebug": bool, "base": str, "sources":
[[path, size, mtime_ns], ...], "builders": the same of BUILDERS}, then n u64
starts, n u64 sizes, and the n raw names joined by NUL (UTF-8, surrogateescape).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from array import array
from functools import cache
from pathlib import Path

from proftui.collectors.symbols.cachedir import CacheDir, own_regular_file
from proftui.collectors.symbols.functable import CompactTable, Names

MAGIC = b"PTFTAB1\0"
SUFFIX = ".functions"
_LENGTH = struct.Struct("=I")
MAX_HEADER = 1 << 16
# The modules whose code decides what a table holds (beside this one).
BUILDERS = ("symbolizer.py", "stripped.py", "elf.py", "tablecache.py", "functable.py")


def sources_of(paths: list[str]) -> list[list[object]] | None:
    """[[path, size, mtime_ns], ...] of `paths` now; None if one cannot be read."""
    out: list[list[object]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        out.append([path, st.st_size, st.st_mtime_ns])
    return out


@cache
def builders() -> list[list[object]]:
    """[[name, size, mtime_ns], ...] of BUILDERS as installed."""
    here = Path(__file__).parent
    found = sources_of([str(here / name) for name in BUILDERS]) or []
    return [[Path(str(entry[0])).name, *entry[1:]] for entry in found]


def load(cache: CacheDir | None, key: str, sources: list[list[object]],
         base: str) -> tuple[CompactTable, bool] | None:
    """(table, minidebug) of entry `key` if it was built from `sources` (as they are
    now) for a module named `base`; None when missing, stale or damaged."""
    if cache is None or not cache.usable():
        return None
    path = cache.entry(key + SUFFIX)
    if not own_regular_file(path):
        return None
    try:
        # Read part by part: the whole file and copies of its parts at once took three
        # times the table's own size (libclickhouse.so's: 21.5 MiB at peak for 7.0).
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(len(MAGIC)) != MAGIC:
                return None
            (length,) = _LENGTH.unpack(f.read(_LENGTH.size))
            if length > MAX_HEADER:
                return None
            header = json.loads(f.read(length))
            n, names_len = int(header["n"]), int(header["names"])
            if header["sources"] != sources or header["base"] != base \
                    or header["builders"] != builders() \
                    or size != len(MAGIC) + _LENGTH.size + length + 16 * n + names_len:
                return None
            starts, sizes = array("Q"), array("Q")
            starts.fromfile(f, n)
            sizes.fromfile(f, n)
            blob = f.read(names_len)
        if len(blob) != names_len:
            return None
        names = Names(blob, n)  # ValueError: another count of names
        return (starts, sizes, names), bool(header["minidebug"])
    except (OSError, EOFError, ValueError, KeyError, TypeError, struct.error,
            UnicodeDecodeError):
        return None


def save(cache: CacheDir | None, key: str, sources: list[list[object]], base: str,
         table: CompactTable, minidebug: bool) -> None:
    """Write entry `key` (0600, atomically); quietly nothing where it cannot be."""
    if cache is None or not cache.usable(create=True):
        return
    starts, sizes, names = table
    blob = names.blob
    header = json.dumps({"n": len(starts), "names": len(blob), "minidebug": minidebug,
                         "base": base, "sources": sources,
                         "builders": builders()}).encode()
    path = cache.entry(key + SUFFIX)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp made it 0600
                f.write(MAGIC + _LENGTH.pack(len(header)) + header)
                f.write(starts.tobytes())
                f.write(sizes.tobytes())
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, OverflowError):
        pass  # the cache is an optimisation; a read-only home must not fail a profile
