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
from proftui.collectors.formats.export.text import render_json, render_text
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import storage, views
from proftui.collectors.model.profile import (
    CPU_NS,
    SAMPLES,
    CodeSite,
    Frame,
    LeakFrame,
    LeakStack,
    Profile,
    ProfileMeta,
)

from tests.unit.test_import_gperftools import RECORDS, encode
from tests.unit.test_import_perf_script import SCRIPT

RECORDS32 = [(count, [pc & 0xFFFFFFFF for pc in pcs]) for count, pcs in RECORDS]
FUZZ = settings(max_examples=1000, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def rich_profile() -> Profile:
    """A profile with every saved table filled in (as a real instrument+sampler run has)."""
    meta = ProfileMeta(mode="sampler", argv=["/bin/prog", "-x"], pids=[10], threads={11: "w"},
                       period_ns=1_000_000, clock="perf task-clock", start_time=1.7e9,
                       end_time=1.7e9 + 2, exit_status=0, warnings=["w1"], lines_note="n")
    profile = Profile(meta, (SAMPLES, CPU_NS))
    ids = [profile.frames.intern(Frame(name, "/bin/prog", "/src/p.c", 10 + i, 0x1000 + 16 * i,
                                       f"_Z{name}", "ab12", name == "inl"))
           for i, name in enumerate(("main", "a", "leaf", "inl", "rec"))]
    main, a, leaf, inl, rec = ids
    assert profile.tree is not None
    profile.tree.add_stack([main, a, leaf], [60, 6e7], calls=3)
    profile.tree.add_stack([main, a, inl], [5, 5e6])
    profile.tree.add_stack([main, rec, rec, rec], [7, 7e6], calls=1)
    profile.tree.add_stack([main], [1, 1e6], calls=1)
    part = profile.parts.setdefault("pid 10 tid 11", type(profile.tree)(2))
    part.add_stack([main, a], [2, 2e6])
    profile.arcs = {(main, a): 3, (a, leaf): 3, (rec, rec): 2}
    profile.line_costs = {("/src/p.c", 12): [60, 6e7], ("/src/p.c", 13): [5, 5e6]}
    profile.address_costs = {("/bin/prog", 0x1024): [60, 6e7]}
    profile.address_sites = {("/bin/prog", 0x1024): CodeSite(0x1020, "/src/p.c", 12)}
    profile.sources = {"/src/p.c": "int main(void) { return 0; }\n"}
    profile.leaks = [LeakStack(500.0, 5.0, (LeakFrame("leaf", "/bin/prog", "/src/p.c", 12),
                                            LeakFrame("main", "/bin/prog", None, None, True)))]
    return profile.finalize()


BASE = storage.profile_to_dict(rich_profile())

# Values a broken or hostile writer puts where something else belongs.
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.just(""), st.just("\udcff\ud800"), st.text(max_size=8),
    st.integers(-(2**70), 2**70), st.sampled_from([-1, 0, 1, 2**31, 2**63, 2**64, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.just([]), st.just({}),
    st.just([[]]), st.just([None, None, None, None]), st.just({"0": "x"}),
    st.lists(st.integers(-3, 10), max_size=5),
)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every JSON path in `value` (container items and object keys), iteratively."""
    out: list[tuple[Any, ...]] = []
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        out.append(at)
        if isinstance(item, dict):
            stack.extend((v, (*at, k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*at, i)) for i, v in enumerate(item))
    return sorted(out, key=repr)


PATHS = _paths(BASE)[1:]  # not the document itself


def _mutate(doc: Any, path: tuple[Any, ...], action: str, value: Any) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    if action == "drop":
        del parent[key]
    elif action == "swap":  # list <-> object, number <-> string, etc.
        parent[key] = ({str(i): v for i, v in enumerate(old)} if isinstance(old, list)
                       else list(old.values()) if isinstance(old, dict)
                       else str(old) if isinstance(old, int | float) and not isinstance(old, bool)
                       else [old])
    elif action == "negate" and isinstance(old, int | float) and not isinstance(old, bool):
        parent[key] = -old - 1
    elif action == "grow" and isinstance(old, int) and not isinstance(old, bool):
        parent[key] = old + 10**6  # out-of-range frame ids, parent indexes, metrics...
    else:
        parent[key] = value


MUTATION = st.tuples(st.sampled_from(range(len(PATHS))),
                     st.sampled_from(["drop", "swap", "negate", "grow", "replace", "replace"]),
                     HOSTILE)


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
    doc = json.loads(json.dumps(BASE))
    for index, action, value in mutations:
        path = PATHS[index]
        try:
            _mutate(doc, path, action, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or retyped this path
    target = tmp_path / "fuzzed.proftui"
    target.write_bytes(gzip.compress(json.dumps(doc).encode()))
    check_file(target)


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
    _mutate(doc, where, "replace", value)
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
    original = data.draw(st.sampled_from([encode(RECORDS), encode(RECORDS32, fmt="<I"),
                                          SCRIPT.encode()]))
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
def test_cli_gives_one_line_and_a_failure_status(
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
