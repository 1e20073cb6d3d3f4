from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export.json_report import render_json
from proftui.collectors.formats.export.text import render_text
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


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"hello", "not gzip"),
    (gzip.compress(b'{"format": "other"}'), "not a proftui profile"),
], ids=["missing", "not-gzip", "other-format"])
def test_files_that_are_not_profiles_are_refused(tmp_path: Path, content: bytes | None,
                                                 message: str) -> None:
    path = tmp_path / "file"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ProftuiError, match=message):
        storage.load(path)


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


def test_metrics_read_back_keep_their_facts(tmp_path: Path) -> None:
    """A metric is its name and unit; its label, column word and family are said once on
    the model's constants and come back with a saved profile (issue 37)."""
    from proftui.collectors.model.profile import CPU_NS, LEAKS, Frame, Metric, metric_named

    from tests.helpers.profiles import stacks_profile

    profile = stacks_profile([Frame("main", "/bin/prog")], [([0], 1.0)],
                             metrics=(CPU_NS, LEAKS))
    path = tmp_path / "m.proftui"
    storage.save(profile, path, embed_sources=False)
    loaded = storage.load(path).metrics
    assert loaded == (CPU_NS, LEAKS)
    assert [(m.shown, m.column, m.heap) for m in loaded] == [
        ("CPU time", "CPU", False), ("leaked blocks", "leak blks", True)]
    assert loaded[1].meaning == "blocks live at exit"
    foreign = metric_named("inuse_space", "bytes")  # an imported pprof type: its own name
    assert foreign == Metric("inuse_space", "bytes") and foreign.shown == "inuse_space"
    assert metric_named("cpu_ns", "count").shown == "cpu_ns"  # a name in another unit
