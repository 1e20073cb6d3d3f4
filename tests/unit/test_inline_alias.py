"""An out-of-line function "inlined into itself" under another of its names (issue 26):
glibc's write, whose DWARF shows __libc_write inlined into its own body, and whose
out-of-line copy the SymCache names from the symbol table (__GI___write)."""

from __future__ import annotations

import sys

from proftui.collectors.symbols.symbolizer import ModuleSymbols
from proftui.collectors.symbols.symcache_lookup import Entry as Found

NONE = 0xFFFFFFFF  # the SymCache's sym_addr of an inlined entry


def Entry(symbol: str, full_path: str, line: int, sym_addr: int = NONE,
          lang: str = "c") -> Found:
    """A SymCache lookup entry (symcache_lookup.Entry) in this file's order."""
    return Found(sym_addr, line, lang, symbol, full_path)


def module(entries: list[Found], aliases: dict[int, frozenset[str]]) -> ModuleSymbols:
    symbols = ModuleSymbols(sys.executable)  # any ELF file: the lookups are replaced
    symbols._lookup = lambda vaddr: tuple(entries)  # type: ignore[method-assign]
    symbols._note_sources = lambda paths: None  # type: ignore[method-assign]
    symbols._load_address = 0
    symbols._aliases = aliases
    return symbols


def test_an_alias_inlined_into_its_own_function_is_one_frame() -> None:
    entries = [Entry("__GI___libc_write", "write.c", 26),
               Entry("__GI___write", "write.c", 24, sym_addr=0xF8340)]
    names = frozenset({"__GI___write", "__GI___libc_write", "__libc_write", "write"})
    location = module(entries, {0xF8340: names}).location(0xF838F)
    assert location.inlined == ()
    assert (location.file, location.line) == ("write.c", 26)  # the instruction's own line


def test_other_inlined_functions_stay() -> None:
    entries = [Entry("helper", "a.c", 5), Entry("__GI___libc_write", "write.c", 26),
               Entry("__GI___write", "write.c", 24, sym_addr=0xF8340)]
    names = frozenset({"__GI___write", "__GI___libc_write"})
    location = module(entries, {0xF8340: names}).location(0xF838F)
    assert [f.function for f in location.inlined] == ["helper"]
    # helper was called from the alias's line, which stays its call site
    assert (location.inlined[0].file, location.inlined[0].line) == ("write.c", 26)


def test_the_same_name_twice_is_left_as_addr2line_shows_it() -> None:
    entries = [Entry("check_one_fd", "check_fds.c", 57),
               Entry("check_one_fd", "check_fds.c", 40, sym_addr=0x27440)]
    location = module(entries, {}).location(0x2747D)
    assert [f.function for f in location.inlined] == ["check_one_fd"]


def test_a_different_function_is_not_an_alias() -> None:
    entries = [Entry("memcpy_helper", "m.c", 3),
               Entry("__GI___write", "write.c", 24, sym_addr=0xF8340)]
    location = module(entries, {0xF8340: frozenset({"__GI___write", "write"})}).location(1)
    assert [f.function for f in location.inlined] == ["memcpy_helper"]
