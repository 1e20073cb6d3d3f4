"""Fixtures of the TUI tests."""

from __future__ import annotations

import shutil

import pytest
from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler

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
