"""The few ELF facts proftui needs, read with struct from the headers.

Only the ELF header, program headers and section headers are parsed up
front; section bytes are read on demand with pread.  No per-symbol objects:
a big binary's symbol table is walked with struct.iter_unpack, which keeps
mode detection and function tables in milliseconds where pyelftools took
seconds.  Malformed files raise ValueError (or OSError).
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
import sys
from dataclasses import dataclass
from typing import Self

ET_DYN = 3
EM_X86_64 = 62
PT_LOAD, PT_INTERP = 1, 3
SHT_SYMTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 4, 7, 8, 11
R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_IRELATIVE = 6, 7, 37
STB_GLOBAL, STB_WEAK = 1, 2
JMP_GOT = b"\xff\x25"  # x86-64 `jmp *disp32(%rip)`: how a PLT stub jumps through its GOT slot
ENDBR64 = b"\xf3\x0f\x1e\xfa"
PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")
SHN_XINDEX = 0xFFFF
NT_GNU_BUILD_ID = 3
STT_FUNC, STT_GNU_IFUNC = 2, 10  # ELF symbol types (st_info & 0xf)
# st_info byte -> 1 for function types, else 0 (a bytes.translate table).
_FUNCTION_TYPES = bytes(int(i & 0xF in (STT_FUNC, STT_GNU_IFUNC)) for i in range(256))


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only fd of `path`, which must be a regular file (ValueError otherwise).

    O_NONBLOCK: a module a program replaced with a FIFO after mapping it
    must not block proftui in open(); symlinks are followed (/proc/PID/map_files,
    /usr/lib/libfoo.so -> libfoo.so.1).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True, slots=True)
class Segment:
    """One program header."""

    type: int
    offset: int
    vaddr: int
    filesz: int


@dataclass(frozen=True, slots=True)
class Section:
    """One section header, with its name resolved."""

    name: str
    type: int
    offset: int
    size: int
    link: int
    flags: int = 0
    addr: int = 0  # link-time address (sh_addr)
    entsize: int = 0  # size of one entry, for tables (sh_entsize; 0: not given)


SHF_COMPRESSED = 0x800


class ElfFile:
    """An open ELF file: its headers parsed, section data read on demand.

    Use as a context manager; ValueError when `path` is not a well-formed ELF file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._fd = open_regular(path)
        try:
            self._parse()
        except BaseException:
            os.close(self._fd)
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.file_size:
            raise ValueError(f"truncated ELF file (wants {size} bytes at {offset})")
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise ValueError("short read")
        return data

    def _parse(self) -> None:
        self.file_size = os.fstat(self._fd).st_size
        ident = self._read(0, 16) if self.file_size >= 16 else b""
        if ident[:4] != b"\x7fELF" or ident[4] not in (1, 2) or ident[5] not in (1, 2):
            raise ValueError("not an ELF file")
        self.is64 = ident[4] == 2
        self.order = "<" if ident[5] == 1 else ">"
        o = self.order
        if self.is64:
            (self.e_type, self.machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize,
             shnum, shstrndx) = struct.unpack(f"{o}HHIQQQIHHHHHH", self._read(16, 48))
            ph_fmt, sh_fmt = f"{o}IIQQQQQQ", f"{o}IIQQQQIIQQ"
        else:
            (self.e_type, self.machine, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize,
             shnum, shstrndx) = struct.unpack(f"{o}HHIIIIIHHHHHH", self._read(16, 36))
            ph_fmt, sh_fmt = f"{o}IIIIIIII", f"{o}IIIIIIIIII"
        self.segments: list[Segment] = []
        if phoff and phnum:
            if phentsize < struct.calcsize(ph_fmt):
                raise ValueError("bad program header size")
            table = self._read(phoff, phentsize * phnum)
            for i in range(phnum):
                fields = struct.unpack_from(ph_fmt, table, i * phentsize)
                if self.is64:
                    p_type, _, p_offset, p_vaddr, _, p_filesz = fields[:6]
                else:
                    p_type, p_offset, p_vaddr, _, p_filesz = fields[:5]
                self.segments.append(Segment(p_type, p_offset, p_vaddr, p_filesz))
        self.sections: list[Section] = []
        self._by_name: dict[str, Section] = {}
        if not shoff:
            return
        if shentsize < struct.calcsize(sh_fmt):
            raise ValueError("bad section header size")
        raw = []
        first = struct.unpack_from(sh_fmt, self._read(shoff, shentsize))
        if shnum == 0:  # extended numbering: the count lives in section 0
            shnum = first[5]
        if shstrndx == SHN_XINDEX:
            shstrndx = first[6]
        if shnum > 65536 * 4:
            raise ValueError("implausible section count")
        table = self._read(shoff, shentsize * shnum)
        for i in range(shnum):
            name, sh_type, flags, addr, offset, size, link, _, _, entsize = struct.unpack_from(
                sh_fmt, table, i * shentsize)
            raw.append((name, sh_type, offset, size, link, flags, addr, entsize))
        if not 0 <= shstrndx < len(raw):
            raise ValueError("bad section name table index")
        _, str_type, str_off, str_size = raw[shstrndx][:4]
        names = self._read(str_off, str_size) if str_type != SHT_NOBITS else b""
        for name_off, sh_type, offset, size, link, flags, addr, entsize in raw:
            end = names.find(b"\0", name_off)
            name = names[name_off:end if end >= 0 else None].decode("utf-8", "replace")
            section = Section(name, sh_type, offset, size, link, flags, addr, entsize)
            self.sections.append(section)
            self._by_name.setdefault(name, section)

    # -- queries -------------------------------------------------------------

    @property
    def is_pie(self) -> bool:
        """ET_DYN: a position-independent executable or a shared library."""
        return self.e_type == ET_DYN

    @property
    def has_interp(self) -> bool:
        """Whether a dynamic loader is named (PT_INTERP); static programs have none."""
        return any(s.type == PT_INTERP for s in self.segments)

    def section(self, name: str) -> Section | None:
        """The first section called `name`, or None."""
        return self._by_name.get(name)

    def data(self, section: Section) -> bytes:
        """The bytes of `section` (empty for SHT_NOBITS, e.g. in a debug file)."""
        if section.type == SHT_NOBITS:
            return b""
        return self._read(section.offset, section.size)

    def build_id(self) -> str:
        """The GNU build-id as hex, or "" when the file has none."""
        for section in self.sections:
            if section.type != SHT_NOTE:
                continue
            data = self.data(section)
            pos = 0
            while pos + 12 <= len(data):
                namesz, descsz, n_type = struct.unpack_from(f"{self.order}III", data, pos)
                name_at = pos + 12
                desc_at = name_at + ((namesz + 3) & ~3)
                if desc_at + descsz > len(data):
                    break
                if n_type == NT_GNU_BUILD_ID and data[name_at:name_at + namesz] == b"GNU\0":
                    return data[desc_at:desc_at + descsz].hex()
                pos = desc_at + ((descsz + 3) & ~3)
        return ""

    def debuglink(self) -> str | None:
        """The file name in .gnu_debuglink, or None."""
        section = self.section(".gnu_debuglink")
        if section is None:
            return None
        name = self.data(section).split(b"\0", 1)[0]
        return name.decode("utf-8", "replace") or None

    def function_symbols(self, section: Section) -> list[tuple[int, int, int, str]]:
        """(st_value, st_size, binding, name) of each defined function symbol of `section`.

        Each field is sliced out of the whole table at once (memoryview casts),
        so the Python loop does no unpacking: a 35,000-entry .symtab takes
        milliseconds.
        """
        if not 0 <= section.link < len(self.sections):
            raise ValueError(f"{section.name}: bad string table link")
        strtab = self.data(self.sections[section.link])
        data = self.data(section)
        size = 24 if self.is64 else 16
        data = data[:len(data) - len(data) % size]
        columns: tuple[list[int], ...]
        if (self.order == "<") == (sys.byteorder == "little"):
            view = memoryview(data)
            words, halves = view.cast("I"), view.cast("H")
            if self.is64:
                longs = view.cast("Q")
                columns = (words[0::6].tolist(), halves[3::12].tolist(),
                           longs[1::3].tolist(), longs[2::3].tolist())
            else:
                columns = (words[0::4].tolist(), halves[7::8].tolist(),
                           words[1::4].tolist(), words[2::4].tolist())
        else:  # foreign byte order: unpack entry by entry
            fmt = f"{self.order}IBBHQQ" if self.is64 else f"{self.order}IIIBBH"
            rows = list(struct.iter_unpack(fmt, data))
            pick = (0, 3, 4, 5) if self.is64 else (0, 5, 1, 2)
            columns = tuple([row[k] for row in rows] for k in pick)
        infos = data[4 if self.is64 else 12::size]
        is_function = infos.translate(_FUNCTION_TYPES)  # C-speed filter before the loop
        found = []
        for name_at, shndx, value, st_size, info in zip(
                *(itertools.compress(c, is_function) for c in columns),
                itertools.compress(infos, is_function), strict=True):
            if not value or not shndx:
                continue  # undefined (imported)
            end = strtab.find(b"\0", name_at)
            if end >= 0:
                name = strtab[name_at:end].decode("utf-8", "replace")
                found.append((value, st_size, info >> 4, name))
        return found

    def symbol_names_present(self, section: Section, wanted: frozenset[str]) -> set[str]:
        """Which of `wanted` name a symbol of `section` (names matched exactly).

        The string table is searched first, so a table that holds none of the
        names costs one bytes.find per name; only otherwise are entries walked.
        """
        if not 0 <= section.link < len(self.sections):
            raise ValueError(f"{section.name}: bad string table link")
        strtab = self.data(self.sections[section.link])
        offsets: dict[int, str] = {}
        for name in wanted:
            needle = name.encode() + b"\0"
            # A name can also be the tail of a longer string ("mcount" in "_mcount").
            at = strtab.find(needle)
            while at >= 0:
                offsets[at] = name
                at = strtab.find(needle, at + 1)
        if not offsets:
            return set()
        data = self.data(section)
        size = 24 if self.is64 else 16
        data = data[:len(data) - len(data) % size]
        used = {n for (n,) in struct.iter_unpack(f"{self.order}I{size - 4}x", data)}
        return {name for at, name in offsets.items() if at in used}

    # -- PLT stubs -----------------------------------------------------------

    def plt_symbols(self) -> list[tuple[int, int, str]]:
        """(address, size, name) of each PLT stub, named "puts@plt" as objdump and perf
        name them; the lazy-binding code (PLT0, and .plt's lazy entries where .plt.sec
        holds the stubs) is ".plt".  Without these, PLT addresses fell to the symbol
        before them, `_init`, whose size is 0.

        A stub is named by decoding its `jmp *slot(%rip)` and looking the GOT slot up
        in the relocations: .rela.plt (JUMP_SLOT; IRELATIVE in static programs, named
        after the ifunc they resolve) and .rela.dyn (GLOB_DAT, for .plt.got).  This
        covers the lazy, -z now, IBT (.plt.sec) and static layouts.  x86-64 only.
        """
        if self.machine != EM_X86_64 or not self.is64 or self.order != "<":
            return []
        slots = self._got_slots()
        found: list[tuple[int, int, str]] = []
        for section_name in PLT_SECTIONS:
            section = self.section(section_name)
            if section is None or section.type == SHT_NOBITS or not section.addr:
                continue
            code = self.data(section)
            step = section.entsize if section.entsize >= 8 else _plt_stride(code)
            for off in range(0, len(code) - step + 1, step):
                entry = code[off:off + step]
                address = section.addr + off
                name = None
                at = entry.find(JMP_GOT)
                if 0 <= at <= step - 6:
                    disp = int.from_bytes(entry[at + 2:at + 6], "little", signed=True)
                    name = slots.get(address + at + 6 + disp)
                if name is not None:
                    found.append((address, step, f"{name}@plt"))
                elif section_name == ".plt":
                    if found and found[-1][2] == ".plt" and sum(found[-1][:2]) == address:
                        start, size, _ = found.pop()  # one ".plt" range for the lazy code
                        found.append((start, size + step, ".plt"))
                    else:
                        found.append((address, step, ".plt"))
        return found

    def _got_slots(self) -> dict[int, str]:
        """GOT slot address -> the function its PLT stub reaches (see plt_symbols)."""
        slots: dict[int, str] = {}
        ifuncs: dict[int, str] | None = None
        for section in self.sections:
            if section.type != SHT_RELA or section.name not in (".rela.plt", ".rela.dyn"):
                continue
            data = self.data(section)
            names = _SymbolNames(self, section.link)
            for r_offset, r_info, r_addend in struct.iter_unpack(
                    "<QQq", data[:len(data) - len(data) % 24]):
                kind, index = r_info & 0xFFFFFFFF, r_info >> 32
                if kind in (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT) and index:
                    name = names.name(index)
                    if name:
                        slots[r_offset] = name.split("@", 1)[0]
                elif kind == R_X86_64_IRELATIVE:
                    if ifuncs is None:
                        ifuncs = self._function_names()
                    slots[r_offset] = ifuncs.get(r_addend, f"*ABS*+{r_addend:#x}")
        return slots

    def _function_names(self) -> dict[int, str]:
        """Address -> name of the function symbols (.symtab, else .dynsym): global, then
        weak, then local; a name without a leading underscore, then the shortest."""
        section = self.section(".symtab") or self.section(".dynsym")
        if section is None:
            return {}
        best: dict[int, tuple[int, bool, int, str]] = {}
        for value, _size, binding, name in self.function_symbols(section):
            rank = ({STB_GLOBAL: 0, STB_WEAK: 1}.get(binding, 2), name.startswith("_"),
                    len(name), name)
            if value not in best or rank < best[value]:
                best[value] = rank
        return {value: rank[3] for value, rank in best.items()}


_BUILDS: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) of an executable -> build-id


def executable_build_id(pid: int | None, exe: str) -> str:
    """The GNU build-id of executable `exe` of process `pid` ("" when it has none or cannot
    be read): through /proc/PID/exe while the process runs, else the path (`pid` None:
    the path only).  Memoized per file (device, inode)."""
    for path in (f"/proc/{pid}/exe" if pid is not None else "", exe):
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        known = _BUILDS.get((st.st_dev, st.st_ino))
        if known is not None:
            return known
        try:
            with ElfFile(path) as elf:
                build = str(elf.build_id() or "")
        except (OSError, ValueError):
            continue  # gone meanwhile, or unreadable: the next way, and never cached
        _BUILDS[(st.st_dev, st.st_ino)] = build
        return build
    return ""


def _plt_stride(code: bytes) -> int:
    """Entry size of a PLT section whose header does not say: 8 when every 8-byte
    entry is a bare `jmp *slot(%rip)` (static programs, non-IBT .plt.got), else 16."""
    if code and len(code) % 8 == 0 and all(code[i:i + 2] == JMP_GOT
                                           for i in range(0, len(code), 8)):
        return 8
    return 16


class _SymbolNames:
    """Names of a symbol table's entries by index, read on first use."""

    def __init__(self, elf: ElfFile, index: int) -> None:
        self._elf, self._index = elf, index
        self._table: bytes | None = None
        self._strings = b""

    def name(self, index: int) -> str:
        if self._table is None:
            self._table = b""
            if 0 < self._index < len(self._elf.sections):
                table = self._elf.sections[self._index]
                if 0 <= table.link < len(self._elf.sections):
                    self._table = self._elf.data(table)
                    self._strings = self._elf.data(self._elf.sections[table.link])
        at = index * 24
        if at + 4 > len(self._table):
            return ""
        start = int.from_bytes(self._table[at:at + 4], "little")
        end = self._strings.find(b"\0", start)
        return self._strings[start:end].decode("utf-8", "replace") if end > start else ""
