"""Pick a profiling mode from what the compiler left in the ELF file.

A -pg program calls mcount (or __fentry__), a -finstrument-functions one
calls __cyg_profile_func_enter; a dynamically linked program imports them,
so they are named in .dynsym (every relocation against them points there).
A static program has no .dynsym: its .symtab is searched instead.  Only the
string tables are scanned, with struct, so this stays in milliseconds on a
binary of tens of megabytes.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def inspect_binary(path: Path) -> BinaryFacts:
    """Read the headers and symbol names of `path` (ProftuiError if it is not ELF)."""
    try:
        with ElfFile(path) as elf:
            static = not elf.has_interp
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
    return BinaryFacts(mode, static)
