"""Long runs and many distinct call paths: proftui end to end against perf, same run.

The target is benchmarks/programs/many_paths.c (279,936 leaf paths; a ten-minute
run at 1 kHz meets well over 100,000 of them), built -O2 -g with frame pointers
so that `perf record -g` walks its stacks too.  Every command is the one a user
types, front end included; each line gives wall time, CPU time (user+sys of the
whole process tree, from wait4) and peak memory, and the ratio to the perf anchor
measured in the same run:

  record    `proftui record -F HZ` vs `perf record -F HZ -g`: the front end's CPU
            (the tree's CPU minus what the target says it used itself), dropped
            samples, distinct call paths
  report    `proftui report` vs `perf report --stdio` on their own data
  open      the TUI on the saved profile: first screen, then key latencies (p95)
  diff      `proftui diff` of two such profiles
  live      `proftui ./many_paths` in tmux: how often the header's clock and sample
            count change, the observer's own CPU share (target excluded), and its
            peak memory against `perf report` on `perf record -g -p` of the same
            execution (perf attached to the target the TUI launched)
  import    a perf script text of >= IMPORT_MB MB through `proftui report`: memory

Goals (issue 23): no drops; record front-end CPU <= perf record -g's; report CPU <=
perf report's; report memory <= 2x perf report's; open <= 2 s, keys p95 <= 100 ms;
diff <= 2 s; live header refresh >= 1/s, observer <= 10% of a CPU; import <= 1 GB.
Issue 33: a 10-minute live run's peak memory <= perf report's for the same samples.

usage: python benchmarks/bench_scale.py [--seconds 600] [--hz 1000] [--skip live,import]
       (--skip record also skips what needs its profile: open, diff, import)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from proftui.collectors.procfs import proc_status, status_bytes  # noqa: E402

PROFTUI = str(Path(sys.executable).with_name("proftui"))
IMPORT_MB = 1024


@dataclass
class Run:
    """One command's cost: wall and CPU seconds of the process tree, peak RSS in MiB."""

    wall: float
    cpu: float
    rss_mib: float
    stderr: str = ""

    def target_cpu(self) -> float:
        """What many_paths said it used itself (0 when it did not say)."""
        found = re.findall(r"cpu_ns (\d+)", self.stderr)
        return int(found[-1]) / 1e9 if found else 0.0


def run(argv: list[str], cwd: Path, stdout: int | None = subprocess.DEVNULL) -> Run:
    """Run `argv` to the end; raise on failure.  Peak memory comes from /usr/bin/time,
    a small parent: a child forked from this process would inherit its high-water mark."""
    start = time.perf_counter()
    timed = ["/usr/bin/time", "-f", "maxrss_kib %M", *argv] if shutil.which("time") or \
        Path("/usr/bin/time").exists() else argv
    proc = subprocess.Popen(timed, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE)
    err = b""
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit status {proc.returncode}\n"
                         f"{err.decode(errors='replace')[-2000:]}")
    text = err.decode(errors="replace")
    peak = re.findall(r"maxrss_kib (\d+)", text)
    return Run(wall, usage.ru_utime + usage.ru_stime,
               (int(peak[-1]) if peak else usage.ru_maxrss) / 1024, text)


def build(work: Path) -> Path:
    out = work / "many_paths"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(out),
                    str(ROOT / "benchmarks/programs/many_paths.c")], check=True)
    return out


def line(name: str, mine: Run | float, anchor: Run | float | None, what: str = "") -> None:
    """One result line: proftui's numbers, the anchor's, and their ratios."""
    if isinstance(mine, Run):
        text = (f"{name:<34} wall {mine.wall:7.2f} s  cpu {mine.cpu:7.2f} s  "
                f"rss {mine.rss_mib:7.1f} MiB")
        if isinstance(anchor, Run):
            text += (f"   | anchor wall {anchor.wall:6.2f} cpu {anchor.cpu:6.2f} rss "
                     f"{anchor.rss_mib:6.1f}  ratios cpu {mine.cpu / max(anchor.cpu, 1e-9):.2f}"
                     f" rss {mine.rss_mib / max(anchor.rss_mib, 1e-9):.2f}")
    else:
        text = f"{name:<34} {mine:10.3f} {what}"
        if isinstance(anchor, float):
            text += f"   | anchor {anchor:.3f}  ratio {mine / max(anchor, 1e-9):.2f}"
    print(text, flush=True)


def perf_usable() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "true"],
                           capture_output=True)
    return probe.returncode == 0


def calibrate(work: Path, prog: Path, seconds: float) -> list[str]:
    """many_paths' arguments for a fixed amount of work that takes about `seconds` alone
    (work, not time: the profiled runs then do the same, and their extra CPU shows)."""
    probe = subprocess.run([str(prog), "3"], cwd=work, capture_output=True, text=True,
                           check=True)
    rate = int(probe.stdout.split()[0]) / 3.0
    return ["-r", str(max(1, int(rate * seconds)))]


def record_and_report(work: Path, prog: Path, seconds: float, hz: int) -> tuple[Path, Path]:
    work_args = calibrate(work, prog, seconds)
    plain = run([str(prog), *work_args], work)
    line("plain run", plain, None)
    has_perf = perf_usable()
    perf_front: float | None = None
    perf_record: Run | None = None
    if has_perf:
        perf_record = run(["perf", "record", "-q", "-F", str(hz), "-g", "-o", "perf.data",
                           str(prog), *work_args], work)
        perf_front = perf_record.cpu - perf_record.target_cpu()
        line("perf record -g", perf_record, plain)
    else:
        print("perf is not usable here: perf anchors skipped", flush=True)
    mine = run([PROFTUI, "record", "-F", str(hz), "-o", "a.proftui", str(prog), *work_args],
               work)
    front = mine.cpu - mine.target_cpu()
    line("proftui record", mine, perf_record)
    line("  front-end CPU, s", front, perf_front,
         "(tree CPU minus the target's own; anchor: perf's process)")
    perf_extra = perf_record.cpu - plain.cpu if perf_record else None
    line("  front-end CPU vs perf's extra, s", front, perf_extra,
         "(anchor: what perf record -g adds to the plain run, kernel sampling included)")
    line("  extra CPU over the plain run, s", mine.cpu - plain.cpu, perf_extra)
    doc = json.loads(subprocess.run([PROFTUI, "report", "--json", "a.proftui"], cwd=work,
                                    capture_output=True, check=True).stdout)
    meta = doc.get("meta", {})
    print(f"  samples dropped: {meta.get('dropped')}", flush=True)
    from proftui.collectors.model import storage

    profile = storage.load(work / "a.proftui")
    leaves = sum(1 for i in range(1, len(profile.tree))
                 if profile.tree.selfs[0][i])
    print(f"  distinct call paths with samples: {leaves:,}; tree nodes {len(profile.tree):,}; "
          f"samples {profile.total(0):,.0f}", flush=True)
    report = run([PROFTUI, "report", "a.proftui"], work)
    anchor = None
    if has_perf:
        anchor = run(["perf", "report", "--stdio", "-i", "perf.data"], work)
    line("proftui report", report, anchor)
    return work / "a.proftui", work / "perf.data"


def open_latency(saved: Path) -> None:
    """First screen and key latencies of the TUI on the saved profile (in this process)."""
    from bench_tui import measure, pct  # the keys bench_tui times on synthetic profiles
    from proftui.collectors.model import storage

    start = time.perf_counter()
    cpu0 = time.process_time()
    profile = storage.load(saved)
    loaded = time.perf_counter() - start
    times, results = asyncio.run(measure(profile, repeat=20))
    first = times.pop("_first_screen_s", [float("nan")])[0]
    print(f"open: load {loaded:.2f} s, first screen {first:.2f} s after start "
          f"(CPU {time.process_time() - cpu0:.1f} s in all)", flush=True)
    worst = 0.0
    for name, values in sorted(times.items()):
        if name.startswith("_"):
            continue
        p95 = pct(values, 0.95)
        worst = max(worst, p95)
        print(f"  {name:<36} p50 {pct(values, 0.5):7.1f} ms  p95 {p95:7.1f} ms", flush=True)
    for name, values in sorted(results.items()):
        print(f"  {name:<36} p50 {pct(values, 0.5):7.1f} ms (worker, not a key's latency)",
              flush=True)
    print(f"  worst key p95: {worst:.1f} ms (goal <= 100)", flush=True)


def diff(work: Path, prog: Path, seconds: float, hz: int, saved: Path) -> None:
    run([PROFTUI, "record", "-F", str(hz), "-o", "b.proftui", str(prog), *calibrate(
        work, prog, seconds)], work)
    mine = run([PROFTUI, "diff", str(saved), "b.proftui"], work)
    line("proftui diff", mine, None)
    print(f"  diff wall {mine.wall:.2f} s, CPU {mine.cpu:.2f} s (goal <= 2 s)", flush=True)


def live(work: Path, prog: Path, seconds: float, hz: int) -> None:
    """The TUI on a running target in tmux: header refreshes and observer CPU."""
    if shutil.which("tmux") is None:
        print("tmux is not installed: live skipped", flush=True)
        return
    session = f"bench-scale-{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "45",
                    f"{PROFTUI} -F {hz} {prog} {seconds}; sleep 1000"], cwd=work, check=True)
    try:
        front = None
        deadline = time.monotonic() + 20
        while front is None and time.monotonic() < deadline:
            for p in psutil.process_iter(["cmdline"]):
                cmd = p.info["cmdline"] or []
                if len(cmd) > 1 and cmd[1].endswith("proftui") and str(prog) in cmd:
                    front = p
            time.sleep(0.2)
        if front is None:
            print("live: proftui did not start", flush=True)
            return
        target = None
        while target is None and time.monotonic() < deadline + 20:
            # The TUI launches the target after its first screen: look until it has.
            target = next((c for c in front.children(recursive=True)
                           if str(prog) in (c.cmdline() or [""])[0]), None)
            time.sleep(0.1)
        if target is None:
            print("live: the target did not start under the TUI", flush=True)
        perf = None
        if target is not None and perf_usable():
            perf = subprocess.Popen(["perf", "record", "-q", "-g", "-F", str(hz), "-p",
                                     str(target.pid), "-o", "live.perf.data"], cwd=work,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        headers: list[tuple[float, str]] = []
        cpu0 = sum(front.cpu_times()[:2])
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            shot = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                  capture_output=True, text=True).stdout
            headers.append((time.monotonic() - t0, shot.split("\n", 1)[0]))
            time.sleep(0.25)
        used = sum(front.cpu_times()[:2]) - cpu0
        elapsed = time.monotonic() - t0
        stale = longest = 0.0
        last_change = 0.0
        for (t, text), (_t, before) in zip(headers[1:], headers, strict=False):
            if text != before:
                longest = max(longest, t - last_change)
                last_change = t
        stale = max(longest, elapsed - last_change)
        print(f"live: header unchanged at most {stale:.2f} s (goal <= 1 s); observer "
              f"{100 * used / elapsed:.1f}% of a CPU (goal <= 10%)", flush=True)
        live_memory(work, front, perf)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def live_memory(work: Path, front: psutil.Process, perf: subprocess.Popen | None) -> None:
    """The live TUI's peak memory (VmHWM), against perf report on perf's recording of
    the same execution."""
    peak = (status_bytes(proc_status(front.pid), "VmHWM") or 0) / (1 << 20)
    if perf is None:
        why = "perf cannot record here" if not perf_usable() else "no target found"
        print(f"live: peak memory {peak:.1f} MiB (perf anchor skipped: {why})", flush=True)
        return
    perf.send_signal(signal.SIGINT)
    perf.wait(timeout=120)
    with open(work / "live.report", "w") as out:
        anchor = run(["perf", "report", "--stdio", "-i", "live.perf.data"], work,
                     stdout=out.fileno())
    found = re.search(r"# Samples: (\S+)", (work / "live.report").read_text(errors="replace"))
    samples = f" ({found[1]} samples)" if found else ""
    print(f"live: peak memory {peak:.1f} MiB; perf report of the same execution"
          f"{samples} {anchor.rss_mib:.1f} MiB: ratio {peak / max(anchor.rss_mib, 1e-9):.2f} "
          f"(goal <= 1)", flush=True)


def perf_import(work: Path, perf_data: Path) -> None:
    if not perf_data.exists():
        print("no perf.data: import skipped", flush=True)
        return
    text = work / "perf.txt"
    with open(text, "wb") as out:
        subprocess.run(["perf", "script", "-i", str(perf_data)], cwd=work, stdout=out,
                       stderr=subprocess.DEVNULL, check=True)
    one = text.read_bytes()
    with open(text, "ab") as out:
        while text.stat().st_size < IMPORT_MB << 20:
            out.write(one)
    mine = run([PROFTUI, "report", str(text)], work)
    line(f"report of a {text.stat().st_size >> 20} MiB perf script", mine, None)
    print(f"  peak memory {mine.rss_mib:.0f} MiB (goal <= 1024)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--hz", type=int, default=1000)
    parser.add_argument("--skip", default="", help="comma list: open,diff,live,import")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        work = Path(tmp)
        prog = build(work)
        print(f"many_paths for {args.seconds:.0f} s at {args.hz} Hz; {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
        if "record" in skip:
            skip |= {"open", "diff", "import"}
        else:
            saved, perf_data = record_and_report(work, prog, args.seconds, args.hz)
        if "open" not in skip:
            open_latency(saved)
        if "diff" not in skip:
            diff(work, prog, args.seconds, args.hz, saved)
        if "live" not in skip:
            live(work, prog, args.seconds, args.hz)
        if "import" not in skip:
            perf_import(work, perf_data)


if __name__ == "__main__":
    main()
