"""Line costs recorded at collection time survive save, load and the loss of the
binary and its sources (issue 12), for every collector, checked against binutils
(`addr2line -i`) and GNU gprof (`gprof -l`) on the same run.

tests/fixtures/line_hot.c: work() spends ~3/4 of its time on the HOT line and the
rest on the WARM line and the line of mix(), inlined into it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.annotate import annotate
from proftui.collectors.instrument.collector import InstrumentCollector
from proftui.collectors.model.lines import function_addresses, function_lines
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Listing
from proftui.collectors.sampler.collector import SamplerCollector

from tests.helpers.collect import attach
from tests.helpers.line_hot import (
    HOT,
    MIX,
    SOURCE,
    WARM,
    WORK,
    build_copy,
    record,
    save_and_move_away,
    work_of,
)
from tests.helpers.reference import addr2line_lines, gprof_l_of_a_run, proftui_line_seconds


def by_line(listing: Listing) -> dict[int, float]:
    return {row.number: row.cost[0] for row in listing.lines
            if row.number is not None and row.cost is not None}


def check_sites(profile: Profile, binary: Path) -> Frame:
    """work() has more than 50 costed samples, and every costed address of it has as its
    recorded line addr2line's innermost line in the same binary; work()'s frame."""
    work = work_of(profile)
    owned = function_addresses(profile, work)
    assert sum(c[0] for c in owned.values()) > 50, "too few samples in work()"
    if shutil.which("addr2line"):
        reference = addr2line_lines(binary, sorted(owned))
        for address in owned:
            site = profile.address_sites[(work.module, address)]
            assert (Path(site.file or "").name, site.line) == reference[address], hex(address)
    return work


def test_sampler_line_costs_open_without_binary_or_source(tmp_path: Path) -> None:
    binary, source = build_copy(tmp_path, [])
    profile = record(SamplerCollector, binary)
    work = check_sites(profile, binary)
    assert {profile.address_sites[(work.module, a)].function
            for a in function_addresses(profile, work)} == {work.address}

    loaded = save_and_move_away(profile, tmp_path, binary, source)
    listing = annotate(loaded, work_of(loaded))
    assert listing.kind == "source" and listing.path == str(source)
    lines = by_line(listing)
    total = sum(lines.values())
    assert listing.lines[listing.hottest()].number == HOT
    assert "/* HOT */" in listing.lines[listing.hottest()].text
    assert lines[HOT] > 1.5 * (lines.get(WARM, 0) + lines.get(MIX, 0))
    assert lines[HOT] + lines.get(WARM, 0) + lines.get(MIX, 0) >= 0.9 * total
    assert listing.function_cost[0] == pytest.approx(total)
    # The costs equal the samples the call tree gives work() as self cost.
    work_id = loaded.frames.find(work_of(loaded))
    inlined_ids = {i for i, f in enumerate(loaded.frames) if f.inlined}
    tree_self = sum(n.self_cost[0] for n in loaded.tree.nodes()
                    if n.frame_id == work_id or (n.frame_id in inlined_ids
                                                 and n.parent is not None
                                                 and n.parent.frame_id == work_id))
    assert total == pytest.approx(tree_self)

    # Without embedded sources: the costed lines are listed by number, and the pane says why.
    bare = save_and_move_away(profile, tmp_path, embed=False)
    listing = annotate(bare, work_of(bare))
    assert listing.kind == "lines"
    assert listing.note.startswith(f"source not available: {source}")
    assert by_line(listing) == lines
    assert listing.lines[listing.hottest()].number == HOT

    # No binary: the disassembly falls back to the costed addresses, with their lines.
    listing = annotate(loaded, work_of(loaded), prefer="disassembly")
    assert listing.kind == "addresses"
    assert f"{SOURCE}:{HOT}" in listing.lines[listing.hottest()].text


def test_attach_line_costs_open_without_binary_or_source(tmp_path: Path) -> None:
    binary, source = build_copy(tmp_path, ["-mno-omit-leaf-frame-pointer"])
    target = subprocess.Popen([str(binary), "600"], stdout=subprocess.PIPE, text=True)
    try:
        collector = attach(target.pid, frequency_hz=500)
        profile = collector.wait()
        collector.stop()
        assert target.communicate(timeout=30)[0] == "line_hot 0\n"
    finally:
        if target.poll() is None:
            target.kill()
            target.wait()
    check_sites(profile, binary)
    loaded = save_and_move_away(profile, tmp_path, binary, source)
    listing = annotate(loaded, work_of(loaded))
    assert listing.kind == "source"
    assert listing.lines[listing.hottest()].number == HOT


@pytest.mark.skipif(shutil.which("gprof") is None, reason="gprof (binutils) missing")
def test_gprof_line_costs_match_gprof_l(tmp_path: Path) -> None:
    binary, source = build_copy(tmp_path, ["-pg"])
    # GNU gprof's line-by-line flat profile of the same gmon.out: seconds per line.
    profile, seconds, out = gprof_l_of_a_run([str(binary), "150"])
    reference = {line: s for (file, line), s in seconds.items() if file == SOURCE}
    ours = {line: s for (file, line), s in proftui_line_seconds(profile).items()
            if file == SOURCE}
    assert reference.get(HOT, 0) > 0.1, out
    for line in set(reference) | set(ours):
        assert ours.get(line, 0.0) == pytest.approx(reference.get(line, 0.0), abs=0.006), line

    loaded = save_and_move_away(profile, tmp_path, binary, source)
    listing = annotate(loaded, work_of(loaded))
    assert listing.kind == "source"
    assert listing.lines[listing.hottest()].number == HOT
    lines = by_line(listing)
    assert sum(lines.values()) / 1e9 == pytest.approx(sum(ours.values()), abs=0.006)


def test_instrument_sampled_line_costs_are_where_ticks_landed(tmp_path: Path) -> None:
    """Instrument mode's default (sampled) time costs the lines its ticks landed on, as
    the sampler's samples do: addr2line's lines, HOT the hottest."""
    binary, source = build_copy(tmp_path, ["-finstrument-functions"])
    profile = record(InstrumentCollector, binary, frequency_hz=4000)
    work = check_sites(profile, binary)
    listing = annotate(profile, work)
    assert listing.kind == "source" and listing.path == str(source)
    assert listing.lines[listing.hottest()].number == HOT
    assert "definition line" not in listing.note


def test_instrument_line_costs_on_definition_lines(tmp_path: Path) -> None:
    """--timed: the hooks see function entries only, so self cost goes on each function's
    definition line.  mix() is left uninstrumented: gcc hooks inlined functions too, and
    the hooks' compensation times 100 M calls of it left work()'s own second of self
    time anywhere from 0 to 2 s (0: no line to check)."""
    binary, source = build_copy(tmp_path, ["-finstrument-functions",
                                           "-finstrument-functions-exclude-function-list=mix"])
    profile = record(InstrumentCollector, binary, "100", timed=True)
    work = work_of(profile)
    work_id = profile.frames.find(work)
    tree_self = sum(n.self_cost[0] for n in profile.tree.nodes() if n.frame_id == work_id)
    lines, exact = function_lines(profile, work)
    # The definition line is where the function's code starts (its first line-table
    # row: the declaration, or the opening brace below it, as GCC placed it).
    assert work.line in (WORK, WORK + 1)
    assert exact and lines == {(str(source), work.line): [pytest.approx(tree_self)]}

    loaded = save_and_move_away(profile, tmp_path, binary, source)
    listing = annotate(loaded, work_of(loaded))
    assert listing.kind == "source"
    hottest = listing.lines[listing.hottest()]
    assert hottest.number == work.line and "void work(" in listing.lines[WORK - 1].text
    assert "definition line" in listing.note
