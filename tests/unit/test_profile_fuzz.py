"""Fuzz: type-confused saved profiles and garbled imports through load, report and export.

A real saved profile (every table filled in) is mutated the way a hostile or
broken writer would: values swapped for other types, keys dropped, numbers made
negative, NaN, huge or out of range, lists and objects exchanged.  Whatever the
file holds, `load_any` either refuses it with one line (ProftuiError) or gives a
profile that the text and JSON reports, every exporter and the views behind the
TUI's panes all handle: no other exception.  The whole module is bounded in time
(max_examples) so it runs in CI.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import EXPORTERS
from proftui.collectors.formats.export.json_report import render_json
from proftui.collectors.formats.export.text import render_text
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import views
from proftui.collectors.model.profile import Profile

from tests.helpers.hostile import BASE, MUTATION, mutate, write_mutated
from tests.helpers.importer_inputs import GPERFTOOLS_RECORDS, PERF_SCRIPT, gperftools_cpu

RECORDS32 = [(count, [pc & 0xFFFFFFFF for pc in pcs]) for count, pcs in GPERFTOOLS_RECORDS]
FUZZ = settings(max_examples=1000, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def exercise(profile: Profile) -> None:
    """What report, export and the TUI's panes do with a loaded profile."""
    render_text(profile).encode()
    json.dumps(render_json(profile))
    for exporter in EXPORTERS.values():
        assert isinstance(exporter(profile), bytes)
    entries = views.flat_profile(profile)
    views.bottom_up_tree(profile)
    for part in profile.parts:
        views.flat_profile(profile, part=part)
    for entry in entries[:2]:
        views.callers(profile, entry.frame_id)
        views.callees(profile, entry.frame_id)
        views.callee_tree(profile, entry.frame_id)
        views.caller_tree(profile, entry.frame_id)


def check_file(path: Path) -> None:
    """load_any `path`: a one-line ProftuiError, or a profile every consumer handles."""
    try:
        profile = load_any(path)
    except ProftuiError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        assert message.startswith(str(path))
    else:
        exercise(profile)


@FUZZ
@given(mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_type_confused_profiles(tmp_path: Path, mutations: list[tuple[int, str, Any]]) -> None:
    check_file(write_mutated(tmp_path / "fuzzed.proftui", mutations))


@pytest.mark.parametrize(("where", "value", "expected"), [
    (("tree", 3, 1), 99, r"tree\[3\]\[1\]: expected an integer in 0\.\.4"),
    (("tree", 2, 0), 5, r"tree\[2\]\[0\]: expected an integer in -1\.\.1"),  # a later parent
    (("tree", 0, 2, 0), "12", r"tree\[0\]\[2\]\[0\]: expected a finite cost"),
    (("tree", 0, 2, 1), math.nan, r"tree\[0\]\[2\]\[1\]: expected a finite cost"),
    (("tree", 0, 2, 1), -5, r"tree\[0\]\[2\]\[1\]: expected a finite cost >= 0, got -5"),
    (("tree", 0, 2, 1), 10**400, r"tree\[0\]\[2\]\[1\]: expected a finite cost >= 0, got a huge"),
    (("meta", "end_time"), -(10**400), r"meta\.end_time: expected a time"),
    (("frames", 1), {"function": "a"}, r"frames\[1\]: expected a list of 8, got an object"),
    (("meta", "argv"), "prog", r"meta\.argv: expected a list"),
    (("meta", "start_time"), 1e308, r"meta\.start_time: expected a time"),
    (("meta", "threads"), {"x": "t"}, r"meta\.threads key: expected a thread id"),
    (("metrics",), [], r"metrics: no metric"),
    (("arcs", 0, 0), -1, r"arcs\[0\]\[0\]: expected an integer in 0\.\.4"),
    (("functions",), {}, r"functions: expected a list"),
    (("sources",), [], r"sources: expected an object"),
])
def test_bad_fields_are_named(tmp_path: Path, where: tuple[Any, ...], value: Any,
                              expected: str) -> None:
    doc = json.loads(json.dumps(BASE))
    doc["functions"] = doc["functions"] or []
    mutate(doc, where, "replace", value)
    target = tmp_path / "bad.proftui"
    target.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(ProftuiError, match=r"bad\.proftui: not a valid proftui profile: "
                       + expected):
        load_any(target)


def test_json_edge_cases_are_one_line(tmp_path: Path) -> None:
    cases = {
        "nested": b"[" * 100_000 + b"]" * 100_000,  # json would recurse past the limit
        "digits": b'{"format": "proftui-profile", "version": 1' + b"1" * 5000 + b"}",
        "list": b"[1, 2, 3]",
        "nan": json.dumps({**BASE, "meta": {**BASE["meta"], "end_time": math.inf}}).encode(),
    }
    for name, data in cases.items():
        target = tmp_path / f"{name}\nx.proftui"  # a newline in the name stays one line
        target.write_bytes(gzip.compress(data))
        with pytest.raises(ProftuiError) as caught:
            load_any(target)
        assert "\n" not in str(caught.value), name


@FUZZ
@given(data=st.data())
def test_garbled_imports(tmp_path: Path, data: st.DataObject) -> None:
    original = data.draw(st.sampled_from([gperftools_cpu(GPERFTOOLS_RECORDS),
                                          gperftools_cpu(RECORDS32, fmt="<I"),
                                          PERF_SCRIPT.encode()]))
    raw = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw)))
        cut = data.draw(st.integers(0, 16))
        raw[at:at + cut] = data.draw(st.binary(max_size=16))
    target = tmp_path / "garbled.prof"
    target.write_bytes(bytes(raw))
    check_file(target)


@pytest.mark.parametrize("command", [["report"], ["report", "--json"], ["export", "-f", "pprof"],
                                     ["export", "-f", "callgrind"], ["open"]])
def test_cli_refuses_a_bad_profile_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    from proftui.tui.cli import main

    doc = json.loads(json.dumps(BASE))
    doc["tree"][1][0] = 7  # a parent that comes later: a cycle in a flat list
    target = tmp_path / "bad.proftui"
    target.write_bytes(gzip.compress(json.dumps(doc).encode()))
    extra = ["-o", str(tmp_path / "out")] if command[0] == "export" else []
    status = main([*command, *extra, str(target)])
    err = capsys.readouterr().err
    assert status != 0
    assert err == (f"proftui: {target}: not a valid proftui profile: "
                   "tree[1][0]: expected an integer in -1..0, got 7\n")
    assert not (tmp_path / "out").exists()
