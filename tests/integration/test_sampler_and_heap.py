"""`--heap`: CPU sampling and heap tracking in one run (collectors/sampler_and_heap/).

The fixture burns CPU in `burner` and allocates, with a known leak, in
`allocator` (tests/fixtures/heap_sampler.c).  One `--heap` run must put the CPU
on the burner as a sampler-only run does and the exact allocation counts, bytes
and leaks on the allocator as a heap-only run does, over one frame table, and
leave the target's output and exit status alone.
"""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import export_bytes
from proftui.collectors.formats.export.pprof import sample_columns
from proftui.collectors.formats.export.text import render_text
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.slices import range_profile
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.collectors.sampler_and_heap.collector import MODE, SamplerAndHeapCollector

from tests.conftest import build_fixture
from tests.helpers.heap import by_site, run_heap
from tests.helpers.targets import static_binary

FLAGS = ["-O2", "-g"]
CLI = [sys.executable, "-m", "proftui.tui.cli"]
SECONDS = "0.6"  # of CPU in burner
HEAP_NAMES = ["alloc_bytes", "allocs", "live_bytes", "peak_bytes", "leaked_bytes", "leaks",
              "temporary"]
# allocator's truth (the fixture's header)
ALLOCATOR = {"allocs": 2007, "alloc_bytes": 2000 * 48 + 7 * 1000, "leaked_bytes": 7000,
             "leaks": 7, "temporary": 2000}


def _run(collector: SamplerAndHeapCollector | SamplerCollector) -> tuple[Profile, str]:
    collector.start()
    try:
        profile = collector.wait()
        assert collector.process is not None
        return profile, collector.process.output_text()
    finally:
        collector.stop()


def _share(profile: Profile, function: str) -> float:
    samples = by_site(profile, "samples")
    return samples.get(function, 0.0) / sum(samples.values())


@pytest.fixture(scope="module")
def runs() -> dict:
    binary = build_fixture("heap_sampler.c", FLAGS)
    plain = subprocess.run([str(binary), SECONDS], capture_output=True, text=True, timeout=60)
    both, output = _run(SamplerAndHeapCollector([str(binary), SECONDS],
                                             CollectorOptions(output="log")))
    cpu, _ = _run(SamplerCollector([str(binary), SECONDS], CollectorOptions(output="log")))
    heap, _ = run_heap(binary, SECONDS)
    return {"binary": binary, "plain": plain, "both": both, "output": output, "cpu": cpu,
            "heap": heap}


def test_target_runs_untouched(runs: dict) -> None:
    plain, both = runs["plain"], runs["both"]
    assert plain.returncode == 5 and plain.stdout == "heap_sampler done, 7 blocks kept\n"
    assert runs["output"].strip() == plain.stdout.strip()
    assert both.meta.exit_status == 5 and both.meta.complete


def test_one_profile_with_both_metric_sets(runs: dict) -> None:
    both = runs["both"]
    assert both.meta.mode == MODE
    assert [m.name for m in both.metrics] == ["samples", "cpu_ns", *HEAP_NAMES]
    assert [m.name for m in runs["heap"].metrics] == HEAP_NAMES  # the heap collector's own
    assert "heap: exact" in both.meta.clock and "Hz" in both.meta.clock
    assert any(w.startswith("--heap:") for w in both.meta.warnings)
    # One frame table: each function is one frame, whichever runtime saw it.
    names = [f.function for f in both.frames if not f.inlined]
    for name in ("burner", "allocator", "main"):
        assert names.count(name) == 1, name


def test_cpu_lands_on_the_burner_as_in_a_sampler_run(runs: dict) -> None:
    both, cpu = runs["both"], runs["cpu"]
    assert both.total(both.metric_index("samples")) >= 0.6 * 600  # ~1000 Hz for 0.6 s
    share, alone = _share(both, "burner"), _share(cpu, "burner")
    assert share >= 0.9, share
    assert abs(share - alone) <= 0.05, (share, alone)
    assert by_site(both, "samples").get("allocator", 0.0) <= 0.02 * both.total(0)
    assert "burner" not in by_site(both, "allocs")  # it allocates nothing


def test_exact_heap_counts_land_on_the_allocator_as_in_a_heap_run(runs: dict) -> None:
    both, heap = runs["both"], runs["heap"]
    for metric, truth in ALLOCATOR.items():
        assert by_site(both, metric)["allocator"] == truth, metric
        assert by_site(heap, metric)["allocator"] == truth, metric
    # Every other site too: the sampler's runtime adds no allocation of its own.
    for metric in ("allocs", "alloc_bytes", "leaked_bytes", "leaks"):
        assert by_site(both, metric) == by_site(heap, metric), metric


def test_heap_timeline_of_both(runs: dict) -> None:
    both = runs["both"]
    assert both.timeline is not None and both.timeline.names == ["live_bytes", "rss_bytes"]
    assert both.timeline.times and max(both.timeline.column("rss_bytes")) > 0
    assert both.timeline.column("live_bytes")[-1] >= 7000


def test_line_costs_of_both(runs: dict) -> None:
    both = runs["both"]
    source = Path(__file__).parents[1] / "fixtures" / "heap_sampler.c"
    lines = source.read_text().splitlines()
    leak_line = next(i + 1 for i, text in enumerate(lines) if "= malloc(1000)" in text)
    samples, leaked = both.metric_index("samples"), both.metric_index("leaked_bytes")
    fixture = {line: costs for (file, line), costs in both.line_costs.items()
               if file.endswith("heap_sampler.c")}
    assert fixture[leak_line][leaked] == 7000
    burner_lines = [i + 1 for i, text in enumerate(lines) if "x = x * 636413" in text]
    assert sum(fixture.get(line, [0.0] * 9)[samples] for line in
               range(burner_lines[0] - 2, burner_lines[0] + 3)) >= 0.5 * both.total(samples)


def test_text_report_has_the_leak_summary(runs: dict) -> None:
    text = render_text(runs["both"])
    assert f"proftui {MODE} profile of" in text
    assert "7,000 bytes in 7 blocks leaked" in text
    assert "at allocator (heap_sampler.c:" in text
    assert "Flat profile:\n" in text and "\n  time    samples    samples\n" in text
    # A heap-only report: the title names the metric, the unit row says bytes or blocks.
    heap = render_text(runs["heap"])
    assert "Flat profile: alloc_bytes, bytes allocated\n" in heap
    assert "\n bytes      bytes      bytes\n" in heap and "alloc_bytes alloc_bytes" not in heap
    leaks = render_text(runs["heap"], metric=runs["heap"].metric_index("leaks"))
    assert "Flat profile: leaks, blocks live at exit\n" in leaks
    assert "\nblocks     blocks     blocks\n" in leaks


def test_saving_keeps_both_profiles(runs: dict, tmp_path: Path) -> None:
    both = runs["both"]
    path = storage.save(both, tmp_path / "run.proftui")
    loaded = storage.load(path)
    assert [m.name for m in loaded.metrics] == [m.name for m in both.metrics]
    for i in range(len(both.metrics)):
        assert loaded.total(i) == pytest.approx(both.total(i))
    assert by_site(loaded, "leaked_bytes")["allocator"] == 7000
    assert _share(loaded, "burner") == pytest.approx(_share(both, "burner"))
    assert loaded.timeline is not None and loaded.timeline.times == both.timeline.times
    report = subprocess.run([*CLI, "report", str(path)], capture_output=True, text=True,
                            timeout=120)
    assert report.returncode == 0 and "7,000 bytes in 7 blocks leaked" in report.stdout


def test_pprof_export_has_every_sample_type(runs: dict, tmp_path: Path) -> None:
    both = runs["both"]
    columns, missing = sample_columns(both)
    types = [name for name, _unit, _index in columns]
    assert {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space", "samples",
            "cpu_ns"} <= set(types)
    assert not missing
    data = gzip.decompress(export_bytes(both, "pprof"))
    assert b"inuse_space" in data and b"nanoseconds" in data  # the CPU period type too
    path = tmp_path / "both.pb.gz"
    path.write_bytes(export_bytes(both, "pprof"))
    back = load_any(path)
    cpu, space = back.metric_index("samples"), back.metric_index("inuse_space")
    assert back.metrics[0].name == "samples"  # CPU is the default sample type
    assert back.total(cpu) == both.total(0)
    assert back.total(space) == both.total(both.metric_index("live_bytes"))


def test_cli_json_has_both_profiles(runs: dict) -> None:
    binary = runs["binary"]
    done = subprocess.run([*CLI, "--json", "--heap", str(binary), "0.2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 5
    doc = json.loads(done.stdout[done.stdout.index("{"):])
    assert doc["meta"]["mode"] == MODE
    assert {"samples", "cpu_ns", *HEAP_NAMES} <= set(doc["meta"]["metrics"])
    flat = {f["function"]: f for f in doc["flat"]}
    assert flat["burner"]["self"]["samples"] > 0
    assert flat["allocator"]["self"]["allocs"] == 2007
    assert flat["allocator"]["self"]["leaked_bytes"] == 7000
    assert done.stdout.startswith(runs["plain"].stdout)  # the target's line, untouched


def test_record_saves_a_sampled_heap_profile(runs: dict, tmp_path: Path) -> None:
    binary = runs["binary"]
    out = tmp_path / "r.proftui"
    rec = subprocess.run([*CLI, "record", "-o", str(out), "--mode", "sampler", "--heap",
                          "--heap-sample", "4K", str(binary), "0.1"], capture_output=True,
                         text=True, timeout=120)
    assert rec.returncode == 5 and f"{MODE} profile saved" in rec.stderr
    assert "sampled" in storage.load(out).meta.clock


def test_heap_outside_a_launched_sampler_run_is_refused(runs: dict) -> None:
    binary = runs["binary"]
    for extra in (["--mode", "heap"], ["--mode", "gprof"]):
        bad = subprocess.run([*CLI, "--text", "--heap", *extra, str(binary)],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and bad.stdout == ""
        assert len(bad.stderr.strip().splitlines()) == 1 and "--heap" in bad.stderr
        assert "Traceback" not in bad.stderr
    bad = subprocess.run([*CLI, "--text", "--heap", "--pid", "1"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
    assert "sampler runs only" in bad.stderr


def test_live_snapshots_read_both_files() -> None:
    binary = build_fixture("heap_sampler.c", FLAGS)
    collector = SamplerAndHeapCollector([str(binary), "5"], CollectorOptions(output="log"))
    collector.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            live = collector.snapshot()
            if live.total(0) >= 50 and live.timeline is not None and live.timeline.times:
                break
            assert time.monotonic() < deadline, "no live samples within 30 s"
            time.sleep(0.1)
        assert not live.meta.complete
        assert by_site(live, "allocs")["allocator"] == 2007  # allocator ran before burner
        assert by_site(live, "live_bytes")["allocator"] == 7000
        assert not by_site(live, "leaked_bytes")  # nothing leaks before the exit
        assert _share(live, "burner") >= 0.8
    finally:
        collector.stop()


def test_static_binary_refused_in_one_line() -> None:
    static = static_binary()
    res = subprocess.run([*CLI, "--heap", "--text", str(static)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "statically linked" in res.stderr and "heap profiler" in res.stderr
    collector = SamplerAndHeapCollector([str(static)], CollectorOptions())
    try:
        with pytest.raises(ProftuiError, match="the heap profiler and the sampler cannot be "
                                               "preloaded"):
            collector.start()
    finally:
        collector.stop()
    assert not collector.run_dir.path.exists()


def test_sigterm_ends_the_run_cleanly() -> None:
    binary = build_fixture("heap_sampler.c", FLAGS)
    proc = subprocess.Popen([*CLI, "--text", "--heap", str(binary), "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "SIGTERM: target pid" in err and "killed by signal 15" in err
    assert "Traceback" not in err
    assert f"proftui {MODE} profile of" in out  # the report of what was collected
    assert "samples" in out


def test_the_whole_run_as_a_time_range_is_the_whole_profile(runs: dict) -> None:
    """Both runtimes' costs over time sit on the joined trees: the range of every slice
    gives each function (in the whole tree and in each part) the cost the profile has,
    for the sampler's metrics and the heap's counted ones alike."""
    both = runs["both"]
    slices = both.slices
    assert slices is not None and len(slices) > 0
    whole = range_profile(both, 0.0, slices.width * len(slices))
    for metric in ("samples", "cpu_ns", "allocs", "alloc_bytes", "temporary"):
        assert by_site(whole, metric) == pytest.approx(by_site(both, metric)), metric
        for label in both.parts:
            assert by_site(whole, metric, label) == pytest.approx(
                by_site(both, metric, label)), (metric, label)
    for metric in ("samples", "allocs"):  # the Time pane's rows: each metric in its column
        activity = slices.part_activity(both.metric_index(metric))
        assert sum(map(sum, activity)) == both.total(both.metric_index(metric)), metric
