"""The heap runtime never hangs a target that calls pthread_getattr_np itself.

glibc holds a thread's lock while pthread_getattr_np allocates (the main
thread reads /proc/self/maps; every thread allocates its cpuset), so a heap
runtime that looks its stack bounds up with pthread_getattr_np from inside a
tracked allocation waits on a lock its own thread holds (issue 16).  The
fixture (tests/fixtures/heap_getattr.c) does exactly that, on the main thread
and on a second one, as its very first allocations.  Each run has a timeout
and kills the whole session on expiry, so a regression fails instead of
hanging the suite.  Both preload orders of `--heap` are exercised too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_fixture
from tests.helpers.heap import by_site

CLI = [sys.executable, "-m", "proftui.tui.cli"]
TIMEOUT = 60  # seconds; the run itself takes well under one


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the CLI in its own session; on timeout kill the session (target included)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{' '.join(argv)} hung (killed after {TIMEOUT} s)")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _self_bytes(report: str, function: str) -> int:
    """The flat profile's self bytes of `function` in a --text report."""
    match = re.search(rf"^\s*[\d.]+\s+(\d+)\s+\d+.*\s{function}$", report, re.MULTILINE)
    assert match, f"{function} not in the flat profile:\n{report}"
    return int(match.group(1))


@pytest.fixture(scope="module")
def binary() -> Path:
    return build_fixture("heap_getattr.c", ["-O2", "-g", "-pthread"])


def test_plain_run(binary: Path) -> None:
    plain = subprocess.run([str(binary)], capture_output=True, text=True, timeout=TIMEOUT)
    assert plain.returncode == 0 and plain.stdout == "getattr ok 1\n"


@pytest.mark.parametrize("mode", [["--mode", "heap"], ["--mode", "sampler", "--heap"]],
                         ids=["heap", "sampler+heap"])
def test_getattr_then_malloc_does_not_hang(binary: Path, mode: list[str]) -> None:
    run = _run([*CLI, *mode, "--text", str(binary)])
    assert run.returncode == 0, run.stderr
    assert "getattr ok 1" in run.stdout
    assert "target exited with status 0" in run.stdout
    if mode[1] == "heap":  # the flat profile's first metric is alloc_bytes
        # Both threads' own blocks are tracked, with their stacks: 10 + 20 bytes.
        assert _self_bytes(run.stdout, "getattr_alloc") == 30
        assert re.search(r"^\s*[\d.]+%\s+\d+\s+getattr_thread$", run.stdout, re.MULTILINE)


def test_both_preload_orders(binary: Path) -> None:
    """--heap preloads the heap runtime first; the sampler first must work as well."""
    from proftui.collectors.base import CollectorOptions
    from proftui.collectors.sampler_and_heap.collector import SamplerAndHeapCollector

    for order in ("heap-first", "sampler-first"):
        collector = SamplerAndHeapCollector([str(binary)], CollectorOptions(output="log"))
        if order == "sampler-first":
            heap_preload, sampler_preload = collector.heap.preload, collector.sampler.preload
            collector.heap.preload = sampler_preload  # type: ignore[method-assign]
            collector.sampler.preload = heap_preload  # type: ignore[method-assign]
        _check_collector(collector, order)


def _check_collector(collector: object, order: str) -> None:
    import threading

    done: dict[str, object] = {}

    def work() -> None:
        collector.start()  # type: ignore[attr-defined]
        try:
            done["profile"] = collector.wait()  # type: ignore[attr-defined]
            done["output"] = collector.process.output_text()  # type: ignore[attr-defined]
        finally:
            collector.stop()  # type: ignore[attr-defined]

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    if worker.is_alive():
        process = getattr(collector, "process", None)
        if process is not None and getattr(process, "pid", None):
            os.kill(process.pid, signal.SIGKILL)
        pytest.fail(f"--heap with the {order} preload order hung")
    profile = done["profile"]
    assert "getattr ok 1" in str(done["output"])
    assert profile.meta.exit_status == 0  # type: ignore[attr-defined]
    assert by_site(profile, "alloc_bytes")["getattr_alloc"] == 30, order  # type: ignore[arg-type]
