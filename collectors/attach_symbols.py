"""Minimal function-level symbolizer for attach mode, used only when the shared
one (collectors.maps / collectors.symbols) is not importable in this build.

`FallbackAddressSpace` mirrors collectors.maps.AddressSpace (never forgets a
mapping; paths read through /proc/PID/root, deleted files through
/proc/PID/map_files) and `FallbackSymbolizer` mirrors Symbolizer.frames() with
ELF .symtab/.dynsym only: no DWARF lines, no inlines, no demangling.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from collectors.errors import ProftuiError
from collectors.model import Frame


@dataclass(frozen=True)
class _Mapping:
    start: int
    end: int
    offset: int
    path: str  # as /proc/PID/maps shows it
    readable: str  # where we can open it from here


class FallbackAddressSpace:
    def __init__(self, pid: int | None = None, root: str = "/") -> None:
        self.pid = pid
        self.root = root
        self._maps: dict[tuple[int, int], _Mapping] = {}
        self._starts: list[int] = []
        self._sorted: list[_Mapping] = []
        self._loads: dict[str, list[tuple[int, int, int]]] = {}
        self.readable_paths: dict[str, str] = {}  # maps path -> a path we can open
        self.refresh()

    def refresh(self) -> None:
        if self.pid is None:
            return
        try:
            with open(f"/proc/{self.pid}/maps") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            parts = line.split(None, 5)
            if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5]
            readable = os.path.join(self.root, path.removesuffix(" (deleted)").lstrip("/"))
            if path.endswith(" (deleted)") or not os.path.exists(readable):
                readable = f"/proc/{self.pid}/map_files/{parts[0]}"
            self._maps[(lo, hi)] = _Mapping(lo, hi, int(parts[2], 16),
                                            path.removesuffix(" (deleted)"), readable)
            self.readable_paths.setdefault(path.removesuffix(" (deleted)"), readable)
        self._sorted = sorted(self._maps.values(), key=lambda m: m.start)
        self._starts = [m.start for m in self._sorted]

    def resolve(self, address: int) -> tuple[str, int] | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address >= self._sorted[i].end:
            return None
        m = self._sorted[i]
        offset = address - m.start + m.offset
        for p_offset, p_vaddr, p_filesz in self._segments(m):
            if p_offset <= offset < p_offset + p_filesz:
                return m.path, offset - p_offset + p_vaddr
        return m.path, offset

    def _segments(self, m: _Mapping) -> list[tuple[int, int, int]]:
        loads = self._loads.get(m.path)
        if loads is None:
            loads = []
            try:
                with open(m.readable, "rb") as f:
                    for seg in ELFFile(f).iter_segments():
                        if seg["p_type"] == "PT_LOAD":
                            loads.append((seg["p_offset"], seg["p_vaddr"], seg["p_filesz"]))
            except (OSError, ELFError):
                pass
            self._loads[m.path] = loads
        return loads


class FallbackSymbolizer:
    def __init__(self, space: FallbackAddressSpace) -> None:
        self.space = space
        self.warnings: list[str] = ["symbols from ELF symbol tables only (no source lines)"]
        self._tables: dict[str, tuple[list[int], list[tuple[int, int, str]]]] = {}

    def _table(self, module: str) -> tuple[list[int], list[tuple[int, int, str]]]:
        table = self._tables.get(module)
        if table is not None:
            return table
        syms: list[tuple[int, int, str]] = []
        path = self.space.readable_paths.get(module, module)
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                for name in (".symtab", ".dynsym"):
                    section = elf.get_section_by_name(name)
                    if section is None:
                        continue
                    for sym in section.iter_symbols():
                        if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]:
                            syms.append((sym["st_value"], sym["st_size"], sym.name))
                    if syms:
                        break
        except (OSError, ELFError) as exc:
            raise ProftuiError(f"{module}: cannot read symbols: {exc}") from None
        syms.sort()
        table = ([s[0] for s in syms], syms)
        self._tables[module] = table
        return table

    def frames(self, module: str, vaddr: int) -> list[Frame]:
        starts, syms = self._table(module)
        i = bisect.bisect_right(starts, vaddr) - 1
        if i >= 0:
            start, size, name = syms[i]
            if vaddr < start + max(size, 1):
                return [Frame(function=name, module=module, address=start, raw_name=name)]
        base = os.path.basename(module)
        return [Frame(function=f"{base}+0x{vaddr:x}", module=module, address=vaddr)]
