"""Fixtures of the TUI tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler
from tests.helpers.src_tmpl import record_tmpl
from tests.helpers.thr_ratio import Report, read_report, sampler_run

CXX_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]


@pytest.fixture(scope="session")
def cxx_profile() -> Profile:
    """names_cxx.cpp (-O2: std::map, std::vector, lambdas, overloads) sampled by the
    sampler to its exit, once for every test that reads it."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    binary = build_fixture("names_cxx.cpp", CXX_FLAGS, compiler="g++")
    profile, output = run_sampler(binary, "2000")
    assert output.startswith("names_cxx checksum ")
    assert profile.total(0) > 200, "too few samples to test with"
    names = {f.function for f in profile.frames}
    assert any(n.startswith("std::_Rb_tree<") for n in names), sorted(names)
    return profile


@pytest.fixture(scope="session")
def tmpl_run() -> tuple[Path, Profile]:
    """(the binary, its sampler profile) of src_tmpl.cpp, once for every test that reads
    it (see tests/helpers/src_tmpl.py)."""
    return record_tmpl("60")


@pytest.fixture(scope="session")
def thr_ratio(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, Report]:
    """thr_ratio sampled to its end (about 1.7 s of CPU), saved and loaded back, and the
    fixture's report of that run; once for every test that reads it."""
    tmp = tmp_path_factory.mktemp("thr")
    collector, report_path = sampler_run(tmp, "100000000")
    collector.start()
    try:
        profile = collector.wait()
        assert collector.process is not None
        assert collector.process.output_text() == "thr_ratio done\n"
    finally:
        collector.stop()
    assert profile.meta.exit_status == 0
    saved = storage.load(storage.save(profile, tmp / "thr.proftui"))
    return saved, read_report(report_path)
