"""Open any profile file proftui understands, recognised by content, not by name.

`load_any(path)` accepts proftui's own saved profiles (gzip JSON, see
collectors/model/storage.py), pprof profiles (gzip'd or raw profile.proto, as
proftui's export, Go and `go tool pprof -proto` write them), gperftools CPU
profiles (binary header 0, 3, 0 in machine words), the text output of
`perf script`, gmon.out files (with the program that wrote them), gperftools
heap profiles (text, "heap profile:") and heaptrack data files (through
heaptrack_print).
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Callable
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile

# The importers are imported when a file of theirs is met, not for every file: a
# .proftui is read without loading the others (and pyelftools behind them).
_GZIP_MAGIC = b"\x1f\x8b"
_PERF_DATA_MAGIC = (b"PERFILE2", b"2ELIFREP")
SNIFF_BYTES = 64 * 1024  # what `load_any` reads to detect a file (perf_script.SNIFF_BYTES)


def _loader(kind: str) -> Callable[[Path], Profile] | None:
    """The loader of a file of `kind` (`detect`), or None (a gmon.out needs its program)."""
    if kind == "proftui":
        return storage.load
    if kind == "pprof":
        from proftui.collectors.formats.importers import pprof
        return pprof.load_pprof
    if kind == "gperftools":
        from proftui.collectors.formats.importers import gperftools
        return gperftools.load_gperftools
    if kind == "gperftools-heap":
        from proftui.collectors.formats.importers import gperftools_heap
        return gperftools_heap.load_gperftools_heap
    if kind == "heaptrack":
        from proftui.collectors.formats.importers import heaptrack
        return heaptrack.load_heaptrack
    if kind == "perf-script":
        from proftui.collectors.formats.importers import perf_script
        return perf_script.load_perf_script
    return None


def _is_proftui(head: bytes) -> bool:
    """A file proftui saved (version 2): gzip data starting with storage.MAGIC."""
    if not head.startswith(_GZIP_MAGIC):
        return False
    try:
        inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, len(storage.MAGIC))
    except zlib.error:
        return False
    return inner == storage.MAGIC


READABLE = ("it reads proftui (.proftui), pprof (gzip'd or raw profile.proto), gperftools CPU "
            "and heap profiles, heaptrack files, `perf script` text, gmon.out (with --binary)")


def detect(head: bytes) -> str:
    """The kind of file whose first bytes are `head`: "proftui", "pprof", "gperftools",
    "gperftools-heap", "heaptrack", "perf-script", "perf-data", "gmon" or "unknown"."""
    if _is_proftui(head):  # the common case, told by its magic line without the importers
        return "proftui"
    from proftui.collectors.formats.importers import (
        gperftools,
        gperftools_heap,
        heaptrack,
        perf_script,
        pprof,
    )
    from proftui.collectors.gprof.gmon import MAGIC as GMON_MAGIC

    if heaptrack.sniff(head):  # first: heaptrack's .gz files are gzip like proftui's
        return "heaptrack"
    if head.startswith(_GZIP_MAGIC):
        # Both proftui (JSON, or its magic line) and pprof (protobuf) files are gzip'd:
        # look inside.
        inner = pprof.gunzip_head(head)
        return "pprof" if inner and not inner.lstrip().startswith(b"{") \
            and not inner.startswith(storage.MAGIC) and pprof.sniff(inner) else "proftui"
    if head.startswith(GMON_MAGIC):
        return "gmon"
    if head.startswith(_PERF_DATA_MAGIC):
        return "perf-data"
    if gperftools.sniff(head) is not None:
        return "gperftools"
    if gperftools_heap.sniff(head):
        return "gperftools-heap"
    if perf_script.sniff(head):
        return "perf-script"
    if pprof.sniff(head):
        return "pprof"
    return "unknown"


def load_any(path: Path | str, binary: Path | None = None) -> Profile:
    """Load `path` as whichever supported format its content is (ProftuiError otherwise).

    `binary` is the profiled program, needed only for gmon.out files.  A fleet URL
    (`clickhouse://HOST/DATABASE?from=..`, a str) is a query of the fleet's server.
    """
    if isinstance(path, str):
        from proftui.collectors.fleet import is_fleet_url

        if is_fleet_url(path):
            from proftui.collectors.fleet.query import load

            return load(path)
        path = Path(path)
    try:
        if stat.S_ISFIFO(os.stat(path).st_mode):  # an open would wait for a writer
            raise ProftuiError(f"{path}: is a FIFO, not a profile file")
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except FileNotFoundError:
        raise ProftuiError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ProftuiError(f"{path}: is a directory, not a profile file") from None
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
    kind = detect(head)
    loader = _loader(kind)
    if loader is not None:
        return loader(path)
    if kind == "gmon":
        from proftui.collectors.gprof.collector import load_gmon_file

        return load_gmon_file(path, binary)
    if kind == "perf-data":
        raise ProftuiError(f"{path}: is perf.data; convert it with `perf script -i {path} > "
                           "perf.txt` and open perf.txt")
    raise ProftuiError(f"{path}: not a proftui profile nor any other format proftui reads "
                       f"({READABLE})")
