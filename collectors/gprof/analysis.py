"""gprof's arithmetic on a parsed gmon.out: flat profile and call-graph times.

The numbers follow GNU gprof (binutils gprof/hist.c, cg_arcs.c) so a user
comparing `proftui report` with `gprof -b` sees the same self seconds and
call counts:

* the function table is nm's text symbols, one per address, each running to
  the next symbol.  Unlike gprof, every local FUNC symbol is kept, compiler
  clones included (`f.isra.0`, `f.part.0`, `f.cold`): gprof 2.40 keeps only
  `.constprop.N`/`.clone.N`/`.N` names and gives the others' addresses to the
  preceding function, which names an -O2 program's hottest code wrongly;
* histogram bins are credited to functions in proportion to the overlap of
  address ranges, measured in 2-byte units with gprof's truncating bin edges;
* call counts come from arcs (self-recursive calls are reported apart);
* a callee's self and child time flow to its callers in proportion to the
  calls each made; mutually recursive functions form a cycle treated as one.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from proftui.collectors.errors import ProftuiError
from proftui.collectors.gprof.gmon import GmonData

UNIT = 2  # gprof measures histogram ranges in 2-byte units


@dataclass(frozen=True, slots=True)
class GprofSymbol:
    """A function as gprof sees it: [addr, end] inclusive, static or global."""

    addr: int
    end: int
    name: str
    is_static: bool


@dataclass
class GprofSymbolTable:
    """Sorted, de-duplicated function symbols of one executable."""

    symbols: list[GprofSymbol]
    pointer_size: int = 8
    little_endian: bool = True
    etext: int | None = None  # end of text as the linker defined it (glibc's histogram end)
    _starts: list[int] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._starts = [s.addr for s in self.symbols]

    def lookup(self, address: int) -> int | None:
        """Index of the symbol whose range holds `address`, or None in a gap."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0 or address > self.symbols[i].end:
            return None
        return i


def read_symbol_table(path: Path) -> GprofSymbolTable:
    """gprof's function table for `path` (ProftuiError if there is none)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            code_sections = {i: (s["sh_addr"], s["sh_addr"] + s["sh_size"])
                             for i, s in enumerate(elf.iter_sections())
                             if s["sh_flags"] & 0x4}  # SHF_EXECINSTR
            text = elf.get_section_by_name(".text")
            text_end = (text["sh_addr"] + text["sh_size"]) if text is not None else 0
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            raw: list[tuple[int, str, bool]] = []
            etext = None
            if isinstance(table, SymbolTableSection):
                for sym in table.iter_symbols():
                    if sym.name in ("etext", "_etext"):
                        etext = sym["st_value"]
                    shndx = sym["st_shndx"]
                    if not isinstance(shndx, int) or shndx not in code_sections:
                        continue
                    kind = sym["st_info"]["type"]
                    bind = sym["st_info"]["bind"]
                    if kind in ("STT_SECTION", "STT_FILE") or not sym.name:
                        continue
                    if bind in ("STB_GLOBAL", "STB_WEAK"):
                        raw.append((sym["st_value"], sym.name, False))
                    elif bind == "STB_LOCAL" and (kind == "STT_FUNC"
                                                  or _static_name_ok(sym.name)):
                        raw.append((sym["st_value"], sym.name, True))
            pointer_size = 8 if elf.elfclass == 64 else 4
            little = elf.little_endian
    except (OSError, ELFError, ValueError) as exc:
        raise ProftuiError(f"{path}: not a readable ELF file ({exc})") from None
    if not raw:
        raise ProftuiError(f"{path}: has no function symbols (stripped?); gprof mode needs "
                           "them: rebuild without -s, or use the sampler mode")
    return GprofSymbolTable(_finalize(raw, text_end), pointer_size, little, etext)


def _static_name_ok(name: str) -> bool:
    """Local labels that are not typed FUNC count when they look like C names (gprof)."""
    return "." not in name and "$" not in name and not name.startswith("__gnu_compiled")


def _finalize(raw: list[tuple[int, str, bool]], text_end: int) -> list[GprofSymbol]:
    """One symbol per address (global, then no leading underscore), ends at the next."""
    raw.sort(key=lambda s: (s[0], s[2]))
    kept: list[list] = []  # [addr, name, is_static]
    for addr, name, is_static in raw:
        if kept and kept[-1][0] == addr:
            prev = kept[-1]
            if (not is_static and prev[2]) or (is_static == prev[2] and (
                    (name[0] != "_" and prev[1][0] == "_")
                    or (len(name) > 1 and name[1] != "_" and len(prev[1]) > 1
                        and prev[1][1] == "_"))):
                kept[-1] = [addr, name, is_static]
            continue
        kept.append([addr, name, is_static])
    result = []
    for i, (addr, name, is_static) in enumerate(kept):
        end = kept[i + 1][0] - 1 if i + 1 < len(kept) else max(text_end - 1, addr)
        result.append(GprofSymbol(addr, end, name, is_static))
    return result


@dataclass
class GprofResult:
    """Per-symbol results, index-aligned with the symbol table."""

    table: GprofSymbolTable
    self_ticks: list[float]  # histogram samples credited to each symbol
    calls: list[int]  # calls from other functions (self-recursive calls excluded)
    self_calls: list[int]  # self-recursive calls
    child_ticks: list[float]  # time propagated from callees, in samples
    arcs: dict[tuple[int, int], int]  # (caller index, callee index) -> calls
    total_ticks: float  # every histogram sample, as gprof's % time denominator
    prof_rate: int
    cycles: list[list[int]]  # members of each cycle of mutually recursive functions
    # The same samples split exactly by overlap (gprof's bins of truncated width,
    # divided by their nominal width, credit a little more or less than they hold):
    # these sum with `outside_ticks` to `total_ticks`, so the tree's total is the run's.
    exact_ticks: list[float] = field(default_factory=list)
    exact_child_ticks: list[float] = field(default_factory=list)
    outside_ticks: float = 0.0  # samples in no symbol's range

    def seconds(self, ticks: float) -> float:
        return ticks / self.prof_rate

    @property
    def reported(self) -> list[int]:
        """Functions with time or calls (gprof's flat profile) or that call others."""
        callers = {parent for parent, _ in self.arcs}
        return [i for i in range(len(self.table.symbols))
                if self.self_ticks[i] or self.calls[i] or self.self_calls[i] or i in callers]


def analyze(data: GmonData, table: GprofSymbolTable) -> GprofResult:
    """Credit samples, count calls, propagate time: gprof's flat profile and graph."""
    n = len(table.symbols)
    self_ticks = [0.0] * n
    exact_ticks = [0.0] * n
    total_ticks = 0.0
    scaled = [s.addr // UNIT for s in table.symbols]
    for hist in data.histograms:
        total_ticks += _assign_samples(hist.low_pc, hist.high_pc, hist.counts, scaled,
                                       table, self_ticks, exact_ticks)
    arcs: dict[tuple[int, int], int] = {}
    calls = [0] * n
    for (from_pc, self_pc), count in data.arcs.items():
        parent = table.lookup(from_pc)
        child = table.lookup(self_pc)
        if parent is None or child is None:
            continue
        arcs[(parent, child)] = arcs.get((parent, child), 0) + count
        calls[child] += count
    self_calls = [0] * n
    for (parent, child), count in arcs.items():
        if parent == child:
            self_calls[child] += count
            calls[child] -= count
    cycles, child_ticks = _propagate(n, self_ticks, calls, arcs)
    _, exact_child_ticks = _propagate(n, exact_ticks, calls, arcs)
    return GprofResult(table, self_ticks, calls, self_calls, child_ticks, arcs, total_ticks,
                       data.prof_rate, cycles, exact_ticks, exact_child_ticks,
                       max(total_ticks - sum(exact_ticks), 0.0))


def _assign_samples(low_pc: int, high_pc: int, counts: tuple[int, ...], scaled: list[int],
                    table: GprofSymbolTable, into: list[float], exact: list[float]) -> float:
    """gprof's overlap crediting of one histogram into `into`, the exact split of each
    bin into `exact`; returns the histogram's sample total."""
    lowpc = low_pc // UNIT
    scale = ((high_pc - low_pc) // UNIT) / len(counts)
    n = len(scaled)
    total = 0.0
    for i, count in enumerate(counts):
        if not count:
            continue
        total += count
        bin_low = lowpc + int(scale * i)
        bin_high = lowpc + int(scale * (i + 1))
        j = max(bisect.bisect_right(scaled, bin_low) - 1, 0)
        while j < n:
            sym_low = scaled[j]
            sym_high = scaled[j + 1] if j + 1 < n else (table.symbols[j].end + 1) // UNIT
            if bin_high < sym_low:
                break
            if bin_low < sym_high:
                overlap = min(bin_high, sym_high) - max(bin_low, sym_low)
                if overlap > 0:
                    into[j] += overlap * count / scale
                    exact[j] += overlap * count / (bin_high - bin_low)
                elif bin_high == bin_low and sym_low <= bin_low < sym_high:
                    exact[j] += count  # a bin of no width (scale < 1) is a point
            j += 1
    return total


def _propagate(n: int, self_ticks: list[float], calls: list[int],
               arcs: dict[tuple[int, int], int]) -> tuple[list[list[int]], list[float]]:
    """Callee time flows to callers by call share; cycles are collapsed first."""
    children: dict[int, list[int]] = {}
    for (parent, child), count in arcs.items():
        if parent != child and count:
            children.setdefault(parent, []).append(child)
    component, order = _strongly_connected(n, children)
    members: dict[int, list[int]] = {}
    for node, comp in enumerate(component):
        members.setdefault(comp, []).append(node)
    cycles = [sorted(m) for m in members.values() if len(m) > 1]
    # Cycle as a whole: its self time, and the calls it receives from outside.
    comp_self = {c: sum(self_ticks[m] for m in ms) for c, ms in members.items()}
    comp_calls = {c: 0 for c in members}
    for (parent, child), count in arcs.items():
        if component[parent] != component[child]:
            comp_calls[component[child]] += count
    comp_child = {c: 0.0 for c in members}
    child_ticks = [0.0] * n
    # `order` lists components callees-first (Tarjan emits them in reverse topological order).
    for comp in order:
        for parent in members[comp]:
            for child in children.get(parent, ()):
                child_comp = component[child]
                if child_comp == comp:
                    continue
                if len(members[child_comp]) > 1:
                    received = comp_calls[child_comp]
                    self_t, child_t = comp_self[child_comp], comp_child[child_comp]
                else:
                    received = calls[child]
                    self_t, child_t = self_ticks[child], child_ticks[child]
                if received == 0:
                    continue
                share = (self_t + child_t) * arcs[(parent, child)] / received
                child_ticks[parent] += share
                comp_child[comp] += share
    return cycles, child_ticks


def _strongly_connected(n: int, children: dict[int, list[int]]) -> tuple[list[int], list[int]]:
    """Tarjan's algorithm without recursion: component of each node, components in
    the order they complete (every component after all components it calls)."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    component = [-1] * n
    stack: list[int] = []
    order: list[int] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            succ = children.get(node, [])
            if edge < len(succ):
                work.append((node, edge + 1))
                nxt = succ[edge]
                if index[nxt] == -1:
                    work.append((nxt, 0))
                elif on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = len(order)
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = comp
                    if member == node:
                        break
                order.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component, order
