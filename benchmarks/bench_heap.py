"""Heap mode cost: proftui's preloaded heap profiler vs heaptrack and gperftools.

Targets: Lua 5.5 (../shared/programs/lua, -O2 -g, no frame pointers) running
tests/fixtures/heap_alloc.lua (tables and strings built and discarded: millions
of allocations), and tests/fixtures/heap_bench.cpp (strings, vectors, map nodes).
For each configuration we run the target to the end and report, against the
anchor measured in the same run (the program alone, plain glibc malloc):
  * slowdown: median over the rounds of (wall time / the anchor's of that round);
    rounds interleave every configuration so a loaded machine hits them alike;
    CPU time (user + sys of the whole process tree: heaptrack's interpreter too)
    as a second ratio;
  * peak memory: the largest max RSS of a process of the run (wait4), MiB;
  * agreement: the top-10 allocation call paths by calls of proftui exact vs
    heaptrack's (heaptrack_print -F), and their counts.
proftui is measured end to end as a user runs it (`proftui record --mode heap -o
FILE prog`: the front end, its start-up, its reading and the saved profile), and as
the target sees it (LD_PRELOAD + PROFTUI_DIR as HeapCollector sets them; the front
end's reading excluded): exact, and sampled at 512 KiB.
heaptrack: `heaptrack -o DIR prog` (recording only), and end to end with
`heaptrack_print` of its data (what a user runs to read it).
gperftools: LD_PRELOAD of libtcmalloc.so with HEAPPROFILE (tcmalloc itself is a
faster allocator than glibc's, so "tcmalloc alone" is shown too).
Goals: exact at most half of heaptrack's slowdown; sampled <= 5% slowdown; end to
end, `proftui record` at most 0.4x the CPU of heaptrack plus heaptrack_print (issue 33;
a 0.2 s and a 2 s program: --lua-n 1800000 --cxx-n 4000000 for the long ones).

usage: python benchmarks/bench_heap.py [--rounds N] [--lua-n N] [--cxx-n N] [--skip NAME]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.runtime.libraries import runtime_library_path  # noqa: E402

LUA_SOURCE = ROOT.parent / "shared" / "programs" / "lua"
BUILD = ROOT / "build" / "bench-heap"
TCMALLOC = [Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"),
            Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so")]

# (argv prefix, env) for a run in a scratch directory.
Setup = Callable[[Path], tuple[list[str], dict[str, str]]]


@dataclass
class Config:
    name: str
    setup: Setup
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)


def build(target: str) -> list[str] | None:
    """The target's argv (without its size argument), compiled once into build/bench-heap."""
    BUILD.mkdir(parents=True, exist_ok=True)
    if target == "lua":
        onelua = LUA_SOURCE / "onelua.c"
        if not onelua.is_file():
            print(f"skip lua: no source at {LUA_SOURCE}")
            return None
        out = BUILD / "lua"
        if not out.exists():
            subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", "-o", str(out), str(onelua),
                            "-lm", "-ldl"], check=True)
        return [str(out), str(ROOT / "tests" / "fixtures" / "heap_alloc.lua")]
    out = BUILD / "heap_bench"
    if not out.exists():
        if shutil.which("g++") is None:
            print("skip c++: g++ is not installed")
            return None
        subprocess.run(["g++", "-O2", "-g", "-o", str(out),
                        str(ROOT / "tests" / "fixtures" / "heap_bench.cpp")], check=True)
    return [str(out)]


def configs() -> list[Config]:
    library = runtime_library_path("proftui_heap")
    out = [Config("plain", lambda d: ([], {}))]

    def proftui(sample: int | None) -> Setup:
        def setup(d: Path) -> tuple[list[str], dict[str, str]]:
            env = {"LD_PRELOAD": library, "PROFTUI_DIR": str(d),
                   "PROFTUI_FRONTEND_PID": str(os.getpid())}
            if sample:
                env["PROFTUI_HEAP_SAMPLE"] = str(sample)
            return [], env
        return setup

    out.append(Config("proftui record (e2e)", lambda d: (
        [sys.executable, "-m", "proftui.tui.cli", "record", "--mode", "heap", "-o",
         str(d / "run.proftui"), "--"], {})))
    out.append(Config("proftui exact", proftui(None)))
    out.append(Config("proftui sampled 512K", proftui(512 << 10)))
    if shutil.which("heaptrack"):
        out.append(Config("heaptrack", lambda d: (["heaptrack", "-o", str(d / "ht")], {})))
        if shutil.which("heaptrack_print"):
            # one shell, so wait4 counts both tools (and heaptrack's own children)
            out.append(Config("heaptrack + print (e2e)", lambda d: (
                ["sh", "-c", 'heaptrack -o "$0/ht" "$@" && heaptrack_print -f "$0"/ht.* '
                 '> /dev/null', str(d)], {})))
    else:
        print("note: heaptrack is not installed")
    tcmalloc = next((p for p in TCMALLOC if p.exists()), None)
    if tcmalloc is not None:
        out.append(Config("tcmalloc alone", lambda d: ([], {"LD_PRELOAD": str(tcmalloc)})))
        out.append(Config("gperftools HEAPPROFILE", lambda d: (
            [], {"LD_PRELOAD": str(tcmalloc), "HEAPPROFILE": str(d / "prof")})))
    else:
        print("note: gperftools (libtcmalloc.so) is not installed")
    return out


def run_once(argv: list[str], config: Config) -> tuple[float, float, float]:
    """(wall s, CPU s of the process tree, largest max RSS MiB) of one run."""
    with tempfile.TemporaryDirectory(prefix="bench-heap-") as tmp:
        prefix, env = config.setup(Path(tmp))
        start = time.perf_counter()
        proc = subprocess.Popen([*prefix, *argv], env={**os.environ, **env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{config.name}: {' '.join(argv)} exited {proc.returncode}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def agreement(argv: list[str]) -> str:
    """Top-10 call paths by calls: proftui exact vs heaptrack on the same program."""
    if shutil.which("heaptrack") is None or shutil.which("heaptrack_print") is None:
        return "agreement: heaptrack not installed"
    from proftui.collectors.base import CollectorOptions
    from proftui.collectors.heap.collector import HeapCollector

    from tests.helpers.heap_records import allocation_paths

    with tempfile.TemporaryDirectory(prefix="bench-heap-") as tmp:
        subprocess.run(["heaptrack", "-o", f"{tmp}/ht", *argv], capture_output=True, check=True)
        data = next(Path(tmp).glob("ht*"))
        subprocess.run(["heaptrack_print", "-f", str(data), "-F", f"{tmp}/stacks",
                        "--flamegraph-cost-type", "allocations"], capture_output=True, check=True)
        theirs = allocation_paths(Path(f"{tmp}/stacks").read_text())
    collector = HeapCollector(argv, CollectorOptions(output="log"))
    collector.start()
    try:
        ours = allocation_paths(collector.wait())
    finally:
        collector.stop()
    # Paths with a handful of calls tie; rank only those with more than 10.
    top_theirs = [p for p, c in sorted(theirs.items(), key=lambda kv: -kv[1])[:10] if c > 10]
    top_ours = [p for p, c in sorted(ours.items(), key=lambda kv: -kv[1])[:10] if c > 10]
    same = len(set(top_ours) & set(top_theirs))
    worst = max((abs(ours.get(p, 0) - theirs[p]) / theirs[p] for p in top_theirs), default=0.0)
    return (f"agreement with heaptrack: {same} of heaptrack's top-10 call paths by calls "
            f"(those with > 10 calls: {len(top_theirs)}) are in proftui's top 10; largest "
            f"count difference among them: {100 * worst:.2f}%")


def bench(target: str, argv: list[str], rounds: int, skip: list[str]) -> None:
    todo = [c for c in configs() if not any(c.name.startswith(name) for name in skip)]
    for _ in range(rounds):
        for config in todo:
            wall, cpu, rss = run_once(argv, config)
            config.walls.append(wall)
            config.cpus.append(cpu)
            config.rss.append(rss)
    anchor = todo[0]
    print(f"\n{target}: {' '.join(Path(a).name for a in argv)}  ({rounds} rounds; anchor: "
          f"plain run, median wall {statistics.median(anchor.walls):.3f} s, CPU "
          f"{statistics.median(anchor.cpus):.3f} s, max RSS {max(anchor.rss):.1f} MiB)")
    print(f"  {'configuration':24} {'slowdown':>9} {'CPU ratio':>10} {'max RSS MiB':>12}")
    ratios: dict[str, float] = {}
    for config in todo:
        wall_ratio = statistics.median(w / a for w, a in zip(config.walls, anchor.walls,
                                                              strict=True))
        cpu_ratio = statistics.median(c / a for c, a in zip(config.cpus, anchor.cpus,
                                                             strict=True))
        ratios[config.name] = wall_ratio
        print(f"  {config.name:24} {wall_ratio:8.2f}x {cpu_ratio:9.2f}x {max(config.rss):12.1f}")
    exact, sampled = ratios["proftui exact"], ratios["proftui sampled 512K"]
    if "heaptrack + print (e2e)" in ratios:
        ours, theirs = (statistics.median(c.cpus) for c in todo
                        if c.name in ("proftui record (e2e)", "heaptrack + print (e2e)"))
        print(f"  goal record end to end <= 0.4x heaptrack + heaptrack_print (CPU): "
              f"{ours:.2f} s vs {theirs:.2f} s = {ours / theirs:.2f}x -> "
              f"{'met' if ours <= 0.4 * theirs else 'NOT met'}")
    if "heaptrack" in ratios:
        ht = ratios["heaptrack"]
        print(f"  goal exact <= half heaptrack's slowdown: exact {exact - 1:+.0%} vs heaptrack "
              f"{ht - 1:+.0%} -> {'met' if exact - 1 <= (ht - 1) / 2 else 'NOT met'}")
    print(f"  goal sampled <= 5% slowdown: {sampled - 1:+.1%} -> "
          f"{'met' if sampled - 1 <= 0.05 else 'NOT met'}")
    print("  " + agreement(argv))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lua-n", type=int, default=300000, help="heap_alloc.lua's N")
    parser.add_argument("--cxx-n", type=int, default=400000, help="heap_bench rounds")
    parser.add_argument("--skip", action="append", default=[], metavar="NAME",
                        help="leave out configurations whose name starts so (e.g. "
                             "'gperftools': 200x slower, minutes on a 2 s program)")
    args = parser.parse_args()
    for target, size in (("lua", args.lua_n), ("c++", args.cxx_n)):
        argv = build(target)
        if argv is not None:
            bench(target, [*argv, str(size)], args.rounds, args.skip)


if __name__ == "__main__":
    main()
