"""Sampled heap mode (`--heap-sample`) on programs with a known leak (issue 32, item 1).

Each thread's countdown of bytes to its next sample used to start at 0 in fresh thread
state, so every thread's first allocation was sampled and weighed as 1/P: eight threads
that keep one 16-byte block each were reported as 4 MiB leaked in every run.  The first
distance is now drawn like every other.
"""

from __future__ import annotations

import re
import statistics

from tests.conftest import build_fixture
from tests.helpers.heap import run_heap

FLAGS = ["-O2", "-g", "-pthread"]


def _truth(output: str) -> tuple[int, int]:
    match = re.search(r"leaked=(\d+) peak=(\d+)", output)
    assert match, output
    return int(match[1]), int(match[2])


def _leaked(binary, *args: str, mean: int) -> tuple[float, int, str]:
    profile, output = run_heap(binary, *args, heap_sample_bytes=mean)
    leaked, _peak = _truth(output)
    return profile.total(profile.metric_index("leaked_bytes")), leaked, output


def test_each_threads_first_block_is_not_sampled_by_default() -> None:
    """8 threads keep 16 bytes each (128 B): a block of 16 bytes is sampled with
    probability 16/512Ki, so a run almost never reports any of it, and never the
    512 KiB per thread that sampling every first allocation gave."""
    binary = build_fixture("heap_first.c", FLAGS)
    for _ in range(3):
        estimate, truth, output = _leaked(binary, "threads", "8", "16", mean=512 << 10)
        assert truth == 128, output
        assert estimate < 1 << 20, estimate


def test_a_leak_before_churn_is_not_inflated() -> None:
    """4 KiB leaked, then 100,000 x 1 KiB allocated and freed: the first (leaked)
    allocation is sampled with probability 4096/512Ki, not always (526,339 B before)."""
    binary = build_fixture("heap_first.c", FLAGS)
    reports = [_leaked(binary, "churn", mean=512 << 10)[0] for _ in range(3)]
    # P(the 4 KiB block is sampled) = 0.8%, so all three runs at once: 5e-7.
    assert min(reports) == 0, reports


def test_mean_leak_estimate_over_20_runs_is_within_10_percent() -> None:
    """8 threads each leak 256 x 1 KiB (2 MiB in all) between 1 KiB blocks they free,
    sampled every 4 KiB on average: one run's estimate is off by about
    sqrt(4Ki/2Mi) = 4.4% (1 SD), the mean of 20 by 1%; the bound is 10%."""
    binary = build_fixture("heap_first.c", FLAGS)
    estimates = []
    truth = 0
    for _ in range(20):
        estimate, truth, _ = _leaked(binary, "leak", "256", "1024", mean=4096)
        estimates.append(estimate)
    mean = statistics.mean(estimates)
    print(f"truth {truth}, mean {mean:.0f}, runs {sorted(int(e) for e in estimates)}")
    assert abs(mean - truth) <= 0.10 * truth, (mean, truth)
