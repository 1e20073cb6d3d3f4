"""tests/fixtures/src_tmpl.cpp for the source tests: the templates of src_tmpl.hpp,
inlined into crunch() at -O2, hold nearly all its time (most on the HDR_HOT line)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.source import SourcePane
from proftui.tui.widgets.flat_table import FlatTable
from textual.pilot import Pilot

from tests.conftest import FIXTURES, build_fixture
from tests.helpers.collect import run_to_end
from tests.helpers.tui import flat_ready, wait_for

HEADER = FIXTURES / "src_tmpl.hpp"
SOURCE = FIXTURES / "src_tmpl.cpp"


def line_of(path: Path, marker: str) -> int:
    """The 1-based line of `path` holding `marker`."""
    return next(i + 1 for i, t in enumerate(path.read_text().splitlines()) if marker in t)


HDR_HOT, HDR_WARM = line_of(HEADER, "/* HDR_HOT */"), line_of(HEADER, "/* HDR_WARM */")


def tmpl_binary() -> Path:
    """src_tmpl.cpp built -O2 -g (the header's digest in the flags: edits rebuild it)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    digest = hashlib.sha256(HEADER.read_bytes()).hexdigest()[:12]
    return build_fixture("src_tmpl.cpp", ["-O2", "-g", "-fno-omit-frame-pointer",
                                          f"-DSRC_TMPL_HPP_{digest}"], compiler="g++")


def record_tmpl(units: str = "150", binary: Path | None = None) -> tuple[Path, Profile]:
    """(the binary, its sampler profile): `binary` (by default tmpl_binary()) run with
    `units` of work to its end."""
    binary = binary or tmpl_binary()
    profile, output = run_to_end(SamplerCollector, binary, units)
    assert output in ("src_tmpl 0\n", "src_tmpl 1\n")
    return binary, profile


def crunch_of(profile: Profile) -> Frame:
    """crunch()'s frame (not one of its inlined copies)."""
    return next(f for f in profile.frames if f.function.startswith("crunch(") and not f.inlined)


async def open_crunch(pilot: Pilot, app: ProfTuiApp, profile: Profile) -> SourcePane:
    """The source of crunch() (its header: all its cost is inlined template code)."""
    flat = await flat_ready(pilot, app)
    crunch = crunch_of(profile)
    row = next(i for i, e in enumerate(flat.shown) if e.frame == crunch)
    app.query_one(FlatTable).move_cursor(row=row)
    await pilot.press("3")
    pane = app.query_one(SourcePane)
    await wait_for(pilot, lambda: pane.listing is not None and pane.frame == crunch
                   and pane.listing.kind == "source", what="crunch's source")
    assert pane.listing is not None and pane.listing.path == str(HEADER)
    return pane
