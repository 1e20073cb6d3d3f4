"""Heap mode end to end: fixtures whose truth is known, run under the preloaded heap profiler.

Every run checks the target's output and exit status too (the target is sacred).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from proftui.collectors.heap.collector import LEAK_NOTE

from tests.conftest import build_fixture
from tests.helpers.heap import by_site, run_heap, stack_of
from tests.helpers.targets import static_binary

FLAGS = ["-O2", "-g", "-pthread"]
CLI = [sys.executable, "-m", "proftui.tui.cli"]


@pytest.fixture(scope="module")
def basic() -> tuple:
    binary = build_fixture("heap_basic.c", FLAGS)
    plain = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    profile, output = run_heap(binary)
    return binary, plain, profile, output


def test_target_runs_untouched(basic: tuple) -> None:
    _binary, plain, profile, output = basic
    assert plain.returncode == 3
    assert output.strip() == plain.stdout.strip()
    assert profile.meta.exit_status == 3
    assert profile.meta.complete and profile.meta.mode == "heap"


def test_exact_allocations_per_call_site(basic: tuple) -> None:
    profile = basic[2]
    alloc = by_site(profile, "alloc_bytes")
    allocs = by_site(profile, "allocs")
    assert alloc["leak_site"] == 300 and allocs["leak_site"] == 3
    assert alloc["calloc_leak"] == 200 and allocs["calloc_leak"] == 1
    assert alloc["temp_site"] == 64000 and allocs["temp_site"] == 1000
    assert alloc["peak_holder"] == 4 << 20 and alloc["later_holder"] == 1 << 20
    assert alloc["producer"] == 50 * 256 and allocs["producer"] == 50
    assert alloc["aligned_leak"] == 4096
    assert alloc["aligned_temp"] == 128 + 512 + 1000 and allocs["aligned_temp"] == 3


def test_leaks_are_charged_to_their_sites(basic: tuple) -> None:
    profile = basic[2]
    leaked = by_site(profile, "leaked_bytes")
    leaks = by_site(profile, "leaks")
    assert leaked["leak_site"] == 300 and leaks["leak_site"] == 3
    assert leaked["calloc_leak"] == 200
    assert leaked["aligned_leak"] == 4096
    assert leaked["on_signal"] == 5 * 128 and leaks["on_signal"] == 5
    for freed in ("temp_site", "peak_holder", "later_holder", "grow_chain", "producer",
                  "aligned_temp"):
        assert freed not in leaked, freed
    assert LEAK_NOTE in profile.meta.warnings
    # The leak's source line: the malloc call inside leak_site.
    lines = {line for (file, line), costs in profile.line_costs.items()
             if file.endswith("heap_basic.c") and costs[profile.metric_index("leaks")] == 3}
    source = (build_fixture.__globals__["FIXTURES"] / "heap_basic.c").read_text().splitlines()
    assert lines and all("malloc(100)" in source[line - 1] for line in lines)


def test_peak_is_charged_to_who_held_it(basic: tuple) -> None:
    profile = basic[2]
    peak = by_site(profile, "peak_bytes")
    assert peak["peak_holder"] == 4 << 20
    assert "later_holder" not in peak  # allocated after the peak
    assert sum(peak.values()) < (4 << 20) + 16384  # the small live blocks of that moment


def test_frees_end_blocks_whichever_thread_frees_them(basic: tuple) -> None:
    profile = basic[2]
    temporary = by_site(profile, "temporary")
    assert temporary["temp_site"] == 1000
    assert "producer" not in temporary  # freed by another thread
    live = by_site(profile, "live_bytes")
    assert "producer" not in live and "grow_chain" not in live


def test_realloc_growth_chain(basic: tuple) -> None:
    profile = basic[2]
    assert by_site(profile, "alloc_bytes")["grow_chain"] == sum(i * 1000 for i in range(1, 11))
    assert by_site(profile, "allocs")["grow_chain"] == 10


def test_allocation_in_signal_handler(basic: tuple) -> None:
    profile = basic[2]
    assert by_site(profile, "allocs")["on_signal"] == 5
    assert "signals 5" in basic[3]
    # The unwinder steps through the signal return trampoline (__restore_rt)
    # into the interrupted code: raise, called by main, lies below the handler.
    stack = stack_of(profile, "on_signal")
    assert stack[-1] == "on_signal", stack
    assert "main" in stack and "raise" in stack, stack
    assert stack.index("main") < stack.index("raise") < len(stack) - 1, stack


def test_call_paths(basic: tuple) -> None:
    profile = basic[2]
    assert stack_of(profile, "leak_site")[-2:] == ["main", "leak_site"]
    assert stack_of(profile, "peak_holder")[-2:] == ["main", "peak_holder"]


def test_threads_and_a_fork_child_keep_their_own_allocations() -> None:
    binary = build_fixture("heap_threads_fork.c", FLAGS)
    profile, output = run_heap(binary, follow_children=True)
    assert "child done" in output and "parent done, child status 0" in output
    assert profile.meta.exit_status == 0
    alloc = by_site(profile, "alloc_bytes")
    assert alloc["worker_alloc"] == sum(1000 * 64 * (t + 1) for t in range(4))
    assert by_site(profile, "leaks")["worker_alloc"] == 4 * 500
    assert by_site(profile, "leaked_bytes")["worker_alloc"] == sum(500 * 64 * (t + 1)
                                                                   for t in range(4))
    assert len(profile.meta.pids) == 2
    sites = {part: by_site(profile, "leaked_bytes", part) for part in profile.parts}
    child_part = next(p for p, s in sites.items() if "child_site" in s)
    parent_part = next(p for p, s in sites.items() if "parent_site" in s)
    assert child_part != parent_part
    assert sites[child_part]["child_site"] == 7 * 333
    assert sites[parent_part]["parent_site"] == 2 * 777
    assert "worker_alloc" not in sites[child_part]  # the parent's blocks stay the parent's


def test_fork_not_followed_stays_untouched() -> None:
    binary = build_fixture("heap_threads_fork.c", FLAGS)
    profile, output = run_heap(binary)
    assert "child done" in output
    assert len(profile.meta.pids) == 1
    assert "child_site" not in by_site(profile, "allocs")


def test_cxx_new_delete() -> None:
    if subprocess.run(["which", "g++"], capture_output=True).returncode:
        pytest.skip("g++ is not installed")
    binary = build_fixture("heap_cxx.cpp", ["-O2", "-g", "-std=c++17"], compiler="g++")
    plain = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    profile, output = run_heap(binary)
    assert output.strip() == plain.stdout.strip() and profile.meta.exit_status == 0
    alloc = by_site(profile, "alloc_bytes")
    leaked = by_site(profile, "leaked_bytes")
    assert alloc["make_nodes()"] == 5 * 48 and leaked["make_nodes()"] == 5 * 48
    assert alloc["make_array()"] == 400 and leaked["make_array()"] == 400
    assert alloc["churn_arrays()"] == 1000 * 128 and "churn_arrays()" not in leaked
    assert by_site(profile, "temporary")["churn_arrays()"] == 1000
    assert alloc["aligned_nodes()"] == 10 * 128 and "aligned_nodes()" not in leaked
    assert alloc["nothrow_site()"] == 3000 and "nothrow_site()" not in leaked
    # The stack starts at the program's `new`, not inside libstdc++.
    assert "operator new" not in " ".join(alloc)


def test_sampled_totals_within_statistical_error() -> None:
    binary = build_fixture("heap_many.c", FLAGS)
    mean = 64 << 10
    profile, output = run_heap(binary, heap_sample_bytes=mean)
    assert "done" in output
    truth = {"small_site": 400000 * 48, "medium_site": 100000 * 1000,
             "large_site": 2000 * 50000, "kept_site": 5000 * 2000}
    alloc = by_site(profile, "alloc_bytes")
    for site, true_bytes in truth.items():
        # Poisson sampling on bytes: the estimate's standard deviation is at most
        # sqrt(mean * B) (smaller for blocks not much smaller than the mean).
        sigma = (mean * true_bytes) ** 0.5
        assert abs(alloc.get(site, 0.0) - true_bytes) < 5 * sigma, (site, alloc.get(site))
    leaked = by_site(profile, "leaked_bytes").get("kept_site", 0.0)
    assert abs(leaked - 10_000_000) < 5 * (mean * 10_000_000) ** 0.5
    # Every sampled block of the freed sites was credited back (the free path's
    # filter never lets a sampled free through to the allocator unrecorded).
    live = by_site(profile, "leaked_bytes")
    for site in ("small_site", "medium_site", "large_site"):
        assert alloc.get(site, 0.0) > 0 and live.get(site, 0.0) == 0, (site, live.get(site))
    counts = by_site(profile, "allocs")
    assert abs(counts.get("small_site", 0) - 400000) < 0.2 * 400000
    assert any("sampled heap profile" in w for w in profile.meta.warnings)


def test_cli_text_json_record(tmp_path) -> None:
    binary = build_fixture("heap_basic.c", FLAGS)
    text = subprocess.run([*CLI, "--mode", "heap", "--text", str(binary)], capture_output=True,
                          text=True, timeout=120)
    assert text.returncode == 3, text.stderr
    assert "peak_holder" in text.stdout and "checksum" in text.stdout
    js = subprocess.run([*CLI, "--mode", "heap", "--json", str(binary)], capture_output=True,
                        text=True, timeout=120)
    assert js.returncode == 3, js.stderr
    report = json.loads(js.stdout[js.stdout.index("{"):])
    assert "alloc_bytes" in json.dumps(report)
    out = tmp_path / "heap.proftui"
    rec = subprocess.run([*CLI, "record", "-o", str(out), "--mode", "heap", str(binary)],
                         capture_output=True, text=True, timeout=120)
    assert rec.returncode == 3, rec.stderr
    from proftui.collectors.model import storage
    saved = storage.load(out)
    assert saved.meta.mode == "heap"
    assert saved.timeline is not None and saved.timeline.names == ["live_bytes", "rss_bytes"]
    assert by_site(saved, "leaked_bytes")["leak_site"] == 300


def test_bad_heap_sample_is_refused_in_one_line() -> None:
    bad = subprocess.run([*CLI, "--mode", "heap", "--heap-sample", "lots", "--text", "/bin/true"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_static_binary_is_refused_in_one_line() -> None:
    res = subprocess.run([*CLI, "--mode", "heap", "--text", str(static_binary())],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "statically linked" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_auto_detect_never_picks_heap() -> None:
    from proftui.collectors.detect import inspect_binary
    binary = build_fixture("heap_basic.c", FLAGS)
    assert inspect_binary(binary).mode != "heap"


def test_corrupt_heap_file_is_one_clear_error(tmp_path) -> None:
    from proftui.collectors.errors import ProftuiError
    from proftui.collectors.runtime.wire import HEADER_SIZE, KIND_HEAP, FileHeader, encode_header
    from proftui.collectors.runtime.wire_heap import HeapFile
    path = tmp_path / "heap.1.ptw"
    header = FileHeader(KIND_HEAP, 1, 0, 0, 0, 0, HEADER_SIZE, 4096, 0, 0, 0, "x")
    path.write_bytes(encode_header(header) + b"\xff" * (4096 - HEADER_SIZE))
    with pytest.raises(ProftuiError, match="corrupt heap header"):
        HeapFile(path)
    path.write_bytes(encode_header(header)[:100])
    with pytest.raises(ProftuiError):
        HeapFile(path)


def test_sampled_cxx_new_is_counted_once() -> None:
    """operator new calls malloc: in sampled mode its bytes must move the countdown once,
    or C++ allocations would be sampled twice as often and over-estimated."""
    if subprocess.run(["which", "g++"], capture_output=True).returncode:
        pytest.skip("g++ is not installed")
    binary = build_fixture("heap_bench.cpp", ["-O2", "-g"], compiler="g++")
    exact, _ = run_heap(binary, "100000")
    mean = 64 << 10
    sampled, _ = run_heap(binary, "100000", heap_sample_bytes=mean)
    index = exact.metric_index("alloc_bytes")
    truth, estimate = exact.total(index), sampled.total(index)
    assert abs(estimate - truth) < 5 * (mean * truth) ** 0.5, (estimate, truth)
