"""Names of inlined C++ functions: qualified and demangled like binutils' addr2line.

tests/fixtures/inl_names.cpp (g++ -O2 -g) inlines std::map / std::vector
members, a class template's method, a method of a class in an anonymous
namespace (no linkage name in its DWARF) and A::step / B::step into its hot
loop.  The sampler records it; the sampled addresses and every address of
work::hot are symbolized by proftui and by `addr2line -f -i -C` on the same
binary.  Where binutils has no linkage name to go on it prints the bare
DW_AT_name or the caller's name; there the reference is the out-of-line
copy's symbol (`nm -C`; the fixture makes one through a member pointer).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile
from proftui.collectors.symbols.symbolizer import Symbolizer

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler

HOT = "_ZN4work3hotEl"  # work::hot(long)


def _binary() -> Path:
    for tool in ("addr2line", "nm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (binutils) is not installed")
    return build_fixture("inl_names.cpp", ["-O2", "-g"], compiler="g++")


def _record(binary: Path) -> Profile:
    return run_sampler(binary, "4000000")[0]


def _symbols(binary: Path) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """Raw name -> [start, end), and bare name -> demangled names of defined functions."""
    raw = subprocess.run(["nm", "-S", "--defined-only", str(binary)], check=True,
                         capture_output=True, text=True).stdout
    shown = subprocess.run(["nm", "-S", "-C", "--defined-only", str(binary)], check=True,
                           capture_output=True, text=True).stdout
    ranges, by_bare = {}, {}
    for row, pretty in zip(raw.splitlines(), shown.splitlines(), strict=True):
        parts, nice = row.split(maxsplit=3), pretty.split(maxsplit=3)
        if len(parts) == 4 and parts[2] in "tT":
            ranges[parts[3]] = (int(parts[0], 16), int(parts[0], 16) + int(parts[1], 16))
            by_bare.setdefault(_bare(nice[3]), nice[3])
    return ranges, by_bare


def _bare(name: str) -> str:
    """"void ns::C<int>::f<long>(int) const" -> "f": no scope, template arguments,
    parameters or return type."""
    name = name.replace("(anonymous namespace)", "")
    out, depth = [], 0
    for i, ch in enumerate(name):
        if ch == "<" and not name[:i].endswith("operator"):
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(" and out and not "".join(out).endswith("operator"):
                break
            out.append(ch)
    text = "".join(out).strip()
    return text.rsplit(" ", 1)[-1].rsplit("::", 1)[-1] if " " in text and \
        not text.rsplit("::", 1)[-1].startswith("operator") else text.rsplit("::", 1)[-1]


def _addr2line(binary: Path, addresses: list[int]) -> dict[int, list[str]]:
    """address -> function names of its inline chain, innermost first."""
    out = subprocess.run(["addr2line", "-f", "-i", "-C", "-a", "-e", str(binary)],
                         input="".join(f"0x{a:x}\n" for a in addresses),
                         check=True, capture_output=True, text=True).stdout.splitlines()
    chains: dict[int, list[str]] = {}
    current: list[str] = []
    lines = iter(out)
    for line in lines:
        if line.startswith("0x") and ":" not in line:
            current = chains.setdefault(int(line, 16), [])
            continue
        current.append(line)
        next(lines)  # its file:line
    return chains


def test_inlined_names_match_addr2line() -> None:
    binary = _binary()
    profile = _record(binary)
    ranges, by_bare = _symbols(binary)
    start, end = ranges[HOT]
    module = str(binary)
    sampled = sorted(a for (m, a) in profile.address_costs if m == module)
    assert sampled, "no sample landed in the fixture"
    addresses = sorted(set(sampled) | set(range(start, end)))
    reference = _addr2line(binary, addresses)
    symbolizer = Symbolizer(use_cache=False)
    out_of_line = {re.sub(r" \[clone [^]]*\]", "", n) for n in by_bare.values()}
    compared = lost = exact_lost = 0
    c_names: set[str] = set()
    for address in addresses:
        mine = [f.function for f in reversed(symbolizer.frames(module, address))]
        theirs = reference[address]
        assert len(mine) == len(theirs), (hex(address), mine, theirs)
        inlined = symbolizer.location(module, address).inlined  # innermost first
        for i in range(len(theirs) - 1):
            raw = inlined[i].raw_name
            if "::" not in mine[i]:
                # only C functions (from C headers: atol in <stdlib.h>) stay bare
                where = inlined[i].decl_file or ""
                assert where.startswith("/usr/include/") and "/c++/" not in where, \
                    (hex(address), mine[i], where)
                assert mine[i] == theirs[i], (hex(address), mine[i], theirs[i])
                c_names.add(mine[i])
            elif raw.startswith("_Z"):
                # a linkage name: binutils demangles the same one
                assert mine[i] == theirs[i], (hex(address), mine[i], theirs[i])
            else:
                # no linkage name: binutils prints the bare DW_AT_name, or the caller's
                # name, or (a function inlined into its own out-of-line copy: _M_erase's
                # recursion) that copy's symbol; the reference is the out-of-line copy
                # where one exists, else the same short name, qualified
                lost += 1
                exact_lost += mine[i] in out_of_line
                assert _bare(mine[i]) == _bare(raw), (hex(address), mine[i], raw)
                copy = re.sub(r" \[clone [^]]*\]", "", theirs[i])
                assert theirs[i] in (raw, *theirs[i + 1:]) or (
                    copy in out_of_line and _bare(copy) == _bare(raw)), \
                    (hex(address), theirs[i], raw)
            compared += 1
    assert compared > 200, "too few inlined frames to compare"
    assert lost and exact_lost, "no inlined function without linkage name was checked"
    # what the profile shows: names of the same symbolizer, none of them bare
    names = {f.function for f in profile.frames if f.module == module and f.inlined}
    assert names and all("::" in n or n in c_names for n in names), names


def test_row_names_are_as_qualified_as_the_references() -> None:
    binary = _binary()
    profile = _record(binary)
    _, by_bare = _symbols(binary)
    module = str(binary)
    rows = [e.frame for e in flat_profile(profile) if e.frame.module == module]
    # A::step and B::step: both inlined into the loop, each its own row
    steps = {f.function for f in rows if _bare(f.function) == "step"}
    a2l = set()
    for chain in _addr2line(binary, sorted({a for (m, a) in profile.address_costs
                                            if m == module})).values():
        a2l.update(chain)
    assert len({n for n in a2l if _bare(n) == "step"}) == 2
    assert steps == {n for n in a2l if _bare(n) == "step"}
    assert len([f for f in rows if _bare(f.function) == "step"]) == 2
    # No row is a bare name that the reference qualifies.
    qualified = {_bare(n) for n in a2l | set(by_bare.values()) if "::" in n}
    bare_rows = [f.function for f in rows if "::" not in f.function and "(" not in f.function]
    assert not [n for n in bare_rows if n in qualified], bare_rows
