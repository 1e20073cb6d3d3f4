"""Instrument mode options and faults: filters, depth limit, bounded buffer,
hook-cost compensation, version mismatch, programs that cannot be profiled."""

from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.instrument.collector import InstrumentCollector
from proftui.collectors.model.views import flat_profile
from proftui.collectors.runtime.wire import HEADER_SIZE, VERSION

from tests.conftest import build_fixture
from tests.helpers.hook_file import TREE, encode
from tests.helpers.instrument import build, calls_by_path, record


def test_exclude_drops_the_function_and_its_subtree() -> None:
    profile, _ = record([build("ins_basic.c"), "100"], exclude=["mid"])
    assert calls_by_path(profile) == {
        ("main",): 1, ("main", "run"): 1, ("main", "run", "leaf_a"): 200,
        ("main", "run", "leaf_b"): 300}
    assert any("filters" in w for w in profile.meta.warnings)


def _cpu_seconds(argv: list[str], env: dict[str, str], run_dir: Path) -> float:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(mode=0o700)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def test_exclude_pattern_costs_nothing_outside_the_calls_it_matches(tmp_path: Path) -> None:
    """-N on a function the hot calls never reach keeps their fast path: it took the
    slow path on every call before (fib: 0.50 s against 0.21 s without -N), so -N on a
    short function, as the notes suggest, made the run slower, not faster.  Best of 3
    CPU times, alternating: a loaded machine slows both sides alike."""
    from proftui.collectors.runtime.libraries import runtime_library_path

    fib = build_fixture("ins_bench.c", ["-O2", "-fno-optimize-sibling-calls",
                                        "-finstrument-functions"])
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PROFTUI_", "LD_"))}
    env = {**base, "LD_PRELOAD": runtime_library_path("proftui_hook"),
           "PROFTUI_DIR": str(tmp_path / "run")}
    argv = [str(fib), "28", "4"]
    plain, excluded = float("inf"), float("inf")
    for _ in range(3):
        plain = min(plain, _cpu_seconds(argv, env, tmp_path / "run"))
        excluded = min(excluded, _cpu_seconds(argv, {**env, "PROFTUI_EXCLUDE": "never_called"},
                                              tmp_path / "run"))
    assert excluded < 1.5 * plain + 0.02, (excluded, plain)


def test_include_records_only_matching_subtrees() -> None:
    profile, _ = record([build("ins_basic.c"), "100"], include=["mid"])
    assert calls_by_path(profile) == {("mid",): 100, ("mid", "leaf_a"): 100}
    profile, _ = record([build("ins_basic.c"), "100"], include=["leaf_*"])
    assert calls_by_path(profile) == {("leaf_a",): 300, ("leaf_b",): 300}


def test_max_depth_limits_recorded_levels() -> None:
    profile, _ = record([build("ins_basic.c"), "100"], max_depth=2)
    assert calls_by_path(profile) == {("main",): 1, ("main", "run"): 1}


def test_full_buffer_counts_dropped_calls() -> None:
    # 1 MiB holds ~15,000 nodes: a 100,000-deep recursion needs one per level.
    profile, output = record([build("ins_recurse.c"), "100000"], buffer_bytes=1 << 20)
    assert output == "levels 100000 even 1\n"  # the target is unaffected
    assert profile.meta.dropped > 50000
    assert any("not recorded" in w for w in profile.meta.warnings)
    assert profile.meta.complete


def _leaf_against_plain(iterations: int) -> tuple[float, float]:
    """(leaf self ns per call from the profile, uninstrumented ns per call)."""
    binary = build("ins_comp.c", [f"-DITER={iterations}"], output=f"ins_comp{iterations}")
    profile, output = record([binary, "50000", "20"], timed=True)
    words = output.split()
    plain = float(words[words.index("plain_ns") + 1])
    leaf = {e.frame.function: e for e in flat_profile(profile)}["leaf"]
    assert leaf.calls == 1000000
    return leaf.self_cost[0] / leaf.calls, plain


def test_compensation_keeps_tiny_leaf_self_time_honest() -> None:
    # A leaf of ~70 ns: uncompensated, the hooks would add ~15-25 ns to it (>20%).
    # Timing on a shared machine is noisy: the claim must hold in one of 3 runs.
    results = []
    for _ in range(3):
        measured, plain = _leaf_against_plain(200)
        results.append((round(measured, 1), round(plain, 1)))
        if abs(measured - plain) <= 0.15 * plain:
            return
    pytest.fail(f"leaf self time vs uninstrumented (ns/call): {results}")


def _fake_hook_file(version: int) -> bytes:
    header = struct.pack("<8sIIIIIIQQQQQII32s16x", b"PROFTUI\0", version, 1, HEADER_SIZE,
                         4242, 1, 0, 0, 0, 128, 4096, 0, 0, 1, b"tsc")
    return header + b"\0" * (4096 - len(header))


def test_version_mismatch_is_a_clear_error() -> None:
    collector = InstrumentCollector([str(build("ins_basic.c")), "10"],
                                    CollectorOptions(output="log"))
    try:
        collector.start()
        collector.wait()
        (collector.run_dir.path / "hook.4242.ptw").write_bytes(_fake_hook_file(99))
        with pytest.raises(ProftuiError, match=rf"format version 99.*reads version {VERSION}"):
            collector.collect()
    finally:
        collector.stop()


def test_program_without_hooks_is_explained() -> None:
    plain = build_fixture("ins_basic.c", ["-O2"], output="ins_basic_plain")
    collector = InstrumentCollector([str(plain)], CollectorOptions())
    with pytest.raises(ProftuiError, match="not built with -finstrument-functions"):
        collector.start()
    collector.stop()


def test_static_program_is_explained() -> None:
    try:
        static = build_fixture("ins_basic.c", ["-O2", "-static", "-finstrument-functions"],
                               output="ins_basic_static")
    except Exception as exc:  # no static libc installed
        pytest.skip(f"cannot link statically here: {exc}")
    collector = InstrumentCollector([str(static)], CollectorOptions())
    with pytest.raises(ProftuiError, match="statically linked"):
        collector.start()
    collector.stop()


def test_failed_calibration_is_said_in_the_notes() -> None:
    from proftui.collectors.runtime.wire_hook import decode_hook

    collector = InstrumentCollector(["true"], CollectorOptions())
    good = decode_hook(bytes(encode(TREE, chunks=[(0, 3)])))
    failed = decode_hook(bytes(encode(TREE, chunks=[(0, 3)], inner=0.0, outer=0.0)))
    assert "hook cost compensated (1.0 ns inside" in collector._clock([good])[0]
    assert "NOT compensated" in collector._clock([failed])[0]
    _, warnings = collector._completeness([failed], running=False)
    assert any("calibration failed" in w and "not compensated" in w for w in warnings)
    _, warnings = collector._completeness([good], running=False)
    assert not any("calibration" in w for w in warnings)


def test_a_real_run_is_calibrated() -> None:
    profile, _ = record([build("ins_basic.c"), "100"], timed=True)
    assert "hook cost compensated" in profile.meta.clock
    assert not any("calibration" in w for w in profile.meta.warnings)
