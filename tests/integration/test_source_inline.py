"""Source and disassembly interleaved, inline-aware (issue 15): the templates of a C++
header, inlined into crunch() at -O2, annotate the header's lines.

tests/fixtures/src_tmpl.cpp + src_tmpl.hpp, compiled -O2 -g, run under the sampler;
the listing's line of every instruction and each line's cost are checked against
binutils' `addr2line -i` (a DWARF reader independent of proftui's SymCache) on the
addresses of the same run.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from proftui.collectors.annotate import annotate
from proftui.collectors.model.storage import load, save
from proftui.collectors.model.views import flat_profile

from tests.helpers.reference import addr2line_innermost
from tests.helpers.src_tmpl import (
    HDR_HOT,
    HDR_WARM,
    HEADER,
    SOURCE,
    crunch_of,
    record_tmpl,
    tmpl_binary,
)


def symbol_range(binary: Path, name: str) -> tuple[int, int]:
    """[start, end) of `name` from binutils' symbol table (`nm -S`)."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(binary)], check=True,
                         capture_output=True, text=True).stdout
    for row in out.splitlines():
        parts = row.split(maxsplit=3)
        if len(parts) == 4 and parts[3].startswith(name):
            return int(parts[0], 16), int(parts[0], 16) + int(parts[1], 16)
    raise AssertionError(f"{name} not in nm's output")


def test_header_templates_annotate_like_addr2line() -> None:
    binary, profile = record_tmpl()
    crunch = crunch_of(profile)
    start, end = symbol_range(binary, "crunch(")
    assert crunch.address == start

    # the independent answer: addr2line's innermost line of each sampled address of crunch
    sampled = {a: c for (m, a), c in profile.address_costs.items()
               if m == crunch.module and start <= a < end}
    assert sum(c[0] for c in sampled.values()) > 100, "too few samples in crunch"
    truth = addr2line_innermost(binary, sorted(sampled))
    expected: dict[tuple[str, int], float] = defaultdict(float)
    for address, cost in sampled.items():
        expected[truth[address]] += cost[0]
    assert str(HEADER) in {f for f, _ in expected}, "nothing of the header was sampled"

    listing = annotate(profile, crunch, "interleaved")
    assert listing.kind == "interleaved"
    insns = [i for i, row in enumerate(listing.lines) if row.kind == "insn"]
    addresses = [listing.lines[i].number for i in insns]
    assert addresses[0] == start and all(start <= a < end for a in addresses)  # type: ignore[operator]
    # every instruction sits under its innermost line, as addr2line reads the DWARF
    every = addr2line_innermost(binary, addresses)  # type: ignore[arg-type]
    got: dict[tuple[str, int], float] = defaultdict(float)
    head = None
    for row in listing.lines:
        if row.kind == "head":
            head = (row.file, row.number)
        elif row.kind == "insn":
            assert row.number is not None
            if row.number in every:
                assert head == every[row.number], f"0x{row.number:x}: {head} != addr2line"
            if row.cost:
                got[head] += row.cost[0]  # type: ignore[index]
    assert dict(got) == pytest.approx(dict(expected))
    # heads carry the sum of their instructions
    for i, row in enumerate(listing.lines):
        if row.kind == "head" and row.cost:
            below = []
            for later in listing.lines[i + 1:]:
                if later.kind != "insn":
                    break
                below.append(later.cost[0] if later.cost else 0.0)
            assert row.cost[0] == pytest.approx(sum(below))
    # the header's template loop is where the time goes (3/4 of crunch by construction)
    hottest = listing.lines[listing.hottest()]  # type: ignore[index]
    assert hottest.kind == "insn" and every[hottest.number] == (str(HEADER), HDR_HOT)  # type: ignore[index]
    total = sum(expected.values())
    assert expected[(str(HEADER), HDR_HOT)] > 0.5 * total
    assert 0 < expected[(str(HEADER), HDR_WARM)] < expected[(str(HEADER), HDR_HOT)]

    # the source listing opens the header (all of crunch's cost is there), at the hot line
    source = annotate(profile, crunch, "source")
    assert source.kind == "source" and source.path == str(HEADER)
    assert source.files[0] == str(HEADER) and str(SOURCE) in source.files
    assert source.lines[source.hottest()].number == HDR_HOT  # type: ignore[index]
    header_costs = {row.number: row.cost[0] for row in source.lines if row.cost}
    assert header_costs == pytest.approx({line: c for (f, line), c in expected.items()
                                          if f == str(HEADER)})
    own = annotate(profile, crunch, "source", str(SOURCE))
    assert own.path == str(SOURCE) and "inlined from other files (src_tmpl.hpp)" in own.note


def test_inlined_template_opens_on_its_own_lines() -> None:
    """The flat profile's template entries (inlined frames) annotate their own lines
    only, with their own self cost (the tree's), found through the binary's inline
    chains: churn() on HDR_HOT, stir() on HDR_WARM."""
    binary, profile = record_tmpl("60")
    flat = {e.frame: e for e in flat_profile(profile)}
    for name, line in (("Acc<unsigned long>::churn(", HDR_HOT),
                       ("Acc<unsigned long>::stir(", HDR_WARM)):
        frame = next(f for f in profile.frames if f.inlined and f.function.startswith(name))
        listing = annotate(profile, frame, "source")
        assert listing.path == str(HEADER)
        costed = {row.number: row.cost[0] for row in listing.lines if row.cost}
        # only the template's body ({ loop }), not the other template's lines
        assert set(costed) <= set(range(line - 2, line + 2)), (name, costed)
        assert listing.lines[listing.hottest()].number == line  # type: ignore[index]
        assert sum(costed.values()) == pytest.approx(flat[frame].self_cost[0])
        # no instructions of its own: interleaved within crunch(), at its own hottest one
        mixed = annotate(profile, frame, "interleaved")
        assert mixed.kind == "interleaved" and mixed.title.startswith("crunch(")
        assert mixed.opens_at is not None and "inlined into crunch(" in mixed.note
        address = mixed.lines[mixed.opens_at].number
        assert address is not None
        assert addr2line_innermost(binary, [address])[address] == (str(HEADER), line)


def test_saved_profile_annotates_the_header_without_its_files(tmp_path: Path) -> None:
    _binary, profile = record_tmpl("60")
    saved = tmp_path / "tmpl.proftui"
    save(profile, saved, embed_sources=True)
    loaded = load(saved)
    assert str(HEADER) in loaded.sources, "the header's text was not embedded"
    crunch = crunch_of(loaded)
    source = annotate(loaded, crunch, "source")
    assert source.path == str(HEADER)
    assert source.lines[source.hottest()].number == HDR_HOT  # type: ignore[index]
    assert "/* HDR_HOT */" in source.lines[source.hottest()].text  # type: ignore[index]


def test_rebuilt_binary_is_not_disassembled_with_old_costs(tmp_path: Path) -> None:
    """A profile whose binary was rebuilt since (another build-id) keeps its source
    annotation (recorded lines) but shows no instructions of the new binary."""
    binary = tmp_path / "src_tmpl"
    shutil.copy(tmpl_binary(), binary)
    _binary, profile = record_tmpl("40", binary)
    crunch = crunch_of(profile)
    assert annotate(profile, crunch, "interleaved").kind == "interleaved"
    subprocess.run(["g++", "-O1", "-g", "-o", str(binary), str(SOURCE)], check=True,
                   capture_output=True)
    for mode in ("interleaved", "disassembly"):
        listing = annotate(profile, crunch, mode)  # type: ignore[arg-type]
        assert listing.kind == "addresses" and "rebuilt" in listing.note, (mode, listing.note)
    source = annotate(profile, crunch, "source")
    assert source.lines[source.hottest()].number == HDR_HOT  # type: ignore[index]
