"""Addresses -> functions, source lines and inlined frames, from ELF and DWARF.

Function names come from .symtab (or the separate debug file, or .dynsym
when stripped), read with struct.  Source lines and inline chains come from
a SymCache built by `symbolic` (Sentry's Rust symbolication library) from
the DWARF: building one for a 24 MB binary takes a few tenths of a second
and a lookup with its inline chain microseconds, where decoding the DWARF
in Python took seconds.  SymCaches are kept per build-id in a private cache
directory and mmapped on the next run.  A stripped binary's functions are
named from .gnu_debugdata (MiniDebugInfo) where present, else one per
.eh_frame FDE, "module+0xSTART" (stripped.py), with a warning, never an
exception.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Frame
from proftui.collectors.model.sourcefiles import ORIGINS
from proftui.collectors.symbols import tablecache
from proftui.collectors.symbols.cachedir import (
    CacheDir,
    default_cache_dir,
    entry_key,
    own_regular_file,
)
from proftui.collectors.symbols.compdirs import source_roots
from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.dwarfnames import InlineNames
from proftui.collectors.symbols.elf import PT_LOAD, SHT_NOBITS, ElfFile, open_regular
from proftui.collectors.symbols.functable import CompactTable, Table, compact
from proftui.collectors.symbols.maps import AddressSpace, unreadable_reason
from proftui.collectors.symbols.stripped import debugdata_elf, fde_ranges, with_fde_functions
from proftui.collectors.symbols.symcache_lookup import Entry, SymCacheLookup
from proftui.collectors.symbols.vdso import VDSO

if TYPE_CHECKING:
    from symbolic.symcache import SymCache

STB_GLOBAL, STB_WEAK = 1, 2  # ELF symbol bindings (st_info >> 4)
DEBUG_ROOT = Path("/usr/lib/debug")
CACHE_SUFFIX = ".symcache"


@dataclass(frozen=True, slots=True)
class FunctionSymbol:
    """An ELF function symbol: link-time `start`, `size` bytes, raw and shown names."""

    start: int
    size: int
    raw_name: str
    name: str


@dataclass(frozen=True, slots=True)
class InlineFrame:
    """A function inlined at a call site: `file`:`line` is where it was called from.

    `decl_file` is the file the inlined function's own code comes from (its
    DWARF line rows, so right across compile units under LTO).  A SymCache
    has no DW_AT_decl_line, so inlined frames carry no line of their own.
    """

    function: str
    file: str | None
    line: int | None
    decl_file: str | None = None
    raw_name: str = ""


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
    Problems found later (a SymCache that cannot be built) go to `warnings`.
    """

    def __init__(self, path: str, readable: str | None = None,
                 cache_dir: CacheDir | None = None, warnings: list[str] | None = None) -> None:
        self.path = path
        self.readable = readable or path
        self._cache_dir = cache_dir
        self._warnings = warnings if warnings is not None else []
        self._symcache: SymCache | None = None
        self._symcache_tried = False
        self._unsaved = False  # a SymCache built here, not yet in the cache directory
        self._built = False  # the SymCache was built in this process (not read from the cache)
        self._entries: dict[int, tuple[str | None, int | None]] = {}
        self._last_location: tuple[int, SourceLocation] = (-1, UNKNOWN_LOCATION)
        self._symcache_lookup: SymCacheLookup | None = None
        self._locations: dict[tuple[Entry, ...], SourceLocation] = {}
        self._roots_noted = False
        self._inline_names: InlineNames | None = None
        self._aliases: dict[int, frozenset[str]] | None = None  # _same_function, lazily
        try:
            with ElfFile(self.readable) as elf:
                self.build_id = elf.build_id()
                self.is_pie = elf.is_pie
                self.segments = [(s.offset, s.vaddr, s.filesz) for s in elf.segments
                                 if s.type == PT_LOAD]
                has_dwarf = _has_dwarf(elf)
                has_symtab = elf.section(".symtab") is not None
                debuglink = elf.debuglink()
        except (OSError, ValueError) as exc:
            reason, gone = unreadable_reason(path, self.readable, exc)
            raise (ModuleGone if gone else ProftuiError)(reason) from None
        self._load_address = self.segments[0][1] if self.segments else 0
        self.debug_path: str | None = self.readable if has_dwarf else None
        if not has_dwarf:
            self.debug_path = self._find_debug_file(debuglink)
        table, minidebug = self._function_table(os.path.basename(path) or "?")
        # Parallel sorted columns; FunctionSymbols (and demangled names) are made on demand.
        self._starts, self._sizes, self._raw_names = table
        self._symbols: dict[int, FunctionSymbol] = {}
        self.stripped = not has_symtab and self.debug_path is None and not minidebug

    # -- functions -------------------------------------------------------

    def _function_table(self, base: str) -> tuple[CompactTable, bool]:
        """(every function's start, size and raw name; whether MiniDebugInfo named any),
        from the cache directory when built before from the same files (tablecache.py)."""
        key, sources = self._cache_entry()
        if key is not None and sources is not None:
            cached = tablecache.load(self._cache_dir, key, sources, base)
            if cached is not None:
                return cached
        try:
            with ElfFile(self.readable) as elf:
                table = _function_table(elf, ".symtab")
                plt = elf.plt_symbols()
        except (OSError, ValueError) as exc:
            raise ProftuiError(f"{self.path}: not a readable ELF file ({exc})") from None
        if not table[0] and self.debug_path and self.debug_path != self.readable:
            table = _read_function_table(self.debug_path, ".symtab")
        minidebug = False
        fdes: list[tuple[int, int]] = []
        if not table[0]:
            table, minidebug, fdes = _stripped_table(self.readable)
        table = _plus(table, plt)
        if fdes:  # after the PLT stubs: an FDE spanning .plt does not hide them
            table = with_fde_functions(table, fdes, base)
        del fdes
        kept = compact(*table)
        del table  # its lists: twice the compact table's size
        if key is not None and sources is not None:
            tablecache.save(self._cache_dir, key, sources, base, kept, minidebug)
        return kept, minidebug

    def _cache_entry(self) -> tuple[str | None, list[list[object]] | None]:
        """The cache key of the module's tables and the files they are read from (the
        module, its debug file), or Nones when they cannot be kept."""
        read = [self.readable]
        if self.debug_path and self.debug_path != self.readable:
            read.append(self.debug_path)
        key = entry_key(self.build_id, self.readable)
        sources = tablecache.sources_of(read) if key is not None else None
        if sources is not None:  # the file by its identity: /proc/PID/... paths vary
            sources[0][0] = ""
        return key, sources

    def _symbol(self, i: int) -> FunctionSymbol:
        symbol = self._symbols.get(i)
        if symbol is None:
            raw = self._raw_names[i]
            # Shown names drop symbol versions ("memcpy@@GLIBC_2.14" -> "memcpy"), not
            # the "@plt" of a PLT stub (ElfFile.plt_symbols).
            shown = demangle(raw.split("@", 1)[0]) + ("@plt" if raw.endswith("@plt") else "")
            symbol = FunctionSymbol(self._starts[i], self._sizes[i], raw, shown)
            self._symbols[i] = symbol
        return symbol

    @property
    def functions(self) -> list[FunctionSymbol]:
        """Every function symbol, in address order."""
        return [self._symbol(i) for i in range(len(self._starts))]

    def function_at(self, vaddr: int) -> FunctionSymbol | None:
        """The function whose [start, start+size) holds link-time `vaddr`."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i < 0:
            return None
        start, size = self._starts[i], self._sizes[i]
        if size == 0:  # assembler labels without a size: up to the next symbol
            size = (self._starts[i + 1] - start) if i + 1 < len(self._starts) else 1
        return self._symbol(i) if vaddr < start + size else None

    # -- source lines ------------------------------------------------------

    def _lookup(self, vaddr: int) -> tuple[Entry, ...]:
        """SymCache entries at `vaddr`, innermost first; () where DWARF has no line."""
        lookup = self._symcache_lookup if self._symcache_tried else self._open_lookup()
        if lookup is None or vaddr < self._load_address:
            return ()
        found = lookup.lookup(vaddr - self._load_address)
        # Addresses only the symbol table knows come back with no file and line 0.
        if not found or (not found[0].full_path and not found[0].line):
            return ()
        return found

    def _open_lookup(self) -> SymCacheLookup | None:
        cache = self._open_symcache()
        self._symcache_lookup = SymCacheLookup(cache) if cache is not None else None
        return self._symcache_lookup

    def location(self, vaddr: int) -> SourceLocation:
        """Source file:line of the instruction at link-time `vaddr`, with inlines."""
        if self._last_location[0] == vaddr:  # a new leaf asks twice: its frames, its line
            return self._last_location[1]
        found = self._location(vaddr)
        self._last_location = (vaddr, found)
        return found

    def _location(self, vaddr: int) -> SourceLocation:
        found = self._lookup(vaddr)
        if not found:
            return UNKNOWN_LOCATION
        # The addresses of one line (and inline chain) look up equal: one location.
        shared = self._locations.get(found)
        if shared is not None:
            return shared
        names = [demangle(inner.symbol) for inner in found[:-1]]
        qualify = any(_unqualified(inner.lang, inner.symbol) for inner in found[:-1])
        if qualify:  # from the DIEs at this very address: not shared
            names = self._qualified_names(vaddr, names)
        # A function "inlined" into itself (GCC's split-and-reinline of one body: the
        # call site is its own first line) is one function: when the SymCache names the
        # out-of-line copy after another of its symbols (glibc's __GI___libc_write in
        # __GI___write, shown as write), the inlined frame would repeat it under an alias.
        inlined = tuple(
            InlineFrame(name, outer.full_path or None, outer.line or None,
                        inner.full_path or None, inner.symbol)
            for name, (inner, outer) in zip(names, itertools.pairwise(found), strict=True)
            if not self._same_function(inner, outer))
        self._note_sources(entry.full_path for entry in found)
        location = SourceLocation(found[0].full_path or None, found[0].line or None, inlined)
        if not qualify:
            self._locations[found] = location
        return location

    def _same_function(self, inner: Entry, outer: Entry) -> bool:
        """Whether SymCache entry `inner`, inlined into the out-of-line `outer`, is
        `outer` under another of the names at its address.  The same name twice is
        left alone: addr2line -i shows it so."""
        if inner.symbol == outer.symbol or _unqualified(inner.lang, inner.symbol):
            return False
        if outer.sym_addr == 0xFFFFFFFF:  # outer is inlined too: it has no address
            return False
        if self._aliases is None:
            self._aliases = self._alias_table()
        return inner.symbol in self._aliases.get(outer.sym_addr + self._load_address, ())

    def _alias_table(self) -> dict[int, frozenset[str]]:
        """_alias_table of the module's symbols, through the cache directory as its
        function table is (a big library's .symtab is 5-10 ms to read again)."""
        path = self.debug_path or self.readable
        key, sources = self._cache_entry()
        if key is None or sources is None:
            return _alias_table(path)
        key += ".aliases"
        cached = tablecache.load(self._cache_dir, key, sources, ALIASES)
        if cached is not None:
            starts, _sizes, names = cached[0]
            found: dict[int, set[str]] = {}
            for start, name in zip(starts, names, strict=True):
                found.setdefault(start, set()).add(name)
            return {start: frozenset(group) for start, group in found.items()}
        aliases = _alias_table(path)
        rows = sorted((start, name) for start, group in aliases.items() for name in group)
        tablecache.save(self._cache_dir, key, sources, ALIASES,
                        compact([r[0] for r in rows], [0] * len(rows), [r[1] for r in rows]),
                        False)
        return aliases

    def _qualified_names(self, vaddr: int, names: list[str]) -> list[str]:
        """`names` (inlined frames, innermost first) with the ones the SymCache left
        bare (no linkage name in the DWARF) qualified from the DIEs."""
        if self.debug_path is None:
            return names
        if self._inline_names is None:
            self._inline_names = InlineNames(self.debug_path)
        chain = self._inline_names.chain(vaddr)
        if chain is None or len(chain) != len(names):
            return names  # the two readers disagree on the chain: keep the SymCache's
        return [better or name for better, name in zip(reversed(chain), names, strict=True)]

    def definition(self, symbol: FunctionSymbol) -> tuple[str | None, int | None]:
        """Where `symbol` starts: the file:line of its first instruction (outside inlines)."""
        entry = self._entries.get(symbol.start)
        if entry is None:
            found = self._lookup(symbol.start)
            entry = (found[-1].full_path or None, found[-1].line or None) if found else (None, None)
            self._entries[symbol.start] = entry
            self._note_sources([entry[0]])
        return entry

    def _note_sources(self, paths: Iterable[str | None]) -> None:
        """Tell the source gate that this module's debug info named `paths`."""
        if self.debug_path is None:
            return
        if not self._roots_noted:
            roots = functools.partial(source_roots, self.debug_path)
            if self.debug_path.startswith("/proc/"):
                # /proc/PID/root or map_files vanish with the process: read the roots now
                found = roots()
                ORIGINS.note_module(self.debug_path, lambda: found)
            else:
                ORIGINS.note_module(self.debug_path, roots)  # read when first needed
            self._roots_noted = True
        for path in paths:
            if path:
                ORIGINS.note_path(path, self.debug_path)

    # -- SymCache ----------------------------------------------------------

    def _open_symcache(self) -> SymCache | None:
        """The SymCache of the debug file: from the cache directory, else built now."""
        self._symcache_tried = True
        if self.debug_path is None:
            return None
        try:
            from symbolic.debuginfo import Archive
            from symbolic.exceptions import SymbolicError
            from symbolic.symcache import SymCache
        except ImportError:
            self._warnings.append("the symbolic package is missing: no source lines "
                                  "(pip install symbolic)")
            return None
        try:
            objects = _open_objects(Archive, self.debug_path)
            if not objects:
                raise LookupError("no object in the file")
            debug_id = objects[0].debug_id
            cache_file = self._cache_file()
            if cache_file is not None and self._cache_dir is not None \
                    and self._cache_dir.usable() and own_regular_file(cache_file):
                try:
                    cached = SymCache.open(str(cache_file))
                    # A damaged or foreign cache is rebuilt, never trusted.
                    if cached.debug_id == debug_id and cached.is_latest_version:
                        self._symcache = cached
                        return cached
                except SymbolicError:
                    pass
            self._symcache = SymCache.from_object(objects[0])
            self._built = self._unsaved = True
            # Written now, not at exit: collectors drop their Symbolizer without flushing.
            self.save_cache()
        except (SymbolicError, LookupError, OSError) as exc:
            reason = ": ".join(part.strip().removeprefix("caused by: ")
                               for part in str(exc).splitlines() if part.strip())
            self._warnings.append(f"{self.path}: cannot read its DWARF ({reason}); "
                                  "functions are shown without source lines")
            self._symcache = None
        return self._symcache

    def _cache_file(self) -> Path | None:
        if self._cache_dir is None:
            return None
        key = entry_key(self.build_id, self.debug_path or self.readable)
        return None if key is None else self._cache_dir.entry(f"{key}{CACHE_SUFFIX}")

    def save_cache(self) -> None:
        """Write a SymCache built in this run to the cache directory (0600, atomically)."""
        path = self._cache_file()
        if path is None or not self._unsaved or self._symcache is None:
            return
        try:
            assert self._cache_dir is not None
            if not self._cache_dir.usable(create=True):
                return  # someone else's directory: never write (or read) caches there
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:  # mkstemp made it 0600
                    self._symcache.dump_into(f)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
            self._unsaved = False
        except OSError:
            pass  # the cache is an optimisation; a read-only home must not fail a profile

    # -- debug files -------------------------------------------------------

    def _find_debug_file(self, debuglink: str | None) -> str | None:
        """A separate debug file by build-id or .gnu_debuglink that holds DWARF."""
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
            if str(candidate) == self.readable or not candidate.is_file():
                continue
            try:
                with ElfFile(candidate) as elf:
                    if _has_dwarf(elf):
                        loads = [s.vaddr for s in elf.segments if s.type == PT_LOAD]
                        if loads:  # SymCache addresses count from the first PT_LOAD
                            self._load_address = loads[0]
                        return str(candidate)
            except (OSError, ValueError):
                continue
        return None


class ModuleGone(ProftuiError):
    """A module read through a process that exited first (another process may read it)."""


class Symbolizer:
    """Frames for (module, address) pairs, memoized; shared by every collector."""

    def __init__(self, cache_dir: Path | None = None, use_cache: bool = True) -> None:
        self.warnings: list[str] = []
        base = None
        if cache_dir is None and use_cache:
            base, cache_dir = default_cache_dir()
        self.cache_dir = cache_dir if use_cache else None
        self._cache = None if self.cache_dir is None else CacheDir(self.cache_dir, base,
                                                                   self.warnings)
        if self._cache is not None:
            self._cache.usable()  # an existing untrusted directory: warn now, once
        self._modules: dict[str, ModuleSymbols | None] = {}
        self._gone: set[str] = set()  # paths through processes that exited: not retried
        self._frames: dict[tuple[str, int], list[Frame]] = {}

    def module(self, path: str, readable: str | None = None) -> ModuleSymbols:
        """Symbols of `path` (memoized); ProftuiError if it is not a readable ELF file."""
        found = self._modules.get(path)
        if found is None:
            found = ModuleSymbols(path, readable, self._cache, self.warnings)
            self._modules[path] = found
            if path == VDSO:
                pass  # the kernel's image: exported names only, no debug file, as expected
            elif found.stripped:
                self.warnings.append(f"stripped: {path} has no symbol table or debug file "
                                     "(only exported functions have names; the others are "
                                     f"named {os.path.basename(path)}+0xSTART from their "
                                     ".eh_frame entries)")
            elif found.debug_path is None:
                self.warnings.append(f"no debug info: {path} shows functions without source lines")
        return found

    def _try_module(self, path: str, readable: str | None) -> ModuleSymbols | None:
        if path in self._modules:
            return self._modules[path]
        if (readable or path) in self._gone:
            return None
        try:
            return self.module(path, readable)
        except ModuleGone as exc:  # not settled: another process may still read it
            self._gone.add(readable or path)
            self.warnings.append(str(exc))
            return None
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
        if module_path in self._modules:  # else its file was not read: not settled
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
                                file=inline.decl_file,
                                raw_name=inline.raw_name or inline.function,
                                build_id=module.build_id, inlined=True))
        return frames

    def location(self, module_path: str, vaddr: int) -> SourceLocation:
        """Source line of link-time `vaddr` (unknown when the module has no DWARF)."""
        module = self._try_module(module_path, None)
        return module.location(vaddr) if module is not None else UNKNOWN_LOCATION

    def flush(self) -> None:
        """Make sure SymCaches built so far are in the build-id cache.

        Each is written as soon as it is built; this retries writes that failed.
        """
        for module in self._modules.values():
            if module is not None:
                module.save_cache()


def _unqualified(lang: str, symbol: str) -> bool:
    """A C++ function the SymCache could only name from DW_AT_name ("mix", "operator<",
    "swap<(anonymous namespace)::K>"): no linkage name anywhere on its DIE chain, as
    for everything with internal linkage (anonymous namespaces, templates over their
    types)."""
    return lang == "cpp" and not symbol.startswith("_Z")


def _has_dwarf(elf: ElfFile) -> bool:
    """Whether `elf` carries DWARF with contents (a stripped file keeps no .debug_info)."""
    section = elf.section(".debug_info") or elf.section(".zdebug_info")
    return section is not None and section.type != SHT_NOBITS and section.size > 0


def _open_objects(archive: Any, path: str) -> list[Any]:
    """The objects of debug file `path`, opened through an fd checked to be a regular
    file (the path may have become a FIFO since it was mapped)."""
    try:
        fd = open_regular(path)
    except ValueError as exc:
        raise LookupError(str(exc)) from None
    try:
        return list(archive.open(f"/proc/self/fd/{fd}").iter_objects())
    finally:
        os.close(fd)


ALIASES = "[aliases]"  # the `base` of alias tables' cache entries (never a module's name)


def _alias_table(path: str) -> dict[int, frozenset[str]]:
    """Function addresses with more than one name in `path`'s .symtab (or .dynsym),
    each with all its names."""
    names: dict[int, set[str]] = {}
    try:
        with ElfFile(path) as elf:
            section = elf.section(".symtab") or elf.section(".dynsym")
            for value, _size, _binding, name in (elf.function_symbols(section)
                                                 if section is not None else ()):
                names.setdefault(value, set()).add(name.split("@", 1)[0])
    except (OSError, ValueError):
        return {}
    return {value: frozenset(found) for value, found in names.items() if len(found) > 1}


def _read_function_table(path: str, section_name: str) -> Table:
    try:
        with ElfFile(path) as elf:
            return _function_table(elf, section_name)
    except (OSError, ValueError):
        return [], [], []


def _plus(table: Table, more: Iterable[tuple[int, int, str]]) -> Table:
    """`table` plus the (start, size, name) entries of `more` (PLT stubs, MiniDebugInfo
    symbols) at addresses no symbol of `table` names (its symbol wins)."""
    have = set(table[0])
    extra = [entry for entry in more if entry[0] not in have]
    if not extra:
        return table
    rows = sorted([*zip(*table, strict=True), *extra])
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _stripped_table(path: str) -> tuple[Table, bool, list[tuple[int, int]]]:
    """The functions of a file without .symtab: .dynsym's and MiniDebugInfo's; whether
    MiniDebugInfo named any; and the (start, size) of its .eh_frame FDEs (stripped.py)."""
    try:
        with ElfFile(path) as elf:
            table = _function_table(elf, ".dynsym")
            inner = debugdata_elf(elf)
            mini: Table = ([], [], [])
            if inner is not None:
                with inner:
                    mini = _function_table(inner, ".symtab")
            fdes = fde_ranges(elf)
    except (OSError, ValueError):
        return ([], [], []), False, []
    return _plus(table, zip(*mini, strict=True)), bool(mini[0]), fdes


def _function_table(elf: ElfFile, section_name: str) -> Table:
    """Defined function symbols of `elf`, sorted, one per address (best name wins)."""
    section = elf.section(section_name)
    if section is None:
        return [], [], []
    try:
        entries = elf.function_symbols(section)
    except ValueError:
        return [], [], []
    best: dict[int, tuple[int, int, str]] = {}
    for value, size, binding, name in entries:
        rank = (0 if binding == STB_GLOBAL else 1 if binding == STB_WEAK else 2) * 2 \
            + name.startswith("_")
        old = best.get(value)
        if old is None or (rank, name) < (old[0], old[2]):
            best[value] = (rank, size, name)
    starts = sorted(best)
    return starts, [best[s][1] for s in starts], [best[s][2] for s in starts]
