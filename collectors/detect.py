"""Pick a profiling mode from what the compiler left in the ELF file.

A -pg program calls mcount (or __fentry__), a -finstrument-functions one
calls __cyg_profile_func_enter; a dynamically linked program imports them,
so they are named in .dynsym (every relocation against them points there).
A static program has no .dynsym: its .symtab is searched instead.  Only the
string tables are scanned, with struct, so this stays in milliseconds on a
binary of tens of megabytes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.symbols.elf import ElfFile

# Symbols the compiler references when a program is built for a mode.
GPROF_SYMBOLS = frozenset({"mcount", "_mcount", "__mcount", "__gnu_mcount_nc", "__fentry__"})
INSTRUMENT_SYMBOLS = frozenset({"__cyg_profile_func_enter", "__cyg_profile_func_exit"})


@dataclass(frozen=True)
class BinaryFacts:
    """What the mode choice and error messages need to know about a program."""

    mode: str  # "gprof", "instrument" or "sampler"
    static: bool  # no dynamic loader: LD_PRELOAD cannot work
    # "a 32-bit program" when its ELF class or machine is not this machine's (proftui's
    # runtimes are built for the Python running proftui): LD_PRELOAD cannot load them
    foreign: str | None = None


MACHINES = {3: "x86", 62: "x86-64", 40: "ARM", 183: "AArch64", 243: "RISC-V"}


@cache
def native_elf() -> tuple[bool, int]:
    """(64-bit, e_machine) of the Python running proftui: the runtimes' own."""
    with ElfFile(sys.executable) as elf:
        return elf.is64, elf.machine


def foreign_kind(is64: bool, machine: int) -> str | None:
    """How a program differs from the runtimes' ELF kind, or None when it does not."""
    try:
        native64, native_machine = native_elf()
    except (OSError, ValueError):
        return None  # cannot tell: let the run say what happens
    if (is64, machine) == (native64, native_machine):
        return None
    name = MACHINES.get(machine, f"machine {machine}")
    return f"a {'64' if is64 else '32'}-bit {name} program"


def inspect_binary(path: Path) -> BinaryFacts:
    """Read the headers and symbol names of `path` (ProftuiError if it is not ELF)."""
    try:
        with ElfFile(path) as elf:
            static = not elf.has_interp
            foreign = foreign_kind(elf.is64, elf.machine)
            symtab = elf.section(".symtab")
            dynsym = elf.section(".dynsym")
            wanted = GPROF_SYMBOLS | INSTRUMENT_SYMBOLS
            names: set[str] = set()
            if dynsym is not None:
                names = elf.symbol_names_present(dynsym, wanted)
            if static and symtab is not None:  # nothing is imported: look at the definitions
                names |= elf.symbol_names_present(symtab, wanted)
    except (OSError, ValueError) as exc:
        raise ProftuiError(f"{path}: not a readable ELF file ({exc})") from None
    if names & INSTRUMENT_SYMBOLS:
        mode = "instrument"
    elif names & GPROF_SYMBOLS:
        mode = "gprof"
    else:
        mode = "sampler"
    return BinaryFacts(mode, static, foreign)


def refuse_foreign(program: str, facts: BinaryFacts, what: str) -> None:
    """ProftuiError in one line when `what` (a runtime) cannot be preloaded into a
    program of another ELF kind: it would run unprofiled, giving an empty profile."""
    if facts.foreign is not None:
        raise ProftuiError(
            f"{program} is {facts.foreign}, and {what} is built for this machine's "
            f"{'64' if native_elf()[0] else '32'}-bit {MACHINES.get(native_elf()[1], '')} "
            "programs, so it cannot be loaded into it; use gprof mode (build it with -pg) "
            "or perf record")
