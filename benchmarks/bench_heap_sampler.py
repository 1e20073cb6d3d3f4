"""What `--heap` costs the target: the sampler alone, the heap profiler alone, both.

Runs each program unprofiled (the anchor, measured in the same run) and with
each runtime set preloaded as the collectors preload it (collectors/runtime/
preload.py: one run directory, LD_PRELOAD heap then sampler), and prints the
best-of-N wall time and its ratio to the anchor.  The front end's own work
(reading the files, symbolizing) is not counted: this is the target's slowdown.

    .venv/bin/python benchmarks/bench_heap_sampler.py [--repeat 5] [--cxx-n 400000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from proftui.collectors.runtime.libraries import runtime_library_path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "bench"


def build(source: str, compiler: str, name: str) -> Path:
    BUILD.mkdir(parents=True, exist_ok=True)
    out = BUILD / name
    source_path = ROOT / "tests" / "fixtures" / source
    subprocess.run([compiler, "-O2", "-g", "-o", str(out), str(source_path)], check=True)
    return out


def run_once(argv: list[str], libraries: list[str]) -> float:
    """Wall seconds of one run of `argv` with `libraries` preloaded (none: unprofiled)."""
    run_dir = Path(tempfile.mkdtemp(prefix="proftui-bench-"))
    env = dict(os.environ, PROFTUI_DIR=str(run_dir), PROFTUI_FRONTEND_PID=str(os.getpid()),
               PROFTUI_FREQUENCY="1000", PROFTUI_WALL_CLOCK="0", PROFTUI_FOLLOW_CHILDREN="0")
    if libraries:
        env["LD_PRELOAD"] = ":".join(libraries)
    try:
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cxx-n", type=int, default=400000, help="heap_bench rounds")
    args = parser.parse_args()
    heap, sampler = runtime_library_path("proftui_heap"), runtime_library_path("proftui_sampler")
    setups = {"unprofiled": [], "sampler": [sampler], "heap": [heap],
              "sampler+heap (--heap)": [heap, sampler]}
    programs = {
        "heap_bench.cpp (allocation-heavy C++)":
            [str(build("heap_bench.cpp", "g++", "heap_bench")), str(args.cxx_n)],
        "heap_sampler.c (CPU-bound, 2007 allocations)":
            [str(build("heap_sampler.c", "gcc", "heap_sampler")), "0.5"],
    }
    for title, argv in programs.items():
        print(title)
        best: dict[str, float] = {}
        for _ in range(args.repeat):  # interleaved, so load drifts hit every setup alike
            for name, libraries in setups.items():
                t = run_once(argv, libraries)
                best[name] = min(best.get(name, t), t)
        anchor = best["unprofiled"]
        for name, t in best.items():
            print(f"  {name:24} {t * 1000:8.1f} ms  {t / anchor:5.2f}x")
        print(f"  --heap vs sampler alone: {best['sampler+heap (--heap)'] / best['sampler']:.2f}x;"
              f" vs heap alone: {best['sampler+heap (--heap)'] / best['heap']:.2f}x")


if __name__ == "__main__":
    main()
