"""What a preloaded runtime could not map, in its own words (csrc/common/pt_note.h).

A runtime that cannot make a mapping it wants (its run file, a window of a
growing table, unwind tables, a shadow or signal stack) never writes to the
target's stderr: it appends one line to `<kind>.<pid>.note` in the run
directory, with the errno and the target's limits at that moment.  This
module turns each line into one warning naming the real cause (an address
space limit, a file-size limit, no descriptor left...) and what was lost.

The file is written by the target's process, so it is read as untrusted input:
at most MAX_BYTES of it, lines that do not parse are skipped.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 64 << 10  # of one note file
MAX_LINES = 64  # taken from one note file
NOTE_NAME = re.compile(r"(sampler|hook|heap)\.(\d+)\.note")
_FIELD = re.compile(r"([a-z]+)=([0-9]+|inf|[a-z]+)")

# What each runtime loses when a region cannot be mapped: said after the cause.
_LOST = {
    "file": "the process ran unprofiled from then on",
    "ring": "the samples of the threads that needed it were dropped (counted as dropped)",
    "stacks": "samples on stacks first seen after that were dropped (counted as dropped)",
    "maplog": "code loaded after that may not be symbolized once the process is gone",
    "unwind": "stacks through that code are walked with frame pointers (they may be cut "
              "short)",
    "altstack": "the sampling handler ran on the thread's own stack (a thread near its "
                "stack limit could overflow it)",
    "nodes": "calls in calling contexts first seen after that were not recorded (counted as "
             "dropped)",
    "shadow": "calls deeper than its shadow stack were not recorded (counted as dropped)",
    "hash": "calls in calling contexts first seen after that were not recorded (counted as "
            "dropped)",
    "buckets": "allocations from stacks first seen after that are counted under the "
               "overflow bucket",
    "pointers": "allocations after that were counted but not tracked as live",
}
_WHAT = {
    "file": "its run file",
    "ring": "a thread's sample ring",
    "stacks": "its stack table",
    "maplog": "its map log",
    "unwind": "unwind tables",
    "altstack": "an alternate signal stack",
    "nodes": "its node pool",
    "shadow": "a thread's shadow stack",
    "hash": "a thread's calling-context table",
    "buckets": "its bucket table",
    "pointers": "its pointer table",
}
# What a smaller run file holds less of (a file-size limit).
_SMALLER = {
    "sampler": "its stack table holds fewer distinct stacks",
    "hook": "its node pool holds fewer calling contexts",
    "heap": "its tables hold fewer stacks and live blocks",
}


@dataclass(frozen=True)
class RuntimeNote:
    """One line of a note file: what could not be mapped (or was made smaller), why."""

    kind: str  # "sampler", "hook", "heap"
    pid: int
    what: str  # a key of _WHAT
    text: str  # the warning, one line


def _size(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{max(1, round(n / 1024))} KiB"


def _kb(field: str) -> str:
    return f"{int(field):,} kB"


def _cause(err: int, fields: dict[str, str]) -> str:
    """The real reason an mmap/open/ftruncate failed with `err`, from the limits noted."""
    as_kb, fsize, nofile = fields.get("as", "inf"), fields.get("fsize", "inf"), \
        fields.get("nofile", "inf")
    if err == errno.ENOMEM:
        if as_kb != "inf":
            return f"the address-space limit (RLIMIT_AS, ulimit -v) of {_kb(as_kb)} is reached"
        return "out of memory (or of mappings: vm.max_map_count)"
    if err == errno.EFBIG:
        if fsize != "inf":
            return f"the file-size limit (RLIMIT_FSIZE, ulimit -f) is {_kb(fsize)}"
        return "the file would be too large"
    if err in (errno.EMFILE, errno.ENFILE):
        return (f"no file descriptor was left to open it (RLIMIT_NOFILE {nofile})"
                if err == errno.EMFILE else "the system's file table is full")
    if err in (errno.ENOSPC, errno.EDQUOT):
        return "the run directory's file system is full"
    if err in (errno.ESTALE, errno.ENOENT):
        return "its run file was removed or replaced"
    if err == 0:
        return "an unknown error"
    return os.strerror(err)


def parse_line(line: str, kind: str, pid: int, runtime: str) -> RuntimeNote | None:
    """The note of one line of `<kind>.<pid>.note`, or None when it does not parse."""
    head, _, rest = line.strip().partition(" ")
    fields = dict(_FIELD.findall(rest))
    what = fields.get("what", "")
    if head == "cap" and what == "jit" and fields.get("count", "").isdigit() and \
            fields.get("bytes", "").isdigit():
        return RuntimeNote(kind, pid, "cap-jit", (
            f"pid {pid}: {runtime} kept unwind tables for {int(fields['count']):,} pieces of "
            f"generated code (from its jitdump, in at most {_size(int(fields['bytes']))}) "
            "and no more: code past that is walked by frame pointers and the call-stub "
            "step (it may be cut short)"))
    if what not in _WHAT or not fields.get("bytes", "").isdigit():
        return None
    size = _size(int(fields["bytes"]))
    if head == "fsize" and what == "file" and fields.get("fsize", "inf") != "inf":
        return RuntimeNote(kind, pid, "fsize", (
            f"pid {pid}: the file-size limit (RLIMIT_FSIZE, ulimit -f) of "
            f"{_kb(fields['fsize'])} kept {runtime}'s run file to {size}: "
            f"{_SMALLER[kind]} (what does not fit is counted as dropped)"))
    if head != "map" or not fields.get("errno", "").isdigit():
        return None
    cause = _cause(int(fields["errno"]), fields)
    verb = "create" if what == "file" and int(fields["errno"]) == errno.EFBIG else "map"
    return RuntimeNote(kind, pid, what, (
        f"pid {pid}: {runtime} could not {verb} {size} for {_WHAT[what]}: {cause}; "
        f"{_LOST[what]}"))


def read_notes(run_dir: Path, kind: str, runtime: str) -> list[RuntimeNote]:
    """Every note the `kind` runtime left in `run_dir`, in pid order, each line once."""
    out: list[RuntimeNote] = []
    seen: set[str] = set()
    try:
        paths = sorted(run_dir.glob(f"{kind}.*.note"))
    except OSError:
        return []
    for path in paths:
        match = NOTE_NAME.fullmatch(path.name)
        if match is None or match.group(1) != kind:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            data = os.read(fd, MAX_BYTES)
        except OSError:
            data = b""
        finally:
            os.close(fd)
        for raw in data.decode("ascii", "replace").splitlines()[:MAX_LINES]:
            note = parse_line(raw, kind, int(match.group(2)), runtime)
            if note is not None and note.text not in seen:
                seen.add(note.text)
                out.append(note)
    out.sort(key=lambda n: n.pid)
    return out
