from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export.text import render_json, render_text
from proftui.collectors.model import storage

from tests.helpers.profiles import sample_profile


def test_round_trip_is_identical(tmp_path: Path) -> None:
    profile = sample_profile()
    profile.arcs[(0, 1)] = 3
    profile.line_costs[("prog.c", 12)] = [7.0]
    profile.address_costs[("/bin/prog", 0x1139)] = [7.0]
    profile.meta.threads = {12: "worker"}
    path = tmp_path / "run.proftui"
    storage.save(profile, path)
    loaded = storage.load(path)
    assert storage.profile_to_dict(loaded) == storage.profile_to_dict(profile)
    assert render_text(loaded) == render_text(profile)
    assert render_json(loaded) == render_json(profile)


def test_missing_and_garbage_files(tmp_path: Path) -> None:
    with pytest.raises(ProftuiError, match="no such file"):
        storage.load(tmp_path / "nope")
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello")
    with pytest.raises(ProftuiError, match="not gzip"):
        storage.load(junk)
    wrong = tmp_path / "wrong"
    wrong.write_bytes(gzip.compress(b'{"format": "other"}'))
    with pytest.raises(ProftuiError, match="not a proftui profile"):
        storage.load(wrong)


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000), flip=st.integers(0, 255))
def test_truncated_or_corrupt_files_give_clear_errors(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flip: int
) -> None:
    path = tmp_path_factory.mktemp("p") / "run.proftui"
    storage.save(sample_profile(), path)
    data = bytearray(path.read_bytes())
    cut %= len(data)
    if flip % 2:
        data[cut] ^= flip | 1
    else:
        del data[cut:]
    path.write_bytes(bytes(data))
    try:
        storage.load(path)
    except ProftuiError as exc:
        assert "\n" not in str(exc)


def test_json_report_shape() -> None:
    doc = render_json(sample_profile())
    assert set(doc) == {"meta", "flat", "tree"}
    first = doc["flat"][0]
    assert set(first) >= {"function", "module", "file", "line", "calls", "self", "total",
                          "self_percent", "total_percent"}
    assert first["function"] == "leaf" and first["self"] == {"samples": 90.0}
    assert doc["tree"][0]["function"] == "main"
    assert doc["meta"]["metrics"] == {"samples": "count"}
