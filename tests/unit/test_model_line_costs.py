"""Line and address costs in the model: recording, merging, reset, save/load, listing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model import storage
from proftui.collectors.model.diff import subtract
from proftui.collectors.model.lines import (
    add_code_cost,
    function_addresses,
    function_lines,
    merge_code_costs,
)
from proftui.collectors.model.profile import SAMPLES, CodeSite, Frame, Profile, ProfileMeta
from proftui.collectors.model.source import address_listing, annotate, source_listing
from proftui.collectors.model.sourcefiles import ORIGINS

MOD = "/opt/app/prog"
SRC = "/src/prog.c"
HDR = "/src/util.h"
F = Frame("f", MOD, SRC, 3, 0x1000, "f")  # f: 0x1000..0x1040, defined at line 3
G = Frame("g", MOD, SRC, 10, 0x1040, "g")  # g: 0x1040.., defined at line 10
TEXT = "".join(f"line {i}\n" for i in range(1, 13))


def profile_with_costs() -> Profile:
    """f: 5 samples on line 4 (two addresses), 2 on line 5, 1 inlined from util.h:7 (1/8 = 12.5%);
    g: 4 on line 11.  Frames interned, so the fallback owner search sees them."""
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    profile.frames.intern(F)
    profile.frames.intern(G)
    for address, line, n in ((0x1004, 4, 3.0), (0x1008, 4, 2.0), (0x100c, 5, 2.0)):
        add_code_cost(profile, MOD, address, CodeSite(F.address, SRC, line), [n])
    add_code_cost(profile, MOD, 0x1010, CodeSite(F.address, HDR, 7), [1.0])
    add_code_cost(profile, MOD, 0x1044, CodeSite(G.address, SRC, 11), [4.0])
    return profile


def test_recording_adds_per_address_and_per_line() -> None:
    profile = profile_with_costs()
    add_code_cost(profile, MOD, 0x1004, CodeSite(F.address, SRC, 4), [1.0])  # a second thread
    assert profile.address_costs[(MOD, 0x1004)] == [4.0]
    assert profile.line_costs[(SRC, 4)] == [6.0]
    assert profile.line_costs[(HDR, 7)] == [1.0]
    assert function_addresses(profile, F) == {0x1004: [4.0], 0x1008: [2.0], 0x100c: [2.0],
                                              0x1010: [1.0]}
    lines, exact = function_lines(profile, F)
    assert exact and lines == {(SRC, 4): [6.0], (SRC, 5): [2.0], (HDR, 7): [1.0]}
    assert function_lines(profile, G) == ({(SRC, 11): [4.0]}, True)
    # An address with no known line still has its cost; it is in no line.
    add_code_cost(profile, MOD, 0x1020, CodeSite(F.address, None, None), [9.0])
    assert profile.address_costs[(MOD, 0x1020)] == [9.0]
    assert sum(c[0] for c in profile.line_costs.values()) == 13.0


def test_owner_without_sites_is_the_closest_function_below() -> None:
    """Imported or older profiles have address costs but no sites."""
    profile = profile_with_costs()
    profile.address_sites.clear()
    assert set(function_addresses(profile, F)) == {0x1004, 0x1008, 0x100c, 0x1010}
    assert set(function_addresses(profile, G)) == {0x1044}
    # Without sites the lines of a function are those of its file (every function's).
    lines, exact = function_lines(profile, F)
    assert not exact and lines == {(SRC, 4): [5.0], (SRC, 5): [2.0], (SRC, 11): [4.0]}


def test_merge_adds_two_profiles() -> None:
    a, b = profile_with_costs(), profile_with_costs()
    merge_code_costs(a, b)
    assert a.address_costs[(MOD, 0x1044)] == [8.0]
    assert a.line_costs[(SRC, 4)] == [10.0]
    assert a.address_sites == b.address_sites
    other_metrics = Profile(ProfileMeta(mode="x"), ())
    with pytest.raises(ValueError):
        merge_code_costs(a, other_metrics)


def test_reset_subtracts_costs_but_keeps_sites() -> None:
    now, baseline = profile_with_costs(), profile_with_costs()
    add_code_cost(now, MOD, 0x1004, CodeSite(F.address, SRC, 4), [10.0])
    now = subtract(now, baseline)
    assert now.address_costs[(MOD, 0x1004)] == [10.0]
    assert now.line_costs[(SRC, 4)] == [10.0]
    assert now.line_costs[(SRC, 11)] == [0.0]
    assert now.address_sites[(MOD, 0x1044)] == CodeSite(G.address, SRC, 11)


def test_line_costs_survive_saving(tmp_path: Path) -> None:
    profile = profile_with_costs()
    profile.meta.lines_note = "coarse"
    profile.finalize()
    path = tmp_path / "run.proftui"
    storage.save(profile, path, embed_sources=False)
    loaded = storage.load(path)
    assert loaded.address_sites == profile.address_sites
    assert loaded.address_costs == profile.address_costs
    assert loaded.line_costs == profile.line_costs
    assert loaded.meta.lines_note == "coarse"
    assert function_lines(loaded, F) == function_lines(profile, F)


def test_files_without_sites_still_load(tmp_path: Path) -> None:
    profile = profile_with_costs().finalize()
    doc = storage.profile_to_dict(profile)
    del doc["address_sites"]  # as a file of a version that saved no sites
    old = tmp_path / "old.proftui"
    old.write_bytes(gzip.compress(json.dumps(doc).encode()))
    loaded = storage.load(old)
    assert loaded.address_sites == {} and loaded.line_costs == profile.line_costs
    assert set(function_addresses(loaded, F)) == {0x1004, 0x1008, 0x100c, 0x1010}


def test_bad_sites_are_refused(tmp_path: Path) -> None:
    doc = storage.profile_to_dict(profile_with_costs().finalize())
    doc["address_sites"] = [[MOD, 0x1004, None, 12, 4]]  # file must be text
    bad = tmp_path / "bad.proftui"
    bad.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(ProftuiError, match=r"not a valid proftui profile: address_sites\[0\]\[3\]"):
        storage.load(bad)


def test_sources_of_sites_are_embedded(tmp_path: Path) -> None:
    header = tmp_path / "util.h"
    header.write_text("static inline int h(void) { return 1; }\n")
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    add_code_cost(profile, MOD, 0x10, CodeSite(None, str(header), 1), [1.0])
    # as a symbolizer does: a unit compiled in tmp_path named the header
    ORIGINS.note_module(str(tmp_path), lambda: frozenset({str(tmp_path)}))
    ORIGINS.note_path(str(header), str(tmp_path))
    assert storage.gather_sources(profile) == {str(header): header.read_text()}


def test_source_listing_of_an_embedded_source() -> None:
    profile = profile_with_costs()
    profile.sources[SRC] = TEXT
    listing = source_listing(profile, F)
    assert listing is not None and listing.kind == "source" and listing.path == SRC
    costs = {row.number: row.cost for row in listing.lines if row.cost}
    assert costs == {4: [5.0], 5: [2.0]}  # only f's lines: g's line 11 is not f's cost
    assert listing.function_cost == [8.0]  # util.h's inlined line counts for f
    assert listing.lines[listing.hottest()].number == 4
    assert listing.focus == 2  # f's definition line, 0-based
    assert "12% on lines inlined from other files (util.h)" in listing.note


def test_source_listing_opens_the_header_a_function_spends_nearly_all_in() -> None:
    """Nearly all of f's cost inlined from util.h (1 stray sample of 41 on its own loop):
    the listing opens util.h, f's own file comes next (a real template fixture once
    opened its .cpp for one sample on the loop line)."""
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    profile.frames.intern(F)
    add_code_cost(profile, MOD, 0x1004, CodeSite(F.address, SRC, 4), [1.0])
    add_code_cost(profile, MOD, 0x1010, CodeSite(F.address, HDR, 7), [40.0])
    profile.sources.update({SRC: TEXT, HDR: TEXT})
    listing = source_listing(profile, F)
    assert listing is not None and listing.path == HDR
    assert "98% of the function" in listing.note
    own = source_listing(profile, F, path=SRC)
    assert own is not None and own.path == SRC


def test_source_listing_without_the_source_lists_the_costed_lines() -> None:
    profile = profile_with_costs()  # no embedded source, and /src/prog.c does not exist here
    listing = source_listing(profile, F)
    assert listing is not None and listing.kind == "lines"
    assert listing.note.startswith(f"source not available: {SRC}")
    assert [(row.number, row.cost) for row in listing.lines] == [(4, [5.0]), (5, [2.0])]


def test_address_listing_names_lines() -> None:
    profile = profile_with_costs()
    listing = address_listing(profile, G)
    assert listing.kind == "addresses"
    assert [row.number for row in listing.lines] == [0x1044]
    assert listing.lines[0].text == "prog+0x1044  prog.c:11"
    inlined = Frame("h", MOD, HDR, 7, None, "h", inlined=True)
    assert address_listing(profile, inlined).kind == "none"


class _NoBinary:
    """A MachineCode whose binary is gone, or was rebuilt (`rebuilt`)."""

    def __init__(self, rebuilt: bool = False, instructions: list[tuple[int, str]] | None = None
                 ) -> None:
        self._rebuilt, self._instructions = rebuilt, instructions or []

    def instructions(self, frame: Frame) -> list[tuple[int, str]]:
        return self._instructions

    def dwarf_lines(self, frame: Frame, addresses: list[int]) -> dict[int, tuple[str, int]]:
        return {}

    def inlined_addresses(self, frame: Frame) -> dict[int, list[float]]:
        return {}

    def rebuilt(self, frame: Frame) -> bool:
        return self._rebuilt


def no_text(path: str) -> list[str] | None:
    return None


def test_annotate_falls_back_from_source_to_disassembly_to_addresses() -> None:
    """The listing choice is the model's, given what the binary and the disk hold."""
    profile = profile_with_costs()
    code = _NoBinary(instructions=[(0x1004, "add"), (0x1008, "mul")])
    assert annotate(profile, G, "disassembly", code=code, text_of=no_text).kind == "disassembly"
    shown = annotate(profile, Frame("x", MOD, None, None, 0x2000, "x"), code=code,
                     text_of=no_text)
    assert shown.kind == "disassembly" and shown.note == "no source file: disassembly"
    rebuilt = annotate(profile, G, "disassembly", code=_NoBinary(rebuilt=True), text_of=no_text)
    assert rebuilt.kind == "addresses" and "rebuilt" in rebuilt.note
