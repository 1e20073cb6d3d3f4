"""Folded, callgrind, DOT and speedscope exports of hand-built profiles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import EXPORTERS, default_output, export_bytes, write_export
from proftui.collectors.formats.export.callgrind import export_callgrind
from proftui.collectors.formats.export.dot import export_dot
from proftui.collectors.formats.export.folded import export_folded
from proftui.collectors.formats.export.speedscope import speedscope_document
from proftui.collectors.model.profile import CPU_NS, SAMPLES, Frame, Profile, ProfileMeta

from tests.helpers.profiles import frame_id, sample_profile


def test_folded_stacks() -> None:
    lines = export_folded(sample_profile()).decode().splitlines()
    assert sorted(lines) == sorted(
        ["main;a;leaf 60", "main;b;leaf 30", "main 10", "main;rec;rec;rec 5"])


def test_folded_lines_follow_flamegraph_pl_conventions() -> None:
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    outer = profile.frames.intern(Frame("ns::f(a;b)", module="/m"))
    inner = profile.frames.intern(Frame("helper", module="/m", inlined=True))
    profile.tree.add_stack([outer, inner], [3])
    profile.tree.add_stack([outer], [0.4])  # rounds to 0: left out
    assert export_folded(profile.finalize()) == b"ns::f(a:b);helper_[i] 3\n"


def parse_callgrind(text: str) -> tuple[dict[str, int], dict[tuple[str, str], tuple[int, int]]]:
    """Self cost per function and (calls, inclusive) per arc, decompressing names."""
    names: dict[str, str] = {}

    def name(value: str) -> str:
        match = re.match(r"\((\d+)\)(?: (.*))?$", value)
        assert match, value
        if match[2] is not None:
            names[match[1]] = match[2]
        return names[match[1]]

    self_cost: dict[str, int] = {}
    arcs: dict[tuple[str, str], tuple[int, int]] = {}
    fn = callee = None
    calls = None
    for line in text.splitlines():
        if line.startswith("fn="):
            fn = name(line[3:])
        elif line.startswith("cfn="):
            callee = name(line[4:])
        elif line.startswith("calls="):
            calls = int(line[6:].split()[0])
        elif re.match(r"^\d+ \d+$", line):
            value = int(line.split()[1])
            if calls is not None:
                assert fn is not None and callee is not None
                arcs[(fn, callee)] = (calls, value)
                calls = None
            else:
                assert fn is not None
                self_cost[fn] = self_cost.get(fn, 0) + value
    return self_cost, arcs


def test_callgrind_file_carries_the_profile_costs() -> None:
    profile = sample_profile()
    profile.arcs[(frame_id(profile, "main"), frame_id(profile, "a"))] = 3
    text = export_callgrind(profile).decode()
    assert text.startswith("# callgrind format\n")
    assert "events: samples\n" in text and "summary: 105\n" in text
    assert text.rstrip().endswith("totals: 105")
    self_cost, arcs = parse_callgrind(text)
    assert self_cost == {"leaf": 90, "main": 10, "rec": 5, "a": 0, "b": 0} or (
        {k: v for k, v in self_cost.items() if v} == {"leaf": 90, "main": 10, "rec": 5})
    assert arcs[("main", "a")] == (3, 60)  # exact count from arcs, inclusive cost
    assert arcs[("main", "b")] == (1, 30)  # unknown count: calls=1
    assert arcs[("a", "leaf")][1] == 60 and arcs[("b", "leaf")][1] == 30


def test_callgrind_exact_node_calls() -> None:
    profile = Profile(ProfileMeta(mode="instrument"), (CPU_NS,))
    main = profile.frames.intern(Frame("main", module="/p", file="p.c", line=5))
    f = profile.frames.intern(Frame("f", module="/p", file="p.c", line=1))
    profile.tree.add_stack([main], [100], calls=1)
    profile.tree.add_stack([main, f], [250], calls=7)
    text = export_callgrind(profile.finalize()).decode()
    _self, arcs = parse_callgrind(text)
    assert arcs[("main", "f")] == (7, 250)
    assert "calls=7 1\n5 250\n" in text  # target line 1, call cost at main's line 5
    assert "fl=(1) p.c" in text


def test_dot_graph_labels() -> None:
    profile = sample_profile()
    profile.arcs[(frame_id(profile, "main"), frame_id(profile, "a"))] = 3
    text = export_dot(profile).decode()
    assert text.startswith("digraph proftui {") and text.rstrip().endswith("}")
    main, a, leaf = (frame_id(profile, n) for n in ("main", "a", "leaf"))
    assert re.search(rf'f{leaf} \[label="leaf\\nprog\\nself 85.71% \(90\)\\ntotal 85.71% \(90\)"',
                     text)
    assert f'f{main} -> f{a} [label="3 calls\\n57.14% (60)"' in text
    assert text.count("->") == 6  # main->a, main->b, main->rec, a->leaf, b->leaf, rec->rec
    rec = frame_id(profile, "rec")
    assert f'f{rec} -> f{rec} [label="4.76% (5)"' in text  # recursion counted once


def _dot_of_big_and_small() -> str:
    """The dot export (1 % threshold) of `say "hi"`: big"one\\ 999, its callee small 1."""
    profile = Profile(ProfileMeta(mode="sampler", argv=['say "hi"']), (SAMPLES,))
    big = profile.frames.intern(Frame('big"one\\', module="/m"))
    small = profile.frames.intern(Frame("small", module="/m"))
    profile.tree.add_stack([big], [999])
    profile.tree.add_stack([big, small], [1])
    return export_dot(profile.finalize(), min_percent=1.0).decode()


def test_dot_leaves_out_nodes_under_the_threshold() -> None:
    text = _dot_of_big_and_small()
    assert "small" not in text and "->" not in text


def test_dot_quotes_names_and_the_title() -> None:
    text = _dot_of_big_and_small()
    assert 'label="big\\"one\\\\\\nm' in text
    assert 'say \\"hi\\"' in text


def test_speedscope_document() -> None:
    doc = speedscope_document(sample_profile())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    names = [f["name"] for f in doc["shared"]["frames"]]
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "none"
    stacks = {";".join(names[i] for i in s): w for s, w in
              zip(prof["samples"], prof["weights"], strict=True)}
    assert stacks == {"main;a;leaf": 60, "main;b;leaf": 30, "main": 10, "main;rec;rec;rec": 5}
    assert prof["endValue"] == 105


def test_speedscope_units_per_metric() -> None:
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES, CPU_NS))
    fid = profile.frames.intern(Frame("f", file="f.c", line=9))
    profile.tree.add_stack([fid], [2, 2e6])
    doc = json.loads(EXPORTERS["speedscope"](profile.finalize()))
    assert [p["unit"] for p in doc["profiles"]] == ["none", "nanoseconds"]
    assert doc["shared"]["frames"] == [{"name": "f", "file": "f.c", "line": 9}]


def test_every_format_writes_its_bytes(tmp_path: Path) -> None:
    assert set(EXPORTERS) == {"pprof", "folded", "callgrind", "dot", "speedscope"}
    profile = sample_profile()
    for fmt in EXPORTERS:
        out = default_output(tmp_path / "run.proftui", fmt)
        write_export(profile, fmt, out)
        assert out.read_bytes() == export_bytes(profile, fmt)


def test_default_output_names() -> None:
    assert default_output(Path("x/run.proftui"), "callgrind") == Path("x/callgrind.out.run")
    assert default_output(Path("perf.txt"), "pprof") == Path("perf.pb.gz")


def test_export_errors_are_proftui_errors(tmp_path: Path) -> None:
    with pytest.raises(ProftuiError, match="unknown export format"):
        export_bytes(sample_profile(), "svg")
    with pytest.raises(ProftuiError, match="cannot write"):
        write_export(sample_profile(), "folded", tmp_path / "missing-dir" / "out.folded")


def test_empty_profile_exports() -> None:
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,)).finalize()
    for exporter in EXPORTERS.values():
        assert isinstance(exporter(profile), bytes)
