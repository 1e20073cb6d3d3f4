"""Pick a profiling mode from what the compiler left in the ELF file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection
from proftui.collectors.errors import ProftuiError

# Symbols the compiler references when a program is built for a mode.
GPROF_SYMBOLS = frozenset({"mcount", "_mcount", "__mcount", "__fentry__"})
INSTRUMENT_SYMBOLS = frozenset({"__cyg_profile_func_enter", "__cyg_profile_func_exit"})


@dataclass(frozen=True)
class BinaryFacts:
    """What the mode choice and error messages need to know about a program."""

    mode: str  # "gprof", "instrument" or "sampler"
    static: bool  # no dynamic loader: LD_PRELOAD cannot work


def inspect_binary(path: Path) -> BinaryFacts:
    """Read the ELF symbol tables of `path` (ProftuiError if it is not ELF)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            names: set[str] = set()
            for section in elf.iter_sections():
                if isinstance(section, SymbolTableSection):
                    for symbol in section.iter_symbols():
                        if symbol.name in GPROF_SYMBOLS or symbol.name in INSTRUMENT_SYMBOLS:
                            names.add(symbol.name)
            static = not any(seg["p_type"] == "PT_INTERP" for seg in elf.iter_segments())
    except (ELFError, OSError, ValueError) as exc:
        raise ProftuiError(f"{path}: not a readable ELF file ({exc})") from None
    if names & INSTRUMENT_SYMBOLS:
        mode = "instrument"
    elif names & GPROF_SYMBOLS:
        mode = "gprof"
    else:
        mode = "sampler"
    return BinaryFacts(mode, static)
