"""gperftools heap profiles and heaptrack files of a fixture with known allocation sites.

Truth is hv_sites.c's (tests/helpers/heap_records.py TRUTH); the references are
`google-pprof --text` and `heaptrack_print` on the same file.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers import detect, gperftools_heap, heaptrack, load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile

from tests.helpers.heap_records import (
    PEAK_TRUTH,
    TRUTH,
    record_gperftools_heap,
    record_heaptrack,
)


def self_by_function(profile: Profile, metric: str) -> dict[str, float]:
    index = profile.metric_index(metric)
    return {e.frame.function: e.self_cost[index] for e in flat_profile(profile, metric=index)}


def google_pprof_flat(binary: Path, heap: Path, option: str) -> dict[str, int]:
    """name -> flat value from `google-pprof --text --show_bytes OPTION`."""
    tool = shutil.which("google-pprof")
    if tool is None:
        pytest.skip("google-pprof (Debian google-perftools) is not installed")
    result = subprocess.run([tool, "--text", "--show_bytes", option, str(binary), str(heap)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)", line)
        if match:
            rows[match[3]] = int(match[1])
    assert rows, result.stdout
    return rows


def test_gperftools_heap_import_matches_both_references(tmp_path: Path) -> None:
    binary, heap = record_gperftools_heap(tmp_path)
    assert detect(heap.read_bytes()[:4096]) == "gperftools-heap"
    profile = load_any(heap)
    names = [m.name for m in profile.metrics]
    assert names == ["live_bytes", "live_allocs", "alloc_bytes", "allocs", "leaked_bytes",
                     "leaks"]
    allocs = self_by_function(profile, "allocs")
    alloc_bytes = self_by_function(profile, "alloc_bytes")
    leaks = self_by_function(profile, "leaks")
    leaked = self_by_function(profile, "leaked_bytes")
    live = self_by_function(profile, "live_bytes")
    for function, (n, size, n_leak, leak) in TRUTH.items():
        assert (allocs[function], alloc_bytes[function]) == (n, size), function
        assert (leaks[function], leaked[function]) == (n_leak, leak), function
        assert live[function] == leak, function
    # the call path: main -> leak_outer -> site_leak
    paths = {tuple(profile.frames[f].function for f in node.path())[-3:]
             for node in profile.tree.nodes() if node.self_cost[0] > 0}
    assert ("main", "leak_outer", "site_leak") in paths
    # the allocating lines of hv_sites.c
    source_lines = {(Path(f).name, line): c for (f, line), c in profile.line_costs.items()}
    text = (Path(__file__).parents[1] / "fixtures" / "hv_sites.c").read_text().splitlines()
    leak_line = next(i for i, t in enumerate(text, 1) if "p = malloc(n);" in t
                     and "site_leak" in text[i - 2])
    assert source_lines[("hv_sites.c", leak_line)][profile.metric_index("leaked_bytes")] \
        == 204_800
    for option, metric in (("--inuse_space", "live_bytes"), ("--inuse_objects", "live_allocs"),
                           ("--alloc_space", "alloc_bytes"), ("--alloc_objects", "allocs")):
        reference = google_pprof_flat(binary, heap, option)
        ours = self_by_function(profile, metric)
        for function in TRUTH:
            assert reference.get(function, 0) == ours[function], (option, function)
        assert sum(reference.values()) == profile.total(profile.metric_index(metric))
    assert any("reachability not checked" in w for w in profile.meta.warnings)
    assert any("no peak usage" in w for w in profile.meta.warnings)
    # saved and reopened: the same numbers
    saved = tmp_path / "hv.proftui"
    storage.save(profile, saved)
    again = load_any(saved)
    assert self_by_function(again, "leaked_bytes") == leaked


def test_gperftools_heap_dump_before_exit_is_not_leaks(tmp_path: Path) -> None:
    _, heap = record_gperftools_heap(tmp_path)
    later = heap.with_name(heap.name.replace(".0001.", ".0002."))
    later.write_bytes(heap.read_bytes())  # a later dump of the same series exists
    profile = gperftools_heap.load_gperftools_heap(heap)
    assert "leaked_bytes" not in [m.name for m in profile.metrics]
    assert gperftools_heap.load_gperftools_heap(later).metric_index("leaks") == 5


def test_gperftools_heap_v2_sampled_is_scaled_back() -> None:
    text = ("heap profile:    1:   1024 [    2:   2048] @ heap_v2/524288\n"
            "     1:   1024 [     2:    2048] @ 0x1000 0x2000\n\nMAPPED_LIBRARIES:\n")
    tag, rate, buckets, _ = gperftools_heap.parse(text)
    assert (tag, rate) == ("heap_v2/524288", 524288)
    scale = 1 / (1 - 2.718281828459045 ** (-1024 / 524288))
    assert buckets[0][0] == pytest.approx(scale) and buckets[0][1] == pytest.approx(1024 * scale)


@pytest.mark.parametrize("text, why", [
    ("heap profile: x\n", "bad first line"),
    ("heap profile: 1: 2 [3: 4] @ growth\n", "unsupported heap profile kind"),
    ("heap profile: 1: 2 [3: 4] @ heapprofile\n1: 2 [3: 4] @ zz\n", "line 2"),
])
def test_corrupt_heap_profiles_are_one_line_errors(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "bad.heap"
    path.write_text(text)
    with pytest.raises(ProftuiError, match=why) as info:
        load_any(path)
    assert "\n" not in str(info.value)


def heaptrack_print_calls(data: Path) -> tuple[dict[str, int], dict[str, str]]:
    """From heaptrack_print's text report: calls per allocating function (-a, unmerged
    backtraces) and the leaked amount as it prints it (-l)."""
    result = subprocess.run(["heaptrack_print", "-f", str(data), "-a", "1", "-l", "1",
                             "-p", "0", "-T", "0", "-n", "100"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    calls: dict[str, int] = {}
    leaked: dict[str, str] = {}
    section = ""
    lines = result.stdout.splitlines()
    for i, line in enumerate(lines):
        if line and line.isupper():
            section = line
        head = re.match(r"(\d+) calls to allocation functions", line)
        if head and section.startswith("MOST CALLS") and i + 1 < len(lines):
            calls[lines[i + 1].strip()] = int(head[1])
        head = re.match(r"(\S+) leaked over (\d+) calls from", line)
        if head and section.startswith("MEMORY LEAKS") and i + 1 < len(lines):
            leaked[lines[i + 1].strip()] = head[1]
    return calls, leaked


def test_heaptrack_import_matches_both_references(tmp_path: Path) -> None:
    binary, data = record_heaptrack(tmp_path)
    assert detect(data.read_bytes()[:4096]) == "heaptrack"
    profile = load_any(data)
    allocs = self_by_function(profile, "allocs")
    leaked = self_by_function(profile, "leaked_bytes")
    peak = self_by_function(profile, "peak_bytes")
    temporary = self_by_function(profile, "temporary")
    for function, (n, _size, _n_leak, leak) in TRUTH.items():
        assert allocs[function] == n and leaked[function] == leak, function
        assert peak[function] == PEAK_TRUTH[function], function
    assert temporary["site_freed"] == 100  # each freed before the next allocation
    assert Path(profile.meta.argv[0]).name == binary.name
    calls, printed_leaks = heaptrack_print_calls(data)
    for function in TRUTH:
        assert calls[function] == allocs[function], function
    assert printed_leaks["site_leak"] == "204.80K" and printed_leaks["site_half"] == "500.00K"


def test_heaptrack_without_heaptrack_print_is_one_line(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "heaptrack.x.1.gz"
    data.write_bytes(gzip.compress(b"v 10400 3\nX ./x\n"))
    assert detect(data.read_bytes()) == "heaptrack"
    monkeypatch.setattr(heaptrack.shutil, "which", lambda _name: None)
    with pytest.raises(ProftuiError, match="install heaptrack's heaptrack_print") as info:
        load_any(data)
    assert "\n" not in str(info.value)


def test_corrupt_heaptrack_file_is_one_line(tmp_path: Path) -> None:
    if shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack_print (Debian heaptrack) is not installed")
    data = tmp_path / "heaptrack.x.1.zst"
    data.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(256)) * 4)  # zstd magic, then noise
    with pytest.raises(ProftuiError, match="corrupt heaptrack file") as info:
        load_any(data)
    assert "\n" not in str(info.value)
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "report", str(data)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
