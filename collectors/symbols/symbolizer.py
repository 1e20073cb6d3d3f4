"""Addresses -> functions, source lines and inlined frames, from ELF and DWARF.

Function names come from .symtab (or the separate debug file, or .dynsym
when stripped), source lines and inline chains from DWARF, one compile unit
at a time.  Whatever was decoded is kept in an on-disk cache keyed by
build-id, so the second run on a big binary skips pyelftools entirely for
the parts it already saw.  A stripped binary yields "module+0xoffset" frames
and a warning, never an exception.
"""

from __future__ import annotations

import atexit
import bisect
import gzip
import hashlib
import json
import os
import struct
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from elftools.common.exceptions import DWARFError, ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Frame
from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.dwarf_tables import CuTable, cu_address_ranges, decode_cu
from proftui.collectors.symbols.maps import AddressSpace

CACHE_VERSION = 2  # bump when the cached tables change meaning
STT_FUNC, STT_GNU_IFUNC = 2, 10  # ELF symbol types (st_info & 0xf)
STB_GLOBAL, STB_WEAK = 1, 2  # ELF symbol bindings (st_info >> 4)
DEBUG_ROOT = Path("/usr/lib/debug")


@dataclass(frozen=True, slots=True)
class FunctionSymbol:
    """An ELF function symbol: link-time `start`, `size` bytes, raw and demangled names."""

    start: int
    size: int
    raw_name: str
    name: str


@dataclass(frozen=True, slots=True)
class InlineFrame:
    """A function inlined at a call site: `file`:`line` is where it was called from."""

    function: str
    file: str | None
    line: int | None
    decl_file: str | None = None
    decl_line: int | None = None


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Source of one instruction; `inlined` lists enclosing inlines, innermost first."""

    file: str | None
    line: int | None
    inlined: tuple[InlineFrame, ...] = ()


UNKNOWN_LOCATION = SourceLocation(None, None)


class ModuleSymbols:
    """Symbols of one ELF object (executable or shared library).

    `path` is the module's name as the process sees it; `readable` is where
    the file can be opened from here (container root, map_files, ...).
    """

    def __init__(self, path: str, readable: str | None = None,
                 cache_dir: Path | None = None) -> None:
        self.path = path
        self.readable = readable or path
        self._cache_dir = cache_dir
        self._dirty = False
        self._cus: dict[int, CuTable] = {}
        self._dwarf_file: BinaryIO | None = None
        self._dwarf: Any = None
        try:
            with open(self.readable, "rb") as f:
                elf = ELFFile(f)
                self.build_id = _build_id(elf)
                self.is_pie = elf["e_type"] == "ET_DYN"
                self.segments = [(s["p_offset"], s["p_vaddr"], s["p_filesz"])
                                 for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
                has_dwarf = elf.get_section_by_name(".debug_info") is not None
                has_symtab = elf.get_section_by_name(".symtab") is not None
                debuglink = _debuglink(elf)
        except (OSError, ELFError, ValueError) as exc:
            raise ProftuiError(f"{path}: not a readable ELF file ({exc})") from None
        cached = self._load_cache()
        if cached is not None:
            self.debug_path = cached["debug_path"]
            self.functions = [FunctionSymbol(s, n, r, demangle(r.split("@", 1)[0]))
                              for s, n, r in cached["functions"]]
            self.stripped = bool(cached["stripped"])
            ranges = cached["cu_ranges"]
            self._cu_ranges = [tuple(r) for r in ranges] if ranges is not None else None
            self._cus = {int(k): CuTable.from_json(v) for k, v in cached["cus"].items()}
        else:
            self.debug_path = self.readable if has_dwarf else self._find_debug_file(debuglink)
            self.functions = self._read_functions(has_symtab)
            self.stripped = not has_symtab and self.debug_path is None
            self._cu_ranges = None
            self._dirty = True
        self._starts = [f.start for f in self.functions]

    # -- functions -------------------------------------------------------

    def _read_functions(self, has_symtab: bool) -> list[FunctionSymbol]:
        """.symtab of the file or its debug file; .dynsym when both lack one."""
        attempts = []
        if has_symtab:
            attempts.append((self.readable, ".symtab"))
        if self.debug_path and self.debug_path != self.readable:
            attempts.append((self.debug_path, ".symtab"))
        attempts.append((self.readable, ".dynsym"))
        for source, section in attempts:
            symbols = _function_symbols(source, section)
            if symbols:
                return symbols
        return []

    def function_at(self, vaddr: int) -> FunctionSymbol | None:
        """The function whose [start, start+size) holds link-time `vaddr`."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i < 0:
            return None
        symbol = self.functions[i]
        size = symbol.size
        if size == 0:  # assembler labels without a size: up to the next symbol
            size = (self._starts[i + 1] - symbol.start) if i + 1 < len(self._starts) else 1
        return symbol if vaddr < symbol.start + size else None

    # -- DWARF -----------------------------------------------------------

    def _dwarf_info(self) -> Any:
        if self._dwarf is None and self.debug_path is not None:
            try:
                self._dwarf_file = open(self.debug_path, "rb")  # noqa: SIM115 - kept open
                self._dwarf = ELFFile(self._dwarf_file).get_dwarf_info()
            except (OSError, ELFError, DWARFError, ValueError):
                self.debug_path = None
        return self._dwarf

    def _cu_for(self, vaddr: int) -> CuTable | None:
        if self._cu_ranges is None:
            dwarf = self._dwarf_info()
            try:
                self._cu_ranges = cu_address_ranges(dwarf) if dwarf is not None else []
            except (DWARFError, ValueError, KeyError, IndexError):
                self._cu_ranges = []
            self._dirty = True
        ranges = self._cu_ranges
        i = bisect.bisect_right(ranges, (vaddr, float("inf"), float("inf"))) - 1
        # Ranges may nest (aranges of different CUs never do, CU ranges can).
        for j in range(i, max(i - 8, -1), -1):
            low, high, offset = ranges[j]
            if low <= vaddr < high:
                return self._cu_table(int(offset))
        return None

    def _cu_table(self, offset: int) -> CuTable | None:
        table = self._cus.get(offset)
        if table is None:
            dwarf = self._dwarf_info()
            if dwarf is None:
                return None
            try:
                table = decode_cu(dwarf, dwarf.get_CU_at(offset))
            except (DWARFError, ValueError, KeyError, IndexError, AttributeError):
                table = CuTable()  # corrupt unit: no lines rather than a crash
            self._cus[offset] = table
            self._dirty = True
        return table

    def location(self, vaddr: int) -> SourceLocation:
        """Source file:line of the instruction at link-time `vaddr`, with inlines."""
        table = self._cu_for(vaddr)
        if table is None:
            return UNKNOWN_LOCATION
        found = table.line_at(vaddr)
        inlined = tuple(
            InlineFrame(name, _known(table.file(call_file)), call_line or None,
                        _known(table.file(decl_file)), decl_line or None)
            for _, _, _, name, call_file, call_line, decl_file, decl_line
            in table.inlines_at(vaddr))
        if found is None:
            return SourceLocation(None, None, inlined)
        return SourceLocation(found[0], found[1], inlined)

    def locations(self, vaddrs: Iterable[int]) -> dict[int, SourceLocation]:
        """`location` for many addresses (each compile unit decodes once)."""
        return {vaddr: self.location(vaddr) for vaddr in sorted(set(vaddrs))}

    def definition(self, symbol: FunctionSymbol) -> tuple[str | None, int | None]:
        """Where `symbol` is defined: DWARF decl file:line, else its first line."""
        table = self._cu_for(symbol.start)
        if table is None:
            return None, None
        entry = table.functions.get(symbol.start)
        if entry is not None and entry[2] >= 0 and entry[3]:
            return _known(table.file(entry[2])), entry[3]
        found = table.line_at(symbol.start)
        return (found[0], found[1]) if found else (None, None)

    def vaddr_of_file_offset(self, offset: int) -> int | None:
        """Link-time address of file `offset`, through the PT_LOAD headers."""
        for p_offset, p_vaddr, p_filesz in self.segments:
            if p_offset <= offset < p_offset + p_filesz:
                return offset - p_offset + p_vaddr
        return None

    # -- debug files and cache --------------------------------------------

    def _find_debug_file(self, debuglink: str | None) -> str | None:
        candidates = []
        if self.build_id and len(self.build_id) > 2:
            candidates.append(DEBUG_ROOT / ".build-id" / self.build_id[:2]
                              / f"{self.build_id[2:]}.debug")
        if debuglink:
            here = Path(self.readable).parent
            real = Path(os.path.realpath(self.path)).parent
            candidates += [here / debuglink, here / ".debug" / debuglink,
                           DEBUG_ROOT / str(real).lstrip("/") / debuglink]
        for candidate in candidates:
            if candidate.is_file() and str(candidate) != self.readable:
                try:
                    with candidate.open("rb") as f:
                        if ELFFile(f).get_section_by_name(".debug_info") is not None:
                            return str(candidate)
                except (OSError, ELFError, ValueError):
                    continue
        return None

    def _cache_file(self) -> Path | None:
        if self._cache_dir is None:
            return None
        key = self.build_id
        if not key:
            try:
                st = os.stat(self.readable)
            except OSError:
                return None
            key = "nobuildid-" + hashlib.sha256(
                f"{os.path.realpath(self.readable)}\0{st.st_size}\0{st.st_mtime_ns}".encode()
            ).hexdigest()[:32]
        return self._cache_dir / f"{key}.json.gz"

    def _load_cache(self) -> dict[str, Any] | None:
        path = self._cache_file()
        if path is None or not path.is_file():
            return None
        try:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                data = json.load(f)
            if data.get("version") != CACHE_VERSION:
                return None
            return data
        except (OSError, ValueError, EOFError):
            return None  # a damaged cache is rebuilt, never trusted

    def save_cache(self) -> None:
        """Write what was decoded so far (no-op when nothing is new or no cache)."""
        path = self._cache_file()
        if path is None or not self._dirty:
            return
        data = {"version": CACHE_VERSION, "path": self.path, "debug_path": self.debug_path,
                "stripped": self.stripped,
                "functions": [[f.start, f.size, f.raw_name] for f in self.functions],
                "cu_ranges": self._cu_ranges,
                "cus": {str(k): v.to_json() for k, v in self._cus.items()}}
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            payload = json.dumps(data, separators=(",", ":")).encode()
            with gzip.open(tmp, "wb", compresslevel=1) as f:
                f.write(payload)  # one write: json.dump to a gzip stream is several times slower
            os.chmod(tmp, 0o600)
            tmp.replace(path)
            self._dirty = False
        except OSError:
            pass  # the cache is an optimisation; a read-only home must not fail a profile


class Symbolizer:
    """Frames for (module, address) pairs, memoized; shared by every collector."""

    def __init__(self, cache_dir: Path | None = None, use_cache: bool = True) -> None:
        if cache_dir is None and use_cache:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            cache_dir = Path(base) / "proftui" / "symbols"
        self.cache_dir = cache_dir if use_cache else None
        self.warnings: list[str] = []
        self._modules: dict[str, ModuleSymbols | None] = {}
        self._frames: dict[tuple[str, int], list[Frame]] = {}
        _LIVE.add(self)

    def module(self, path: str, readable: str | None = None) -> ModuleSymbols:
        """Symbols of `path` (memoized); ProftuiError if it is not a readable ELF file."""
        found = self._modules.get(path)
        if found is None:
            found = ModuleSymbols(path, readable, self.cache_dir)
            self._modules[path] = found
            if found.stripped:
                self.warnings.append(f"stripped: {path} has no symbol table or debug file "
                                     "(only exported functions have names)")
            elif found.debug_path is None:
                self.warnings.append(f"no debug info: {path} shows functions without source lines")
        return found

    def _try_module(self, path: str, readable: str | None) -> ModuleSymbols | None:
        if path in self._modules:
            return self._modules[path]
        try:
            return self.module(path, readable)
        except ProftuiError as exc:
            self._modules[path] = None
            self.warnings.append(str(exc))
            return None

    def frame(self, module_path: str, vaddr: int, readable: str | None = None) -> Frame:
        """The function-level frame for link-time `vaddr` in `module_path`."""
        return self.frames(module_path, vaddr, readable)[0]

    def frames(self, module_path: str, vaddr: int, readable: str | None = None) -> list[Frame]:
        """Frames at `vaddr`, outermost first: the real function, then inlined ones."""
        key = (module_path, vaddr)
        cached = self._frames.get(key)
        if cached is not None:
            return cached
        result = self._symbolize(module_path, vaddr, readable)
        self._frames[key] = result
        return result

    def frames_at(self, space: AddressSpace, address: int) -> list[Frame]:
        """Frames for a runtime `address` of the process `space` describes."""
        resolved = space.resolve(address)
        if resolved is None:
            return [Frame(function=f"[unknown] 0x{address:x}", address=address)]
        module, vaddr = resolved
        return self.frames(module, vaddr, space.readable_path(module))

    def _symbolize(self, module_path: str, vaddr: int, readable: str | None) -> list[Frame]:
        module = self._try_module(module_path, readable)
        symbol = module.function_at(vaddr) if module is not None else None
        if module is None or symbol is None:
            base = os.path.basename(module_path) or "?"
            return [Frame(function=f"{base}+0x{vaddr:x}", module=module_path, address=vaddr,
                          build_id=module.build_id if module else "")]
        file, line = module.definition(symbol)
        frames = [Frame(function=symbol.name, module=module_path, file=file, line=line,
                        address=symbol.start, raw_name=symbol.raw_name,
                        build_id=module.build_id)]
        location = module.location(vaddr)
        for inline in reversed(location.inlined):  # outermost first
            frames.append(Frame(function=inline.function, module=module_path,
                                file=inline.decl_file, line=inline.decl_line,
                                raw_name=inline.function, build_id=module.build_id,
                                inlined=True))
        return frames

    def location(self, module_path: str, vaddr: int) -> SourceLocation:
        """Source line of link-time `vaddr` (unknown when the module has no DWARF)."""
        module = self._try_module(module_path, None)
        return module.location(vaddr) if module is not None else UNKNOWN_LOCATION

    def flush(self) -> None:
        """Persist decoded tables of every module to the build-id cache."""
        for module in self._modules.values():
            if module is not None:
                module.save_cache()


_LIVE: weakref.WeakSet[Symbolizer] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    for symbolizer in list(_LIVE):
        symbolizer.flush()


def _known(path: str) -> str | None:
    return None if path == "??" else path


def _build_id(elf: ELFFile) -> str:
    for section in elf.iter_sections():
        if isinstance(section, NoteSection):
            for note in section.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return str(note["n_desc"])
    return ""


def _debuglink(elf: ELFFile) -> str | None:
    section = elf.get_section_by_name(".gnu_debuglink")
    if section is None:
        return None
    data = section.data()
    name = data.split(b"\0", 1)[0]
    return name.decode("utf-8", "replace") or None


def _function_symbols(path: str, section_name: str) -> list[FunctionSymbol]:
    """Defined function symbols of `path`, sorted, one per address (best name wins).

    Entries are unpacked with struct straight from the section bytes: pyelftools'
    per-symbol objects cost seconds on a big binary's symbol table.
    """
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            section = elf.get_section_by_name(section_name)
            if not isinstance(section, SymbolTableSection):
                return []
            strtab = elf.get_section(section["sh_link"]).data()
            data = section.data()
            order = "<" if elf.little_endian else ">"
            if elf.elfclass == 64:
                entries = ((n, i, x, v, z) for n, i, _, x, v, z
                           in struct.iter_unpack(f"{order}IBBHQQ", data))
            else:
                entries = ((n, i, x, v, z) for n, v, z, i, _, x
                           in struct.iter_unpack(f"{order}IIIBBH", data))
            best: dict[int, tuple[int, int, str]] = {}
            for name_offset, info, shndx, value, size in entries:
                if (info & 0xF) not in (STT_FUNC, STT_GNU_IFUNC) or not value or not shndx:
                    continue
                end = strtab.find(b"\0", name_offset)
                name = strtab[name_offset:end].decode("utf-8", "replace")
                rank = {STB_GLOBAL: 0, STB_WEAK: 1}.get(info >> 4, 2) * 2 + name.startswith("_")
                old = best.get(value)
                if old is None or (rank, name) < (old[0], old[2]):
                    best[value] = (rank, size, name)
    except (OSError, ELFError, ValueError, struct.error):
        return []
    # Shown names drop symbol versions ("memcpy@@GLIBC_2.14" -> "memcpy"); raw names keep them.
    return [FunctionSymbol(start, size, name, demangle(name.split("@", 1)[0]))
            for start, (_, size, name) in sorted(best.items())]
