"""Compare proftui's gprof-mode numbers with `gprof -b` on the same gmon.out.

proftui keeps every local FUNC symbol, compiler clones included; GNU gprof
(binutils 2.40, corefile.c core_sym_class) keeps a local name with a '.' only
when each dotted part is digits, optionally after `clone.` or `constprop.`
(`f.constprop.0`, `f.123`), and gives the addresses of the others (`f.isra.0`,
`f.part.0`, `f.cold`) to the symbol before them.  Its check also reads past
the end of a name whose last part is digits (the loop steps over the NUL), into
the next string of .strtab, so `f.constprop.0` is dropped too when that string
is, say, `g.part.0.isra.0`; `gprof_keeps` follows the same bytes.  To compare, proftui's
functions are grouped the way gprof sees them: each symbol gprof keeps with
the symbols it swallows after it.  Self time, calls and % time of a group
must then be gprof's at the precision gprof prints.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from proftui.collectors.gprof.analysis import GprofResult, GprofSymbol
from proftui.collectors.symbols.demangle import demangle

_GPROF_DOTTED = re.compile(r"(?:\.(?:clone\.|constprop\.)?\d+)*")


@dataclass(frozen=True)
class Row:
    """One flat-profile line: % time, self seconds, calls (None when blank)."""

    percent: float
    seconds: float
    calls: int | None


def gprof_keeps(symbol: GprofSymbol, strtab: bytes, offsets: dict[tuple[int, str], int]) -> bool:
    """Whether GNU gprof has `symbol` in its function table (`offsets`: where each
    (address, name) starts in `strtab`)."""
    if not symbol.is_static:
        return True
    if symbol.name.startswith(("__gnu_compiled", "gcc2_compiled")):
        return False
    at = offsets.get((symbol.addr, symbol.name))
    if at is None:  # not from .symtab (cannot happen with a symbol table)
        return "$" not in symbol.name and "." not in symbol.name
    return _name_scan_ok(strtab, at)


def _name_scan_ok(buf: bytes, i: int) -> bool:
    """core_sym_class's character loop, byte for byte, reading past NULs as it does."""
    def at(k: int) -> int:
        return buf[k] if k < len(buf) else 0

    while at(i):
        if at(i) == ord("$"):
            return False
        while at(i) == ord("."):
            digit_seen = False
            end = buf.find(b"\0", i)
            rest = buf[i:end if end >= 0 else len(buf)]
            if len(rest) > 7 and rest.startswith(b".clone."):
                i += 6
            elif len(rest) > 11 and rest.startswith(b".constprop."):
                i += 10
            i += 1
            while at(i):
                if digit_seen and at(i) == ord("."):
                    break
                if chr(at(i)).isdigit():
                    digit_seen = True
                else:
                    return False
                i += 1
        i += 1  # after a part of digits this steps over the NUL, into the next string
    return True


def string_table(binary: Path) -> tuple[bytes, dict[tuple[int, str], int]]:
    """.strtab's bytes and the offset of each (address, name) of .symtab in it."""
    with binary.open("rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        strtab = elf.get_section(symtab["sh_link"]).data()
        offsets = {(sym["st_value"], sym.name): sym["st_name"] for sym in symtab.iter_symbols()}
    return strtab, offsets


def gprof_name(raw: str) -> str:
    """The name gprof prints (it demangles C++ names, leaves C names raw)."""
    return demangle(raw) if raw.startswith("_Z") else raw


def gprof_rows(binary: Path, gmon: Path) -> dict[str, Row]:
    """name -> Row from `gprof -b -p`."""
    out = subprocess.run(["gprof", "-b", "-p", str(binary), str(gmon)], capture_output=True,
                         text=True, check=True).stdout
    rows: dict[str, Row] = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4 or not re.fullmatch(r"\d+\.\d+", fields[0]):
            continue
        if len(fields) >= 7 and fields[3].isdigit():
            name, calls = " ".join(fields[6:]), int(fields[3])
        else:
            name, calls = " ".join(fields[3:]), None
        assert name not in rows, f"gprof printed {name} twice"
        rows[name] = Row(float(fields[0]), float(fields[2]), calls)
    return rows


def gprof_groups(result: GprofResult, binary: Path) -> list[int]:
    """For each of proftui's symbols, the one gprof credits its addresses to (-1: none)."""
    strtab, offsets = string_table(binary)
    group = [-1] * len(result.table.symbols)
    last = -1
    for i, symbol in enumerate(result.table.symbols):
        if gprof_keeps(symbol, strtab, offsets):
            last = i
        group[i] = last
    return group


def whole_functions(result: GprofResult, binary: Path) -> set[str]:
    """Names of the functions gprof sees exactly as proftui does (nothing folded in)."""
    group = gprof_groups(result, binary)
    sizes: dict[int, int] = {}
    for g in group:
        sizes[g] = sizes.get(g, 0) + 1
    return {result.table.symbols[g].name for g, size in sizes.items() if g >= 0 and size == 1}


def grouped_rows(result: GprofResult, binary: Path) -> dict[str, Row]:
    """proftui's flat profile with functions grouped as gprof sees them."""
    symbols = result.table.symbols
    group = gprof_groups(result, binary)
    ticks: dict[int, float] = {}
    for i, t in enumerate(result.self_ticks):
        if t and group[i] >= 0:
            ticks[group[i]] = ticks.get(group[i], 0.0) + t
    calls: dict[int, int] = {}
    for (parent, child), count in result.arcs.items():
        gp, gc = group[parent], group[child]
        if gc >= 0 and gp >= 0 and gp != gc:  # inside one group: recursion for gprof
            calls[gc] = calls.get(gc, 0) + count
    rows = {}
    for g in set(ticks) | set(calls):
        t = ticks.get(g, 0.0)
        rows[gprof_name(symbols[g].name)] = Row(100.0 * t / result.total_ticks,
                                                result.seconds(t), calls.get(g))
    return rows


def printed(rows: dict[str, Row]) -> dict[str, Row]:
    """The rows gprof prints: some time at its precision, or calls."""
    return {n: r for n, r in rows.items() if round(r.seconds, 2) or r.calls}


def max_difference(ours: dict[str, Row], theirs: dict[str, Row]) -> tuple[float, float]:
    """Largest |difference| of seconds and of % time over the functions both print."""
    seconds = max((abs(ours[n].seconds - theirs[n].seconds) for n in theirs), default=0.0)
    percent = max((abs(ours[n].percent - theirs[n].percent) for n in theirs), default=0.0)
    return seconds, percent


def assert_agree(ours: dict[str, Row], theirs: dict[str, Row]) -> None:
    """Every function gprof prints, and only those, with the same numbers as printed
    (2 decimals: a value may differ by at most half a unit of the last digit)."""
    ours, theirs = printed(ours), printed(theirs)
    assert sorted(ours) == sorted(theirs)
    for name, row in theirs.items():
        mine = ours[name]
        assert mine.calls == row.calls, name
        assert abs(mine.seconds - row.seconds) <= 0.005 + 1e-9, (name, mine, row)
        assert abs(mine.percent - row.percent) <= 0.005 + 1e-9, (name, mine, row)
