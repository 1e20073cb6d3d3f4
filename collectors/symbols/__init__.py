"""Addresses to names, lines and inline chains: ELF, DWARF, process maps, demangling."""
