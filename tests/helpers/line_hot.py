"""tests/fixtures/line_hot.c for the line-cost tests: work() spends ~3/4 of its time on
the HOT line and the rest on the WARM line and the line of mix(), inlined into it. A
private copy is compiled per test, so its binary and source can be moved away."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.base import Collector
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.storage import load, save

from tests.conftest import FIXTURES
from tests.helpers.collect import run_to_end

SOURCE = "line_hot.c"
TEXT = (FIXTURES / SOURCE).read_text()
FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]


def line_of(marker: str) -> int:
    """The 1-based line of the fixture holding `marker`."""
    return next(i + 1 for i, text in enumerate(TEXT.splitlines()) if marker in text)


HOT, WARM, MIX, WORK = (line_of("/* HOT */"), line_of("/* WARM */"),
                        line_of("unsigned long mix("), line_of("void work("))


def build_copy(tmp_path: Path, extra: list[str]) -> tuple[Path, Path]:
    """Compile a private copy of the fixture (so both files can be moved away later)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = tmp_path / "src"
    src.mkdir()
    source = src / SOURCE
    shutil.copy(FIXTURES / SOURCE, source)
    binary = tmp_path / "line_hot"
    subprocess.run(["gcc", *FLAGS, *extra, "-o", str(binary), str(source)], check=True,
                   capture_output=True)
    return binary, source


def record(kind: type[Collector], binary: Path, units: str = "150", **options: object) -> Profile:
    """`binary units` profiled by a `kind` collector to its end (it prints "line_hot 0")."""
    profile, output = run_to_end(kind, binary, units, **options)
    assert output == "line_hot 0\n"
    return profile


def save_and_move_away(profile: Profile, tmp_path: Path, *gone: Path,
                       embed: bool = True) -> Profile:
    """Save, rename the binary and the source away, load: as on another machine."""
    path = tmp_path / ("run.proftui" if embed else "bare.proftui")
    save(profile, path, embed_sources=embed)
    for p in gone:
        if p.exists():
            p.rename(p.with_name(p.name + ".moved"))
    for p in gone:
        assert not p.exists()
    return load(path)


def work_of(profile: Profile) -> Frame:
    """work()'s frame (not one of its inlined copies)."""
    return next(f for f in profile.frames if f.function == "work" and not f.inlined)
