"""Deep distinct stacks end to end: proftui record + report against perf on the same program.

The target is benchmarks/programs/deep_paths.c: a recursion DEPTH levels deep (one
frame a level at -O2: `step` reaches the next level by a tail call) that picks one of
four functions at each level, so nearly every
sample is a call path never seen before; built -O2 -g with frame pointers so that
`perf record -g` walks it too (both keep the innermost ~128 frames).  Every command
is what a user types; each line gives wall time, CPU time (user+sys of the process
tree, from wait4) and peak memory.  "extra" CPU is the tree's CPU minus the target's
own (a plain run's), so it is what profiling cost:

  record    `proftui record -F HZ` vs `perf record -F HZ -g`
  report    `proftui report` vs `perf report --stdio`, each on its own data
  json      `proftui report --json` (issue 32: it never ended on such profiles)
  start-up  `proftui record ./true` and `proftui report` of its profile, CPU median of
            --runs runs interleaved with `perf record`/`perf report` of the same

Goals (issue 33): record + report extra CPU <= perf record -g + perf report's;
record peak memory <= 4x perf record's (floor 100 MB); report --json < 10 s;
record and report start-up <= 0.1 s CPU.

Python modules are byte-compiled first (PYTHONDONTWRITEBYTECODE would otherwise make
every run compile them again, which no installed proftui does).

usage: python benchmarks/bench_deep.py [--seconds 1.5] [--hz 10000] [--depth 500]
                                       [--no-json] [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import PROFTUI, Run, run  # noqa: E402  (one runner for both benchmarks)


def build(work: Path) -> Path:
    out = work / "deep_paths"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(out),
                    str(ROOT / "benchmarks/programs/deep_paths.c")], check=True)
    return out


def startup(work: Path, runs: int) -> None:
    """CPU of the commands' fixed cost: nothing to profile, a tiny profile to report."""
    true = work / "true"
    subprocess.run(["gcc", "-O2", "-o", str(true), "-x", "c", "-"], check=True,
                   input=b"int main(void) { return 0; }\n")
    commands = {
        "proftui record ./true": [PROFTUI, "record", "-o", str(work / "t.proftui"), str(true)],
        "proftui report (tiny)": [PROFTUI, "report", str(work / "t.proftui")],
        "perf record ./true": ["perf", "record", "-q", "-o", str(work / "t.data"), str(true)],
        "perf report (tiny)": ["perf", "report", "--stdio", "-i", str(work / "t.data")],
    }
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved: a machine's load weighs on both alike
        for name, argv in commands.items():
            cpu[name].append(run(argv, work).cpu)
    median = {name: statistics.median(values) for name, values in cpu.items()}
    for name, value in median.items():
        print(f"{name:<28} cpu {value:6.3f} s (median of {runs})", flush=True)
    for mine, theirs in (("proftui record ./true", "perf record ./true"),
                         ("proftui report (tiny)", "perf report (tiny)")):
        print(f"start-up {mine.split()[1]}: {median[mine]:.3f} s, {median[theirs]:.3f} s for "
              f"perf {theirs.split()[1]} (goal <= 0.1 s: "
              f"{'ok' if median[mine] <= 0.1 else 'over'})")


def show(name: str, mine: Run, extra: float | None = None) -> None:
    text = f"{name:<28} wall {mine.wall:7.2f} s  cpu {mine.cpu:7.2f} s  rss {mine.rss_mib:7.1f} MiB"
    if extra is not None:
        text += f"  extra cpu {extra:6.2f} s"
    print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="target CPU seconds")
    parser.add_argument("--hz", type=int, default=10000)
    parser.add_argument("--depth", type=int, default=500, help="levels (a frame each)")
    parser.add_argument("--no-json", action="store_true", help="skip `report --json`")
    parser.add_argument("--runs", type=int, default=15, help="start-up runs (0: none)")
    args = parser.parse_args()
    for package in ("collectors", "tui"):
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-deep-") as tmp:
        work = Path(tmp)
        binary = build(work)
        argv = [str(binary), str(args.seconds), str(args.depth)]
        plain = run(argv, work)
        show("plain run", plain)
        perf_rec = run(["perf", "record", "-q", "-g", "-F", str(args.hz), "-o",
                        str(work / "perf.data"), "--", *argv], work)
        show("perf record -g", perf_rec, perf_rec.cpu - plain.cpu)
        perf_rep = run(["perf", "report", "--stdio", "-i", str(work / "perf.data")], work)
        show("perf report --stdio", perf_rep, perf_rep.cpu)
        rec = run([PROFTUI, "record", "-F", str(args.hz), "-o", str(work / "run.proftui"),
                   *argv], work)
        show("proftui record", rec, rec.cpu - plain.cpu)
        rep = run([PROFTUI, "report", str(work / "run.proftui")], work)
        show("proftui report", rep, rep.cpu)
        js = None
        if not args.no_json:
            js = run([PROFTUI, "report", "--json", str(work / "run.proftui")], work)
            show("proftui report --json", js, js.cpu)
        size = (work / "run.proftui").stat().st_size
        ours = rec.cpu - plain.cpu + rep.cpu
        theirs = perf_rec.cpu - plain.cpu + perf_rep.cpu
        print(f"\nprofile {size / 1e6:.1f} MB; record+report extra CPU: proftui {ours:.2f} s, "
              f"perf {theirs:.2f} s, ratio {ours / max(theirs, 1e-9):.2f}x (goal <= 1)")
        floor = max(100.0, 4 * perf_rec.rss_mib)
        print(f"record peak memory: proftui {rec.rss_mib:.0f} MiB, perf {perf_rec.rss_mib:.0f} "
              f"MiB, ratio {rec.rss_mib / max(perf_rec.rss_mib, 1e-9):.2f}x "
              f"(goal <= 4x, floor 100 MB: {'ok' if rec.rss_mib <= floor else 'over'})")
        if js is not None:
            print(f"report --json: {js.wall:.2f} s wall, {js.cpu:.2f} s CPU (goal < 10 s)")
        if args.runs > 0:
            print()
            startup(work, args.runs)


if __name__ == "__main__":
    main()
