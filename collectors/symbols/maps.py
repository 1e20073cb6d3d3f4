"""A process's executable mappings, kept for the whole run.

Runtime addresses become (module path, link-time address) here, through the
load bias of each PT_LOAD segment.  Mappings are never forgotten, so code of
a library that was dlopen'd and dlclose'd before the profile is read still
resolves.  Files are opened through /proc/PID/root (container paths) and
/proc/PID/map_files (deleted binaries) when the plain path does not work.
"""

from __future__ import annotations

import bisect
import errno
import os
import re
from dataclasses import dataclass

from proftui.collectors.model.sourcefiles import ORIGINS, process_reader
from proftui.collectors.symbols.elf import PT_LOAD, ElfFile
from proftui.collectors.symbols.jitdump import DUMP_NAME
from proftui.collectors.symbols.vdso import VDSO, vdso_file

DELETED = " (deleted)"
_THROUGH_PROC = re.compile(r"/proc/(\d+)/(root|map_files)/")


def unreadable_reason(path: str, readable: str, exc: OSError | ValueError) -> tuple[str, bool]:
    """Why module `path` could not be opened from `readable`, in one line, and whether
    that was only because its process is gone (another process's path may still work:
    a container's files are read through each process's own /proc/PID/root)."""
    if path == VDSO:
        return (f"{VDSO}: the process's memory cannot be read, so its vDSO functions are "
                "unnamed", False)
    match = _THROUGH_PROC.match(readable)
    if match is not None and isinstance(exc, OSError):
        pid, way = match[1], match[2]
        if not os.path.exists(f"/proc/{pid}"):
            return (f"{path}: pid {pid} exited before this file could be read through "
                    f"/proc/{pid}/{way}", True)
        if exc.errno in (errno.EACCES, errno.EPERM):
            return (f"{path}: cannot be read through /proc/{pid}/{way} (permission denied: "
                    "reading another user's process in its own mount namespace needs "
                    "CAP_SYS_PTRACE)", False)
    return f"{path}: not a readable ELF file ({exc})", False


@dataclass(frozen=True, slots=True)
class Mapping:
    """One line of /proc/PID/maps: [start, end) maps `path` from file `offset`."""

    start: int
    end: int
    offset: int
    perms: str
    path: str


def parse_maps(text: str) -> list[Mapping]:
    """Parse /proc/PID/maps text; lines without a file path are skipped, but for the
    vDSO's ("[vdso]", symbolized from memory: collectors/symbols/vdso.py), and so are
    paths with a NUL (never in /proc; an imported file's maps text may hold one)."""
    mappings = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not (parts[5].startswith("/") or parts[5] == VDSO) \
                or "\0" in parts[5]:
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
        except ValueError:
            continue
        mappings.append(Mapping(lo, hi, offset, parts[1], parts[5]))
    return mappings


def load_segments(path: str) -> list[tuple[int, int, int]]:
    """(p_offset, p_vaddr, p_filesz) of each PT_LOAD segment of ELF file `path`."""
    try:
        with ElfFile(path) as elf:
            return [(s.offset, s.vaddr, s.filesz) for s in elf.segments if s.type == PT_LOAD]
    except (OSError, ValueError):
        return []


class AddressSpace:
    """Executable mappings of one process (or added by hand), never forgotten."""

    def __init__(self, pid: int | None = None, root: str = "/") -> None:
        self.pid = pid
        self.root = root
        self._by_range: dict[tuple[int, int], Mapping] = {}
        self._sorted: list[Mapping] = []  # _by_range in address order, rebuilt when stale
        self._starts: list[int] = []
        self._stale = False
        self._segments: dict[str, list[tuple[int, int, int]]] = {}
        self._readable: dict[str, str] = {}  # module path -> a path we can open
        # jit-PID.dump files mapped executable as a marker for perf (never run): not
        # code, so not modules; kept for collectors/symbols/jitdump.py to read.
        self._jit_dumps: dict[str, None] = {}
        if pid is not None:
            # Whose permissions decide which sources a profile of it may embed
            # (collectors/model/sourcefiles.py); recorded while the process exists.
            ORIGINS.note_process(pid, process_reader(pid))
        self.refresh()

    def refresh(self) -> None:
        """Re-read /proc/PID/maps and add new executable mappings (quiet if the pid is gone)."""
        if self.pid is None:
            return
        try:
            with open(f"/proc/{self.pid}/maps") as f:
                text = f.read()
        except OSError:
            return
        self.add_maps(text)

    def add_maps(self, text: str) -> None:
        """Add the executable mappings of /proc/PID/maps `text`."""
        for mapping in parse_maps(text):
            if "x" in mapping.perms:
                self.add(mapping)

    def add(self, mapping: Mapping) -> None:
        """Remember `mapping` (its path may end in " (deleted)")."""
        path = mapping.path.removesuffix(DELETED)
        if DUMP_NAME.search(path):
            self._jit_dumps[path] = None
            return
        if (mapping.start, mapping.end) in self._by_range:
            old = self._by_range[(mapping.start, mapping.end)]
            if old.offset == mapping.offset and (
                    old.path == path or self._same_file(old.path, mapping)):
                # One file under two names (the loader's /lib/... and the kernel's
                # /usr/lib/... on a merged-/usr system): one module, or its functions
                # would show as two rows with their costs split.
                return
        clean = Mapping(mapping.start, mapping.end, mapping.offset, mapping.perms, path)
        self._by_range[(clean.start, clean.end)] = clean
        if path not in self._readable:
            self._readable[path] = self._openable(mapping)
        self._stale = True  # sorted once at the next lookup, not once per added mapping

    def _same_file(self, old_path: str, mapping: Mapping) -> bool:
        if mapping.path.endswith(DELETED):
            return False
        try:
            a = os.stat(self._readable.get(old_path, old_path))
            b = os.stat(self._openable(mapping))
        except OSError:
            return False
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)

    def _ordered(self) -> list[Mapping]:
        if self._stale:
            self._sorted = sorted(self._by_range.values(), key=lambda m: (m.start, m.end))
            self._starts = [m.start for m in self._sorted]
            self._stale = False
        return self._sorted

    def _openable(self, mapping: Mapping) -> str:
        if mapping.path == VDSO:
            return vdso_file(self.pid) or VDSO
        path = mapping.path.removesuffix(DELETED)
        candidate = os.path.join(self.root, path.lstrip("/")) if self.root != "/" else path
        if not mapping.path.endswith(DELETED) and os.path.exists(candidate):
            return candidate
        if self.pid is not None:
            via = f"/proc/{self.pid}/map_files/{mapping.start:x}-{mapping.end:x}"
            if os.path.exists(via):
                return via
        return candidate

    def readable_path(self, module: str) -> str:
        """Where the file of `module` can be opened from this process."""
        return self._readable.get(module, module)

    @property
    def mappings(self) -> list[Mapping]:
        return list(self._ordered())

    def modules(self) -> list[str]:
        """Every module path seen, in address order."""
        return list(dict.fromkeys(m.path for m in self._ordered()))

    def jit_dumps(self) -> list[str]:
        """Every jitdump file seen mapped (not code: perf's marker mapping)."""
        return list(self._jit_dumps)

    def overlaps(self, start: int, end: int) -> bool:
        """Whether [start, end) touches an executable mapping of a file."""
        ordered = self._ordered()
        i = bisect.bisect_left(self._starts, end)
        return any(m.end > start for m in ordered[max(0, i - 16):i])

    def resolve(self, address: int) -> tuple[str, int] | None:
        """Runtime `address` -> (module path, link-time address), or None if unmapped.

        The latest mapping covering the address wins when a range was reused
        after dlclose; ties resolve to the most recently added.
        """
        ordered = self._ordered()
        i = bisect.bisect_right(self._starts, address) - 1
        # Ranges can overlap only when a dlclose'd range was reused; look back a little.
        for j in range(i, max(i - 16, -1), -1):
            mapping = ordered[j]
            if address < mapping.end:
                return mapping.path, self._link_address(mapping, address)
        return None

    def _link_address(self, mapping: Mapping, address: int) -> int:
        offset = address - mapping.start + mapping.offset
        segments = self._segments.get(mapping.path)
        if segments is None:
            segments = load_segments(self.readable_path(mapping.path))
            self._segments[mapping.path] = segments
        for p_offset, p_vaddr, p_filesz in segments:
            if p_offset <= offset < p_offset + p_filesz:
                return offset - p_offset + p_vaddr
        return offset
