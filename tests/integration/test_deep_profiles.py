"""100,000-deep call trees and non-UTF-8 program paths through record, report and every export.

The deep cases must finish (a time budget far above the expected seconds: the
point is that they end, not how fast) and give correct, depth-bounded output.
The non-UTF-8 case profiles a real fixture copied to a name with bytes 0xff
0xfe in it, through the CLI, then exports it in every format.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.formats.export import EXPORTERS
from proftui.collectors.formats.export.json_report import render_json
from proftui.collectors.formats.export.paths import CUT_LABEL, EXPORT_MAX_DEPTH
from proftui.collectors.formats.export.text import render_text
from proftui.collectors.formats.protobuf import ints
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.views import INVERTED_MAX_DEPTH, bottom_up_tree, caller_tree

from tests.helpers.instrument import build
from tests.helpers.profiles import deep_chain, distinct_deep_stacks
from tests.helpers.protobuf import decode

DEPTH = 100_000
BUDGET = 60.0  # seconds per operation: generous on a shared 2-core machine (takes ~1 s)


def timed(what: str, fn, *args):  # type: ignore[no-untyped-def]
    start = time.monotonic()
    result = fn(*args)
    elapsed = time.monotonic() - start
    assert elapsed < BUDGET, f"{what} took {elapsed:.1f} s"
    return result


def check_exports(profile: Profile, total_ns: float, leaf: str) -> None:
    """Every export of a profile whose tree is one chain deeper than the export limit."""
    outputs = {fmt: timed(fmt, exporter, profile) for fmt, exporter in EXPORTERS.items()}
    # folded: one line per level down to the limit, then one for everything deeper
    lines = outputs["folded"].decode().splitlines()
    assert len(lines) == EXPORT_MAX_DEPTH + 1
    stacks = [line.rsplit(" ", 1) for line in lines]
    assert max(len(s.split(";")) for s, _ in stacks) == EXPORT_MAX_DEPTH + 1
    deepest = max(stacks, key=lambda s: len(s[0]))[0].split(";")
    assert deepest[-1] == CUT_LABEL and deepest[-2] == leaf
    assert abs(sum(int(v) for _, v in stacks) - total_ns) <= len(stacks)  # rounding only
    # speedscope: the same samples, every path at most limit + 1 frames long
    doc = json.loads(outputs["speedscope"])
    samples = doc["profiles"][0]["samples"]
    assert len(samples) == EXPORT_MAX_DEPTH + 1
    assert max(map(len, samples)) == EXPORT_MAX_DEPTH + 1
    assert doc["shared"]["frames"][samples[-1][-1]]["name"] == CUT_LABEL or any(
        doc["shared"]["frames"][s[-1]]["name"] == CUT_LABEL for s in samples)
    assert abs(sum(doc["profiles"][0]["weights"]) - total_ns) < 1e-6 * total_ns
    # pprof: samples' location lists bounded, values add up to the whole
    fields = decode(gzip.decompress(outputs["pprof"]))
    sample_fields = [decode(s) for s in fields[2]]
    assert max(len(ints(s[1][0])) for s in sample_fields) <= EXPORT_MAX_DEPTH + 1
    assert abs(sum(ints(s[2][0])[0] for s in sample_fields) - total_ns) <= len(sample_fields)
    strings = [s.decode() for s in fields[6]]
    assert CUT_LABEL in strings
    # callgrind and dot are per function: one recursive arc, no per-path blow-up
    callgrind = outputs["callgrind"].decode()
    assert f"calls={DEPTH - 1} " in callgrind and len(callgrind) < 10_000
    assert outputs["dot"].decode().count("->") == 2  # main -> rec, rec -> rec


def check_inverted(profile: Profile, leaf_id: int) -> None:
    inverted = timed("bottom-up", bottom_up_tree, profile)
    assert inverted.cut_depth == INVERTED_MAX_DEPTH
    assert inverted.max_depth() == INVERTED_MAX_DEPTH
    assert profile.tree is not None  # every self cost is in the inverted tree once
    assert inverted.root.total_cost == pytest.approx(profile.tree.root.total_cost)
    callers = timed("callers", caller_tree, profile, leaf_id)
    assert callers.max_depth() <= INVERTED_MAX_DEPTH


def test_model_built_100000_deep_chain() -> None:
    profile = deep_chain()
    total = profile.total(0)
    assert total == 10 + 100 * DEPTH
    check_exports(profile, total, "rec")
    check_inverted(profile, 1)
    text = timed("report", render_text, profile)
    assert "deeper calls cut" in text
    json.dumps(timed("json report", render_json, profile))


def test_saved_100000_deep_profile_loads(tmp_path: Path) -> None:
    path = tmp_path / "deep.proftui"
    storage.save(deep_chain(), path)
    loaded = timed("load", storage.load, path)
    assert loaded.tree is not None and loaded.tree.max_depth() == DEPTH + 1
    assert loaded.total(0) == 10 + 100 * DEPTH


def proftui(*args: str | bytes, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], capture_output=True,
                          timeout=300, stdin=subprocess.DEVNULL, env=env, cwd=cwd)


@pytest.fixture
def private_tmpdir(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment whose TMPDIR is a fresh directory, checked empty afterwards."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    yield {**os.environ, "TMPDIR": str(tmpdir)}
    assert list(tmpdir.iterdir()) == []


def test_recorded_100000_deep_recursion_through_the_cli(
        tmp_path: Path, private_tmpdir: dict[str, str]) -> None:
    """A real instrument run 100,000 calls deep: record, report and every export finish."""
    program = build("ins_recurse.c")
    saved = tmp_path / "deep.proftui"
    result = proftui("record", "-o", str(saved), str(program), "100000", env=private_tmpdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"levels 100000 even 1\n"  # the target's output unchanged
    start = time.monotonic()
    report = proftui("report", str(saved), env=private_tmpdir)
    assert report.returncode == 0 and b"Traceback" not in report.stderr, report.stderr
    assert b"down" in report.stdout and b"deeper calls cut" in report.stdout
    assert time.monotonic() - start < BUDGET
    for fmt in EXPORTERS:
        out = tmp_path / f"deep.{fmt}"
        start = time.monotonic()
        result = proftui("export", "-f", fmt, "-o", str(out), str(saved), env=private_tmpdir)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
        assert time.monotonic() - start < BUDGET, fmt
        assert out.stat().st_size > 0
    folded = (tmp_path / "deep.folded").read_text().splitlines()
    assert len(folded) <= 2 * (EXPORT_MAX_DEPTH + 1)  # main's chain, plus is_even/is_odd
    deepest = max(folded, key=lambda line: line.count(";")).rsplit(" ", 1)[0].split(";")
    assert len(deepest) == EXPORT_MAX_DEPTH + 1 and deepest[-1] == CUT_LABEL
    assert deepest[0] == "main" and set(deepest[1:-1]) == {"down"}
    loaded = storage.load(saved)
    down = next(i for i, f in enumerate(loaded.frames) if f.function == "down")
    check_inverted(loaded, down)


def test_non_utf8_program_path_survives_every_output(
        tmp_path: Path, private_tmpdir: dict[str, str]) -> None:
    """argv[0] = b'.../\\xff\\xfeprog': record, report and every export; text stays UTF-8."""
    program = build("ins_basic.c")
    odd_dir = os.fsencode(tmp_path) + b"/dir\xff\xfe"
    os.mkdir(odd_dir)
    odd = odd_dir + b"/\xff\xfeprog"
    shutil.copy(program, odd)
    plain = subprocess.run([odd, "50"], capture_output=True, timeout=60)
    saved = tmp_path / "odd.proftui"
    result = proftui("record", "-o", str(saved), odd, "50", env=private_tmpdir)
    assert result.returncode == plain.returncode and result.stdout == plain.stdout
    assert b"Traceback" not in result.stderr, result.stderr
    report = proftui("report", str(saved), env=private_tmpdir)
    assert report.returncode == 0 and b"Traceback" not in report.stderr, report.stderr
    assert b"\\xff\\xfeprog" in report.stdout
    for fmt in EXPORTERS:
        out = tmp_path / f"odd.{fmt}"
        result = proftui("export", "-f", fmt, "-o", str(out), str(saved), env=private_tmpdir)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, (fmt, result.stderr)
        data = out.read_bytes()
        if fmt == "pprof":
            data = gzip.decompress(data)
            strings = [s.decode() for s in decode(data)[6]]  # proto strings: valid UTF-8
            assert any("\\xff\\xfeprog" in s for s in strings)
            continue
        text = data.decode("utf-8")  # valid UTF-8, undecodable bytes escaped as \xff
        if fmt == "callgrind":
            assert "\\xff\\xfeprog" in text
        if fmt == "dot":  # in a quoted DOT string the backslash itself is escaped
            assert "\\\\xff\\\\xfeprog" in text
    callgrind = (tmp_path / "odd.callgrind").read_text()
    cmd = next(line for line in callgrind.splitlines() if line.startswith("cmd: "))
    assert cmd.endswith("\\xff\\xfeprog 50")
    if shutil.which("dot"):
        svg = subprocess.run(["dot", "-Tsvg", str(tmp_path / "odd.dot")], capture_output=True,
                             timeout=60)
        assert svg.returncode == 0, svg.stderr


JSON_BYTES_PER_NODE = 250  # the report is killed past this (measured: about 165)
# The CLI, then its peak resident memory on stderr.  VmHWM, not the rusage's maxrss: a
# child forked from this (big) test process would inherit the parent's high-water mark.
WITH_PEAK = """
import sys
from proftui.tui.cli import main
try:
    status = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as f:
        sys.stderr.write(next(line for line in f if line.startswith("VmHWM:")))
sys.exit(status)
"""


def test_json_report_of_distinct_deep_stacks(tmp_path: Path) -> None:
    """`proftui report --json` on 2,000 distinct 128-frame stacks (234,000 nodes): the text
    grows with the nodes (with indentation it grew with nodes x depth, gigabytes on a
    real run of that shape), takes seconds of CPU and memory bounded by the tree's."""
    profile = distinct_deep_stacks(count=2000, depth=128)
    nodes = len(profile.tree) - 1
    saved = tmp_path / "deep.proftui"
    storage.save(profile, saved)
    limit = JSON_BYTES_PER_NODE * nodes
    with (tmp_path / "stderr").open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", WITH_PEAK, "report", "--json",
                                 str(saved)], stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    chunks, written, deadline = [], 0, time.monotonic() + BUDGET
    while data := proc.stdout.read(1 << 20):
        chunks.append(data)
        written += len(data)
        if written > limit or time.monotonic() > deadline:
            proc.kill()  # the old report: gigabytes, never ending
            break
    proc.stdout.close()
    _pid, status, usage = os.wait4(proc.pid, 0)
    assert written <= limit, f"more than {JSON_BYTES_PER_NODE} bytes a node"
    stderr = (tmp_path / "stderr").read_text()
    assert os.waitstatus_to_exitcode(status) == 0, stderr
    cpu = usage.ru_utime + usage.ru_stime
    assert cpu < 20, f"{cpu:.1f} s of CPU (measured: about 1.5)"
    peak_kib = int(stderr.split("VmHWM:")[1].split()[0])
    assert peak_kib < 100 * 1024, f"peak {peak_kib >> 10} MiB (measured: 45)"
    doc = json.loads(b"".join(chunks))
    assert doc["meta"]["tree_nodes_left_out"] == 0
    count, stack = 0, list(doc["tree"])
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node["children"])
    assert count == nodes


def test_saved_deep_distinct_stacks_load_in_bounded_memory(tmp_path: Path) -> None:
    """Loading keeps about 53 bytes a node (int32 ids, int8 unknown calls, no last-child
    column) and never the whole decompressed file: the peak stays under 75 bytes a node
    (it was about 130: 64-bit columns, beside the decompressed file)."""
    profile = distinct_deep_stacks(count=1000, depth=128)
    saved = tmp_path / "deep.proftui"
    storage.save(profile, saved)
    tracemalloc.start()
    try:
        loaded = storage.load(saved)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 75 * len(loaded.tree), f"{peak / len(loaded.tree):.0f} bytes a node"
    assert profile.tree is not None and len(loaded.tree) == len(profile.tree)
    assert loaded.tree.totals == profile.tree.totals and loaded.tree.frames == profile.tree.frames
    # A loaded tree still grows: a new child goes last among its siblings, and a count
    # of calls beyond int8 (or int32) is kept whole.
    fresh = loaded.frames.intern(Frame("fresh", "/bin/deep"))
    parent = loaded.tree.walk([0, 1])
    before = loaded.tree.children(parent)
    node = loaded.tree.walk([0, 1, fresh])
    assert loaded.tree.children(parent) == [*before, node]
    loaded.tree.add_calls(node, 3_000_000_000)
    assert loaded.tree.node(node).calls == 3_000_000_000
