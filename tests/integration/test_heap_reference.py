"""Heap mode against the reference tools on the same fixture: heaptrack (heaptrack_print)
and gperftools' heap profiler (libtcmalloc + HEAPPROFILE, read with google-pprof).

Each test skips, with the reason printed, where its tool is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import build_fixture, build_lua
from tests.helpers.heap import by_site, run_heap
from tests.helpers.heap_records import allocation_paths, heaptrack_stacks

FLAGS = ["-O2", "-g", "-pthread"]
# Sites of heap_basic.c that both tools see (heaptrack 1.4 does not track aligned_alloc).
USER_SITES = ("leak_site", "calloc_leak", "temp_site", "peak_holder", "later_holder",
              "grow_chain", "producer", "on_signal", "aligned_leak")
LEAK_SITES = ("leak_site", "calloc_leak", "on_signal", "aligned_leak")
TCMALLOC = [Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
                              "/usr/lib/x86_64-linux-gnu/libtcmalloc.so",
                              "/usr/lib/libtcmalloc.so.4")]


def _size(text: str) -> float:
    """heaptrack_print's sizes: 300B, 4.10K, 1.05M (decimal units)."""
    match = re.fullmatch(r"([\d.]+)([BKMG]?)", text)
    assert match, text
    return float(match.group(1)) * {"B": 1, "": 1, "K": 1e3, "M": 1e6, "G": 1e9}[match.group(2)]


def heaptrack_report(binary: Path, tmp: Path) -> tuple[dict[str, int], dict[str, tuple[float, int]],
                                                         int]:
    """(calls per site, (leaked bytes, leaked blocks) per site, total calls) from heaptrack."""
    if shutil.which("heaptrack") is None or shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack / heaptrack_print are not installed")
    out = tmp / "ht"
    run = subprocess.run(["heaptrack", "-o", str(out), str(binary)], capture_output=True,
                         text=True, timeout=300)
    data = next(tmp.glob("ht*"), None)
    if run.returncode not in (0, 3) or data is None:
        pytest.skip(f"heaptrack could not record here: {run.stderr.strip()[-200:]}")
    text = subprocess.run(["heaptrack_print", "-f", str(data), "-a", "1", "-l", "1", "-p", "0",
                           "-T", "0", "-n", "100", "-s", "0"], capture_output=True, text=True,
                          timeout=300).stdout
    calls: dict[str, int] = {}
    leaks: dict[str, tuple[float, int]] = {}
    for count, name in re.findall(r"^(\d+) calls to allocation functions with .* from\n(\S+)$",
                                  text, re.M):
        calls[name] = calls.get(name, 0) + int(count)
    for size, count, name in re.findall(r"^(\S+) leaked over (\d+) calls from\n(\S+)$", text,
                                        re.M):
        old = leaks.get(name, (0.0, 0))
        leaks[name] = (old[0] + _size(size), old[1] + int(count))
    total = int(re.search(r"calls to allocation functions: (\d+)", text).group(1))
    return calls, leaks, total


def test_heaptrack_agrees_per_site(tmp_path: Path) -> None:
    binary = build_fixture("heap_basic.c", FLAGS)
    calls, leaks, total = heaptrack_report(binary, tmp_path)
    profile, _ = run_heap(binary)
    ours = by_site(profile, "allocs")
    for site in USER_SITES:
        assert ours[site] == calls[site], (site, ours[site], calls[site])
    # The top allocation sites by calls, in the same order.
    top_theirs = [s for s, _ in sorted(calls.items(), key=lambda kv: -kv[1]) if s in USER_SITES]
    top_ours = [s for s, _ in sorted(ours.items(), key=lambda kv: -kv[1]) if s in USER_SITES]
    assert top_ours[:4] == top_theirs[:4]
    leaked = by_site(profile, "leaked_bytes")
    nleaks = by_site(profile, "leaks")
    for site in LEAK_SITES:
        size, count = leaks[site]
        assert nleaks[site] == count, site
        assert abs(leaked[site] - size) <= 0.01 * size, (site, leaked[site], size)
    for site in set(USER_SITES) - set(LEAK_SITES):
        assert site not in leaks and site not in leaked
    # Whole-run calls (heaptrack also misses aligned_alloc: one call).
    assert abs(sum(ours.values()) - total) <= 3, (sum(ours.values()), total)


def test_heaptrack_agrees_on_lua(tmp_path: Path) -> None:
    """A real program (Lua, -O2, no frame pointers): the top-10 allocation call paths by
    calls match heaptrack's, and so do their counts."""
    lua = build_lua()
    script = Path(__file__).parents[1] / "fixtures" / "heap_alloc.lua"
    theirs = allocation_paths(heaptrack_stacks([str(lua), str(script), "20000"], tmp_path))
    profile, _ = run_heap(lua, str(script), "20000")
    ours = allocation_paths(profile)
    top_theirs = [s for s, _ in sorted(theirs.items(), key=lambda kv: -kv[1])[:10]]
    top_ours = [s for s, _ in sorted(ours.items(), key=lambda kv: -kv[1])[:10]]
    assert len(set(top_ours) & set(top_theirs)) >= 9, (top_ours, top_theirs)
    for site in top_theirs[:5]:
        assert abs(ours.get(site, 0) - theirs[site]) <= 0.01 * theirs[site] + 2, site


def test_heaptrack_agrees_on_cxx(tmp_path: Path) -> None:
    """C++ (strings, vectors, map nodes, make_unique through libstdc++'s operator new):
    every call path heaptrack counts more than 10 calls on has the same count here."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    binary = build_fixture("heap_bench.cpp", ["-O2", "-g"], compiler="g++")
    stacks = heaptrack_stacks([str(binary), "20000"], tmp_path)
    theirs = {p: c for p, c in allocation_paths(stacks).items() if c > 10}
    profile, _ = run_heap(binary, "20000")
    ours = allocation_paths(profile)
    assert len(theirs) >= 5
    for path, count in theirs.items():
        assert ours.get(path) == count, (path, ours.get(path), count)


def test_gperftools_agrees_per_site(tmp_path: Path) -> None:
    tcmalloc = next((p for p in TCMALLOC if p.exists()), None)
    pprof = shutil.which("google-pprof") or shutil.which("pprof-perl")
    if tcmalloc is None or pprof is None:
        pytest.skip("gperftools (libtcmalloc.so and google-pprof) is not installed")
    binary = build_fixture("heap_basic.c", FLAGS)
    env = {"LD_PRELOAD": str(tcmalloc), "HEAPPROFILE": str(tmp_path / "prof"),
           "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 3
    dumps = sorted(tmp_path.glob("prof.*.heap"))
    if not dumps:
        pytest.skip(f"gperftools wrote no heap profile: {run.stderr.strip()[-200:]}")

    def table(kind: str) -> dict[str, float]:
        text = subprocess.run([pprof, "--text", f"--{kind}", "--show_bytes", str(binary),
                               str(dumps[-1])], capture_output=True, text=True,
                              timeout=300).stdout
        rows = re.findall(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(\S+)$", text, re.M)
        return {name: float(flat) for flat, name in rows if float(flat)}

    profile, _ = run_heap(binary)
    for kind, metric in (("alloc_objects", "allocs"), ("alloc_space", "alloc_bytes"),
                         ("inuse_objects", "leaks"), ("inuse_space", "leaked_bytes")):
        theirs = table(kind)
        ours = by_site(profile, metric)
        # gperftools counts valloc(1000) as the page it returns: aligned_temp's objects only.
        sites = LEAK_SITES if metric.startswith("leak") else USER_SITES + (
            ("aligned_temp",) if metric == "allocs" else ())
        for site in sites:
            assert ours.get(site, 0.0) == theirs.get(site, 0.0), (kind, site, ours.get(site),
                                                                   theirs.get(site))
