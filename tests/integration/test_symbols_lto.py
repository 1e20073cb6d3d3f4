"""Inline chains of link-time-optimised programs against binutils, address by address.

Under -flto a function of one source file is inlined into another, and its
DWARF abstract origin lives in another compile unit than the code: the file
of every frame must still be the file the code comes from (issue 13 item 5).

binutils 2.40's addr2line names the LTO partition ("<artificial>") instead
of the source file for some rows; where it does, llvm-addr2line (when
installed) gives the reference, otherwise only the line is compared and the
file must be a real source file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.symbols.elf import ElfFile
from proftui.collectors.symbols.symbolizer import Symbolizer

pytestmark = pytest.mark.skipif(shutil.which("addr2line") is None,
                                reason="addr2line (binutils) missing")
ARTIFICIAL = "<artificial>"
PY_LTO = Path("/usr/bin/python3.11")

Chain = list[tuple[str, str | None, int | None]]  # (function, file, line), innermost first


def reference(tool: str, binary: Path, addresses: list[int]) -> list[Chain]:
    """`tool -f -i -a` answers per address, innermost first, paths normalized."""
    out = subprocess.run([tool, "-f", "-i", "-a", "-e", str(binary), *map(hex, addresses)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    chains: list[Chain] = []
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            chains.append([])
            i += 1
            continue
        function, where = out[i], out[i + 1].split(" (discriminator")[0]
        i += 2
        file, _, line = where.rpartition(":")
        chains[-1].append((function, None if file == "??" else os.path.normpath(file),
                           int(line) if line.isdigit() and line != "0" else None))
    assert len(chains) == len(addresses)
    return chains


def mine(symbolizer: Symbolizer, binary: Path, address: int) -> Chain:
    """Our chain at `address`, checked for consistency with `frames`."""
    loc = symbolizer.location(str(binary), address)
    frames = symbolizer.frames(str(binary), address)
    outer = re.sub(r"( \[clone [^]]*\])+$", "", frames[0].function)  # DWARF names no clones
    names = [i.function for i in loc.inlined] + [outer]
    places = [(loc.file, loc.line)] + [(i.file, i.line) for i in loc.inlined]
    # frames(): the real function, then its inlined callees outermost first.
    assert [f.function for f in frames[1:]] == [i.function for i in reversed(loc.inlined)]
    assert not frames[0].inlined and all(f.inlined for f in frames[1:])
    # Each inlined frame carries the file its code comes from (its own line rows).
    assert [f.file for f in frames[1:]] == [p[0] for p in reversed(places[:-1])]
    return [(n, p[0], p[1]) for n, p in zip(names, places, strict=True)]


def compare(binary: Path, debug: Path, functions: list[str]) -> list[Chain]:
    """Our chains for every address of `functions` against addr2line; returns ours."""
    symbolizer = Symbolizer(use_cache=False)
    module = symbolizer.module(str(binary))
    assert module.debug_path == str(debug)
    addresses = [a for f in module.functions if f.raw_name in functions
                 for a in range(f.start, f.start + f.size)]
    assert len(addresses) > 100, [f.raw_name for f in module.functions]
    theirs_all = reference("addr2line", debug, addresses)
    llvm = shutil.which("llvm-addr2line")
    odd = [a for a, t in zip(addresses, theirs_all, strict=True)
           if any(f and f.endswith(ARTIFICIAL) for _, f, _ in t)]
    second = dict(zip(odd, reference(llvm, debug, odd), strict=True)) if llvm and odd else {}
    ours_all = []
    for address, theirs in zip(addresses, theirs_all, strict=True):
        ours = mine(symbolizer, binary, address)
        ours_all.append(ours)
        if address in second:
            theirs = second[address]
        if address in odd and not second:
            # Same functions and lines; the file only has to be a real one.
            assert [(n, ln) for n, _, ln in ours] == [(n, ln) for n, _, ln in theirs], hex(address)
            assert all(f and not f.endswith(ARTIFICIAL) and Path(f).is_absolute()
                       for _, f, _ in ours if f), hex(address)
        else:
            assert ours == theirs, hex(address)
    return ours_all


def test_lto_fixture_matches_addr2line(compile_c) -> None:
    binary = compile_c(["sym_lto_main.c", "sym_lto_util.c"], ["-O2", "-g", "-flto"])
    chains = compare(binary, binary, ["churn", "main"])
    util = str(Path(__file__).parents[1] / "fixtures" / "sym_lto_util.c")
    # blend() and weigh() of the other unit really were inlined into churn().
    assert any(c[-1][0] == "churn" and ("blend", util) in [(n, f) for n, f, _ in c]
               for c in chains)
    assert any(c[0][:2] == ("weigh", util) for c in chains)


def test_python_lto_build_pymalloc_chain() -> None:
    """Debian's python3.11 is built with LTO; pymalloc_alloc is inlined across units."""
    build_id = ""
    if PY_LTO.is_file():
        with ElfFile(PY_LTO) as elf:
            build_id = elf.build_id()
    debug = Path("/usr/lib/debug/.build-id") / build_id[:2] / f"{build_id[2:]}.debug"
    if not build_id or not debug.is_file():
        pytest.skip("python3.11 with its debug file (Debian python3.11-dbg) missing")
    chains = compare(PY_LTO, debug, ["PyObject_Malloc", "_PyObject_Malloc.lto_priv.0"])
    pymalloc = [f for c in chains for n, f, _ in c if n == "pymalloc_alloc"]
    assert pymalloc and {os.path.basename(f or "") for f in pymalloc} == {"obmalloc.c"}
