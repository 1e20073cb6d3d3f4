"""Heap profiles exported: pprof with Go's four heap sample types read by `go tool pprof`,
and folded / speedscope / callgrind per metric with byte units."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.formats.export import export_bytes, write_export
from proftui.collectors.formats.export.callgrind import export_callgrind
from proftui.collectors.formats.export.folded import export_folded
from proftui.collectors.formats.export.pprof import sample_columns
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model.profile import (
    LEAKED_BYTES,
    LEAKS,
    LIVE_BYTES,
    Frame,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.views import flat_profile

from tests.helpers.heap_records import TRUTH, record_gperftools_heap, record_heaptrack

GO_TYPES = {"alloc_objects": "allocs", "alloc_space": "alloc_bytes",
            "inuse_objects": "live_allocs", "inuse_space": "live_bytes"}


def go_tool() -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go (Debian golang-go, for `go tool pprof`) is not installed")
    return go


def go_top(go: str, pb: Path, sample_index: str | None) -> tuple[str, dict[str, int]]:
    """(Type: line, name -> flat value) of `go tool pprof -top` in plain units."""
    argv = [go, "tool", "pprof", "-top", "-nodefraction=0", "-symbolize=none", "-unit=B"]
    if sample_index:
        argv.append(f"-sample_index={sample_index}")
    result = subprocess.run([*argv, str(pb)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    kind = next(line for line in result.stdout.splitlines() if line.startswith("Type:"))
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\d+)B?\s+[\d.]+%\s+[\d.]+%\s+\d+B?\s+[\d.]+%\s+(\S+)", line)
        if match and int(match[1]):
            rows[match[2]] = int(match[1])
    return kind, rows


def own_top(profile: Profile, metric: str) -> dict[str, int]:
    index = profile.metric_index(metric)
    return {e.frame.function: round(e.self_cost[index])
            for e in flat_profile(profile, metric=index) if e.self_cost[index] > 0}


def test_gperftools_heap_to_pprof_reads_in_go(tmp_path: Path) -> None:
    go = go_tool()
    _, heap = record_gperftools_heap(tmp_path)
    profile = load_any(heap)
    columns, missing = sample_columns(profile)
    assert [c[0] for c in columns][:4] == list(GO_TYPES) and not missing
    pb = tmp_path / "hv.pb.gz"
    write_export(profile, "pprof", pb)
    kind, _ = go_top(go, pb, None)
    assert kind == "Type: inuse_space"  # Go's default for heap profiles
    for go_type, metric in GO_TYPES.items():
        kind, rows = go_top(go, pb, go_type)
        assert kind == f"Type: {go_type}"
        assert rows == own_top(profile, metric), go_type
    _, rows = go_top(go, pb, "alloc_space")
    assert {f: rows[f] for f in TRUTH} == {f: t[1] for f, t in TRUTH.items()}
    # `-list` puts the leaked bytes on the allocating line of site_leak
    result = subprocess.run([go, "tool", "pprof", "-list", "^site_leak$", "-symbolize=none",
                             "-sample_index=inuse_space", "-unit=B", str(pb)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    hot = [line for line in result.stdout.splitlines()
           if re.match(r"\s*204800B\s+204800B\s+\d+:", line)]
    assert len(hot) == 1 and "malloc(n)" in hot[0], result.stdout


def test_heaptrack_to_pprof_names_what_it_cannot_fill(tmp_path: Path) -> None:
    go = go_tool()
    _, data = record_heaptrack(tmp_path)
    profile = load_any(data)
    columns, missing = sample_columns(profile)
    assert missing == ["alloc_space", "inuse_objects"]
    pb = tmp_path / "ht.pb.gz"
    pb.write_bytes(export_bytes(profile, "pprof"))
    kind, rows = go_top(go, pb, "inuse_space")
    assert kind == "Type: inuse_space" and rows == own_top(profile, "live_bytes")
    assert rows["site_half"] == 500_000
    _, rows = go_top(go, pb, "peak_bytes")
    assert rows["site_half"] == 600_000 and rows["site_leak"] == 204_800
    assert "alloc_space" not in [c[0] for c in columns]


def test_folded_speedscope_callgrind_in_bytes(tmp_path: Path) -> None:
    _, heap = record_gperftools_heap(tmp_path)
    profile = load_any(heap)
    for metric in ("live_bytes", "alloc_bytes", "allocs"):
        index = profile.metric_index(metric)
        folded = export_folded(profile, index).decode()
        leaves: dict[str, int] = {}
        for line in folded.splitlines():
            stack, value = line.rsplit(" ", 1)
            leaf = stack.split(";")[-1]
            leaves[leaf] = leaves.get(leaf, 0) + int(value)
        assert leaves == own_top(profile, metric), metric
    doc = json.loads(export_bytes(profile, "speedscope"))
    by_name = {p["name"].split()[0]: p for p in doc["profiles"]}
    assert by_name["live_bytes"]["unit"] == "bytes" and by_name["allocs"]["unit"] == "none"
    assert by_name["leaked_bytes"]["endValue"] == profile.total(
        profile.metric_index("leaked_bytes"))
    callgrind = export_callgrind(profile).decode()
    assert "event: live_bytes : live_bytes (bytes)" in callgrind
    assert "events: live_bytes live_allocs alloc_bytes allocs leaked_bytes leaks" in callgrind
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        return  # callgrind_annotate ships with valgrind: the text checks above still hold
    out = tmp_path / "callgrind.out.hv"
    out.write_text(callgrind)
    result = subprocess.run([annotate, str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.search(r"204,800 .*site_leak", result.stdout), result.stdout


def test_leaks_are_inuse_objects_only_when_everything_live_leaked() -> None:
    profile = Profile(ProfileMeta(mode="heap"), (LIVE_BYTES, LEAKED_BYTES, LEAKS))
    profile.frames.intern(Frame("main"))
    profile.tree.add_stack([0], [4096, 4096, 1])
    columns, missing = sample_columns(profile.finalize())
    assert [c[0] for c in columns] == ["inuse_objects", "inuse_space", "leaked_bytes"]
    assert missing == ["alloc_objects", "alloc_space"]
    profile.tree.add_stack([0], [100, 0, 0])  # live now, not (yet) leaked
    columns, missing = sample_columns(profile.finalize())
    assert "inuse_objects" in missing and "leaks" in [c[0] for c in columns]
