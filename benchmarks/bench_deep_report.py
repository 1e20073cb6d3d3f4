"""Reports of deep, distinct stacks: `proftui report --json` against the text report and
`perf report --stdio`, on the same program (issue 32, item 3).

The target is benchmarks/programs/deep_paths.c run LEVELS levels deep (one frame a
level at -O2, where `step` reaches the next level by a sibling call: with main, the
libc start frames and the leaf, 127-frame stacks: the sampler keeps 128 frames),
taking one of four functions at each level: nearly every
sample has a stack of its own, so the call tree has about 120 nodes per sample.  It
runs for SAMPLES / 10 kHz seconds of CPU under `proftui record -F 10000` and `perf
record -g -F 10000`; each line gives the command's wall time, CPU time (user+sys)
and peak memory (from /usr/bin/time: a child forked from this process would inherit
its high-water mark), and the output's size.  benchmarks/bench_deep.py (issue 33)
covers recording such stacks.

Goal: the JSON report in under 10 s of CPU and 100 MB of memory (it never ended
before: 900 s, 1.3 GB, 1.7 GB written).

usage: python benchmarks/bench_deep_report.py [--samples 15000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFTUI = str(Path(sys.executable).with_name("proftui"))
HZ = 10_000
LEVELS = 122  # + the leaf, main and 3 start frames: 127 frames, none cut


@dataclass
class Run:
    """One command's cost: wall and CPU seconds, peak RSS in MiB, bytes written."""

    wall: float
    cpu: float
    rss_mib: float
    out_bytes: int


def run(argv: list[str], cwd: Path) -> Run:
    """Run `argv` to the end, its output counted and dropped; raise on failure."""
    timed = ["/usr/bin/time", "-f", "maxrss_kib %M", *argv] \
        if Path("/usr/bin/time").exists() else argv
    start = time.perf_counter()
    proc = subprocess.Popen(timed, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stderr is not None
    written = 0
    while data := proc.stdout.read(1 << 20):
        written += len(data)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)}: failed\n{err[-2000:]}")
    peak = re.findall(r"maxrss_kib (\d+)", err)
    return Run(wall, usage.ru_utime + usage.ru_stime,
               (int(peak[-1]) if peak else usage.ru_maxrss) / 1024, written)


def line(name: str, mine: Run, anchor: Run | None = None) -> None:
    text = (f"{name:<30} wall {mine.wall:6.2f} s  cpu {mine.cpu:6.2f} s  "
            f"peak {mine.rss_mib:7.1f} MiB  output {mine.out_bytes / 2**20:8.1f} MiB")
    if anchor is not None:
        text += (f"   | cpu x{mine.cpu / max(anchor.cpu, 1e-9):.2f}  "
                 f"peak x{mine.rss_mib / max(anchor.rss_mib, 1e-9):.2f}")
    print(text, flush=True)


def perf_usable() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "true"],
                           capture_output=True)
    return probe.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=15_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-deep-") as tmp:
        work = Path(tmp)
        prog = work / "deep_paths"
        subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(prog),
                        str(ROOT / "benchmarks/programs/deep_paths.c")], check=True)
        target = [str(prog), f"{args.samples / HZ:g}", str(LEVELS)]
        run([PROFTUI, "record", "-F", str(HZ), "-o", "deep.proftui", *target], work)
        sys.path.insert(0, str(ROOT))
        from proftui.collectors.model import storage

        profile = storage.load(work / "deep.proftui")
        print(f"profile: {profile.total(0):,.0f} samples, {len(profile.tree):,} tree nodes, "
              f"depth {profile.tree.max_depth()}, {len(profile.meta.warnings)} notes, "
              f"{(work / 'deep.proftui').stat().st_size / 2**20:.1f} MiB on disk", flush=True)
        del profile
        text = run([PROFTUI, "report", "deep.proftui"], work)
        json_report = run([PROFTUI, "report", "--json", "deep.proftui"], work)
        line("proftui report (text)", text)
        line("proftui report --json", json_report, text)
        perf = None
        if perf_usable():
            run(["perf", "record", "-q", "-F", str(HZ), "-g", "-o", "perf.data", "--", *target],
                work)
            perf = run(["perf", "report", "--stdio", "-i", "perf.data"], work)
            line("perf report --stdio", perf)
            line("proftui report --json vs perf", json_report, perf)
        else:
            print("perf is not usable here: the perf anchor is skipped", flush=True)
        ok = json_report.cpu < 10 and json_report.rss_mib < 100
        print(f"goal (JSON < 10 s CPU, < 100 MiB): {'met' if ok else 'NOT met'} "
              f"({json_report.cpu:.1f} s, {json_report.rss_mib:.0f} MiB)", flush=True)


if __name__ == "__main__":
    main()
