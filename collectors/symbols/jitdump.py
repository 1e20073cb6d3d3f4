"""jitdump files: names (and unwind tables) a JIT gives the code it generates.

The format is perf's (tools/perf/Documentation/jitdump-specification.txt): a 40-byte
header (magic "JiTD" in the writer's byte order, version, header size, ELF machine,
pid, timestamp, flags), then records, each a 16-byte prefix (id, total size,
timestamp) and its payload.  CPython 3.13's `-X perf_jit`, V8, the JVM's and .NET's
agents write one, `jit-PID.dump`, and map it executable so that perf finds it among
the process's mappings; proftui finds it there too (`JitNames`), or, when the process
ended before its mappings were read, at /tmp/jit-PID.dump if its header names the pid.

Read here: JIT_CODE_LOAD (pid, tid, vma, code address, size, index, NUL-terminated
name, then the code), JIT_CODE_MOVE, JIT_CODE_CLOSE; JIT_CODE_UNWINDING_INFO records
are counted and skipped here: the sampler's runtime reads them itself, in the target,
to unwind generated code (csrc/common/pt_jit.c); other records are skipped by size.
The file gets the perf map's checks (perfmap.py: O_NOFOLLOW, a regular file of the
target's user no one else can write), entries over file-backed code are ignored,
and anything wrong is said in one warning per file, never raised.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable

from proftui.collectors.symbols.perfmap import JitPlace, PerfMap

MAGIC = 0x4A695444  # "JiTD" as the writer's native uint32
HEADER = struct.Struct("<IIIIIIQQ")  # magic, version, size, elf_mach, pad, pid, time, flags
PREFIX = struct.Struct("<IIQ")  # id, total_size, timestamp
LOAD = struct.Struct("<IIQQQQ")  # pid, tid, vma, code_addr, code_size, code_index
MOVE = struct.Struct("<IIQQQQQ")  # pid, tid, vma, old_code_addr, new_code_addr, size, index
CODE_LOAD, CODE_MOVE, CODE_DEBUG_INFO, CODE_CLOSE, CODE_UNWINDING_INFO = range(5)
MAX_RECORD = 16 << 20  # a record claiming more is garbage: the rest of the file is not read
DUMP_NAME = re.compile(r"/jit-\d+\.dump$")
JIT_DUMP = "/tmp/jit-{pid}.dump"  # where CPython's -X perf_jit writes it
_CONTROL = dict.fromkeys(range(32), "?")


class JitDump(PerfMap):
    """The jitdump file at `path` of one process, read record by record as it grows."""

    KIND = "jitdump"

    def __init__(self, path: str, uid: int, overlaps: Callable[[int, int], bool],
                 pid: int | None = None, place: JitPlace | None = None) -> None:
        super().__init__(0, uid, overlaps, path=path, place=place)
        self._pid = pid  # the header must name this pid (a file found by its name only)
        self._header = False  # the file header was read and is good
        self._closed = False  # JIT_CODE_CLOSE seen, or the rest is garbage
        self._broken = ""  # why the rest of the file is not read
        self._unwind = 0  # JIT_CODE_UNWINDING_INFO records seen
        self._pending = 0  # bytes of a record not yet whole at the last read

    def _consume(self, data: bytes) -> bool:
        at, added = 0, False
        if not self._header:
            if len(data) < HEADER.size:
                self._pending = len(data)
                return False
            magic, _version, size, _mach, _pad, pid, *_ = HEADER.unpack_from(data)
            if magic != MAGIC:
                swapped = magic == int.from_bytes(MAGIC.to_bytes(4, "little"), "big")
                self._refuse("is written in another byte order" if swapped
                             else "is not a jitdump file (bad magic)")
                return False
            if self._pid is not None and pid != self._pid:
                self._refuse(f"was written by pid {pid}")
                return False
            if size < HEADER.size or size > MAX_RECORD:
                self._refuse(f"has a header of {size} bytes")
                return False
            if len(data) < size:
                self._pending = len(data)
                return False
            self._header, at = True, size
        while not self._closed and len(data) - at >= PREFIX.size:
            kind, size, _time = PREFIX.unpack_from(data, at)
            if size < PREFIX.size or size > MAX_RECORD:
                self._broken = f"a record claims {size} bytes: the rest ignored"
                self._closed = True
                break
            if len(data) - at < size:
                break  # still being written
            added = self._record(kind, data[at + PREFIX.size:at + size]) or added
            at += size
        self._offset += at
        self._pending = 0 if self._closed else len(data) - at
        self._stale = self._stale or added
        return added

    def _record(self, kind: int, body: bytes) -> bool:
        """Take one record's payload; True if it named code."""
        if kind == CODE_CLOSE:
            self._closed = True
        elif kind == CODE_UNWINDING_INFO:
            self._unwind += 1
        elif kind == CODE_LOAD:
            end = body.find(b"\0", LOAD.size)
            if len(body) < LOAD.size or end < 0:
                self._bad += 1
                return False
            _pid, _tid, _vma, start, size, _index = LOAD.unpack_from(body)
            name = body[LOAD.size:end].decode("utf-8", "replace").strip().translate(_CONTROL)
            return self._add(start, size, name)
        elif kind == CODE_MOVE:
            if len(body) < MOVE.size:
                self._bad += 1
                return False
            _pid, _tid, _vma, old, new, size, _index = MOVE.unpack_from(body)
            moved = self._entries.pop(old, None)
            self._stale = True
            return moved is not None and self._add(new, size, moved[1])
        return False  # debug info and records of later versions: skipped

    def _problems(self) -> list[str]:
        problems = [p.replace("malformed line", "malformed record")
                    for p in super()._problems()]
        if self._broken:
            problems.append(self._broken)
        elif self._pending >= PREFIX.size or (self._pending and not self._header):
            problems.append(f"its last {self._pending} bytes are a record cut short: ignored")
        return problems


class JitNames:
    """Every source of names for one process's generated code: its perf map, and the
    jitdump files it maps (found among its mappings on a miss)."""

    def __init__(self, perf_map: PerfMap, uid: int, overlaps: Callable[[int, int], bool],
                 mapped_dumps: Callable[[], list[str]], place: JitPlace) -> None:
        self.perf_map, self._uid, self._overlaps = perf_map, uid, overlaps
        self._mapped_dumps = mapped_dumps  # the jitdump paths among the process's mappings
        self._place = place
        # The writers' usual place, for when the mapping was not seen (a process that
        # ended before its maps were read): trusted only if its header names the pid.
        self._usual = JitDump(place.tmp_path(JIT_DUMP), uid, overlaps, pid=place.ns_pid,
                              place=place)
        self.dumps: dict[str, JitDump] = {}

    def lookup(self, address: int) -> tuple[int, str] | None:
        """(start, name) of the generated code holding `address`, or None."""
        for path in self._mapped_dumps():
            seen = self._place.path(path)
            if seen not in self.dumps:
                self.dumps[seen] = JitDump(seen, self._uid, self._overlaps, place=self._place)
        if self._usual.path not in self.dumps and os.path.lexists(self._usual.path):
            self.dumps[self._usual.path] = self._usual
        for dump in self.dumps.values():
            found = dump.lookup(address)
            if found is not None:
                return found
        return self.perf_map.lookup(address)

    def grew(self) -> bool:
        """Whether a file gained entries since the last call (each file asked once)."""
        return any([self.perf_map.grew(), *(d.grew() for d in self.dumps.values())])

    def warnings(self) -> list[str]:
        """One line per file that had something wrong."""
        found = [self.perf_map.warning(), *(d.warning() for d in self.dumps.values())]
        return [w for w in found if w is not None]
