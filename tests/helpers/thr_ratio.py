"""tests/fixtures/thr_ratio.c: four named threads (worker-1..4) doing 1:2:3:4 units of
work in thr_spin_1..4, and main a little in thr_main_work. The fixture writes each
thread's own CPU time (CLOCK_THREAD_CPUTIME_ID) to a report file: the same-run truth."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from proftui.collectors.base import CollectorOptions
from proftui.collectors.sampler.collector import SamplerCollector

from tests.conftest import build_fixture

FLAGS = ["-O2", "-g", "-pthread"]

WORKERS = ("worker-1", "worker-2", "worker-3", "worker-4")


@dataclass
class Report:
    """What the fixture measured: thread name -> (tid, CPU ns)."""

    threads: dict[str, tuple[int, int]]

    def measured_shares(self) -> dict[str, float]:
        total = sum(self.threads[w][1] for w in WORKERS)
        return {w: self.threads[w][1] / total for w in WORKERS}


def read_report(path: Path) -> Report:
    """The fixture's report file, whole (it ends with "done")."""
    lines = path.read_text().splitlines()
    assert lines and lines[-1] == "done", lines
    threads = {}
    for line in lines[:-1]:
        name, tid, ns = line.split()
        threads[name] = (int(tid), int(ns))
    assert set(threads) == {*WORKERS, "main"}, threads
    return Report(threads)


def sampler_run(tmp_path: Path, unit: str) -> tuple[SamplerCollector, Path]:
    """A sampler collector (not started) on thr_ratio doing `unit` iterations a unit of
    work, and where its report will be."""
    binary = build_fixture("thr_ratio.c", FLAGS)
    report = tmp_path / "report.txt"
    collector = SamplerCollector([str(binary), str(report), unit],
                                 CollectorOptions(output="log"))
    return collector, report
