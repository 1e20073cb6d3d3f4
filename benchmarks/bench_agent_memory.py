"""A long `proftui agent --push`'s memory and CPU against `perf record -a -g` on the same
host and load.

The load: two Lua interpreters (../shared/programs/lua, built here) running
benchmarks/programs/mixed.lua, which make new distinct stacks all the time (a new leaf
address or caller chain, ~100 a second at 99 Hz).  Three samplers run side by side over
the same load for --duration seconds:

  perf     perf record -a -g -F HZ -o FILE (the anchor)
  forgets  proftui agent -F HZ --push URL --every 10 --max-stacks N (to a
           clickhouse-server started here)
  keeps    the same with --max-stacks 4000000: every stack kept (what the agent did
           before it could forget)

With --dwarf a fourth runs beside them:

  dwarf    perf record -a --call-graph dwarf -F HZ -o FILE (8 KiB of user stack per
           sample, as the agent copies, unwound later by perf report)

With --report, after the run, `perf report` reads each perf file (what perf needs to
show a symbolized profile, which the agents have already pushed) and its CPU is
printed as milliseconds per second of the run, beside the recording's own.

Both agents filter --program for the Lua interpreter (the other agent, perf and the
server are sampled but not symbolized or pushed).  Every 10 s the resident memory and the
CPU time of each sampler's process tree (proftui and its helper; perf) are read; printed:
the table over time, each one's growth over the second half (MiB a minute), its last
size against perf's, and its CPU a second over the second half (the steady cost a host
pays) against perf's.  Goals: the forgetting agent's memory flat (no growth over the
second half beyond noise), where the keeping one grows without bound; its CPU at most
perf's (issue 36).

usage: python benchmarks/bench_agent_memory.py [--duration S] [--max-stacks N] [--rate HZ]
                                              [--dwarf] [--report]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_fleet import build_lua  # the same Lua build (benchmarks/ is on sys.path)

from tests.helpers.clickhouse import running_servers, server_binary

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "programs" / "mixed.lua"
EVERY_S = 10.0


def tree_pids(pid: int) -> list[int]:
    """`pid` and its children (one level: proftui's helper)."""
    pids = [pid]
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids.extend(int(c) for c in f.read().split())
    return pids


def tree_rss_mib(pid: int) -> float:
    """Resident memory of `pid` and its children."""
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and its children so far, to the nanosecond (schedstat: perf's
    ~0.2 ms a second is below /proc/PID/stat's 10 ms ticks), summed over their threads."""
    total = 0
    for p in tree_pids(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError, IndexError, ValueError), \
                        open(f"/proc/{p}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
    return total / 1e9


def ms_a_second(cpu: list[tuple[float, float]]) -> float:
    """CPU ms a second from the first to the last of `cpu` ((seconds, CPU seconds so far))."""
    if len(cpu) < 2 or cpu[-1][0] <= cpu[0][0]:
        return 0.0
    return 1000.0 * (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0])


def growth(rows: list[tuple[float, float]]) -> float:
    """MiB a minute over the second half of `rows` ((seconds, MiB)), by least squares."""
    half = rows[len(rows) // 2:]
    if len(half) < 2:
        return 0.0
    times, sizes = zip(*half, strict=True)
    return 60.0 * statistics.linear_regression(times, sizes).slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--max-stacks", type=int, default=5000)
    parser.add_argument("--rate", type=int, default=99)
    parser.add_argument("--dwarf", action="store_true",
                        help="also perf record --call-graph dwarf")
    parser.add_argument("--report", action="store_true",
                        help="then time perf report over each perf file")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed: no anchor")
        return 1
    if server_binary() is None:
        print("clickhouse-server is not installed (apt-get install clickhouse-server)")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-agent-mem-") as name, \
            running_servers(1) as servers:
        work = Path(name)
        lua = build_lua(work)
        url = servers[0].url("bench_agent_memory")
        loads = [subprocess.Popen([str(lua), str(SCRIPT), "1000000"], stdout=subprocess.DEVNULL)
                 for _ in range(2)]
        agent = [sys.executable, "-m", "proftui.tui.cli", "agent", "-F", str(args.rate),
                 "--push", url, "--every", f"{EVERY_S:g}", "--program", lua.name]
        samplers = {
            "perf": ["perf", "record", "-q", "-a", "-g", "-F", str(args.rate), "-o",
                     str(work / "perf.data")],
            "forgets": [*agent, "--max-stacks", str(args.max_stacks)],
            "keeps": [*agent, "--max-stacks", "4000000"],
        }
        if args.dwarf:
            samplers["dwarf"] = ["perf", "record", "-q", "-a", "--call-graph", "dwarf", "-F",
                                 str(args.rate), "-o", str(work / "dwarf.data")]
        procs = {k: subprocess.Popen(v, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
                 for k, v in samplers.items()}
        rows: dict[str, list[tuple[float, float]]] = {k: [] for k in samplers}
        cpu: dict[str, list[tuple[float, float]]] = {k: [] for k in samplers}
        began = time.monotonic()
        errors = {}
        try:
            print(f"{'s':>5} " + " ".join(f"{k:>9}" for k in samplers) +
                  "   (MiB resident; CPU ms a second since the last line)")
            while (elapsed := time.monotonic() - began) < args.duration:
                time.sleep(min(EVERY_S, args.duration - elapsed))
                at = time.monotonic() - began
                for k, p in procs.items():
                    rows[k].append((at, tree_rss_mib(p.pid)))
                    cpu[k].append((at, tree_cpu_s(p.pid)))
                print(f"{at:>5.0f} " + " ".join(f"{rows[k][-1][1]:>9.1f}" for k in samplers)
                      + "   " + " ".join(f"{ms_a_second(cpu[k][-2:]):>7.2f}" for k in samplers),
                      flush=True)
        finally:
            for p in procs.values():
                os.killpg(p.pid, signal.SIGTERM)
            for k, p in procs.items():
                try:
                    errors[k] = p.communicate(timeout=120)[1]
                except subprocess.TimeoutExpired:
                    p.kill()
                    errors[k] = p.communicate()[1]
            for load in loads:
                load.kill()
                load.wait()
        forgot = [line for line in errors["forgets"].splitlines() if "forgot" in line]
        print(f"{args.rate} Hz, {args.duration:g} s, 2 x lua mixed.lua, {os.cpu_count()} CPUs; "
              f"--max-stacks {args.max_stacks}: {forgot[0] if forgot else 'never forgot'}")
        perf_last = rows["perf"][-1][1]
        perf_ms = ms_a_second(cpu["perf"][len(cpu["perf"]) // 2:])
        for k in samplers:
            last = rows[k][-1][1]
            ms = ms_a_second(cpu[k][len(cpu[k]) // 2:])
            print(f"{k:>8}: last {last:7.1f} MiB ({last / perf_last:5.1f}x perf's), "
                  f"growth over the second half {growth(rows[k]):+6.2f} MiB/min; CPU over "
                  f"the second half {ms:5.2f} ms/s ({ms / max(perf_ms, 1e-9):5.1f}x perf's)")
        if args.report:
            for k in ("perf", "dwarf"):
                if k in samplers:
                    report_s = perf_report_cpu_s(work / f"{k}.data")
                    if report_s is None:
                        print(f"{k:>8}: perf report failed: no figure")
                        continue
                    report_ms = report_s * 1000 / args.duration
                    whole = ms_a_second(cpu[k]) + report_ms
                    print(f"{k:>8}: perf report {report_ms:7.2f} ms per second of the run; "
                          f"with the recording {whole:7.2f} ms/s")
    return 0


def perf_report_cpu_s(data: Path) -> float | None:
    """CPU seconds `perf report --stdio` spends on `data` (its children included); None
    when it fails."""
    before = os.times()
    done = subprocess.run(["perf", "report", "-q", "--stdio", "-i", str(data)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600,
                          check=False)
    after = os.times()
    if done.returncode != 0:
        return None
    return (after.children_user + after.children_system
            - before.children_user - before.children_system)


if __name__ == "__main__":
    sys.exit(main())
