"""Sampler mode cost and accuracy of rate: proftui's preloaded sampler vs gperftools and perf.

The target is tests/fixtures/smp_work.c (pure CPU work).  For each
configuration we run it to the end and report, against the anchor measured
in the same run (the program alone):
  * wall-time (and CPU-time) overhead: median over the rounds of this run / the
    anchor run of the same round - 1 (rounds interleave every configuration, so
    the load of a shared machine hits a run and its anchor alike);
  * delivered rate: samples recorded / the anchor's CPU seconds, vs requested;
  * cost per sample: extra CPU time of the target / samples (signal delivery,
    unwinding, copy, and the runtime's start-up spread over the samples);
  * the unwinding alone (benchmarks/bench_unwind.c linked with the runtime's
    sources): ns per walk of a 20-call-deep stack, fp chain vs CFI rows.
proftui is measured as the target sees it: LD_PRELOAD + PROFTUI_DIR exactly as
SamplerCollector sets them, the front end's draining (another process, read
afterwards here) excluded; unwinding by frame pointers (PROFTUI_SAMPLER_UNWIND=fp
on a -fno-omit-frame-pointer build) and by CFI tables (default).
gperftools: LD_PRELOAD of libprofiler.so.0 with CPUPROFILE (if installed);
perf: `perf record -F HZ -g` (if installed and allowed).
Goals: overhead <= 3% at 1000 Hz and <= 1% at 250 Hz; delivered >= 95% at 1000 Hz.

usage: python benchmarks/bench_sampler.py [--rounds N] [--work ROUNDS]
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.formats.importers.gperftools import parse as parse_gperftools  # noqa: E402
from proftui.collectors.runtime.libraries import runtime_library_path  # noqa: E402
from proftui.collectors.runtime.wire_sampler import SamplerFile  # noqa: E402

# A configuration: prepares (argv prefix, env) in a scratch dir; counts samples after.
Setup = Callable[[Path], tuple[list[str], dict[str, str]]]
Count = Callable[[Path], int]


@dataclass
class Config:
    name: str
    binary: str  # "fp" or "nofp"
    hz: int  # requested rate, 0 for the anchors
    setup: Setup
    count: Count
    walls: list[float]
    cpus: list[float]
    samples: list[int]


def build(flags: list[str], name: str) -> Path:
    out = ROOT / "build" / "bench" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", *flags, "-o", str(out), str(ROOT / "tests/fixtures/smp_work.c")],
                   check=True)
    return out


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one run; output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 7:  # smp_work exits 7
        raise SystemExit(f"{argv}: exit status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def plain() -> tuple[Setup, Count]:
    return (lambda d: ([], {})), (lambda d: 0)


def proftui(hz: int, unwind: str = "") -> tuple[Setup, Count]:
    library = runtime_library_path("proftui_sampler")

    def setup(d: Path) -> tuple[list[str], dict[str, str]]:
        env = {"LD_PRELOAD": library, "PROFTUI_DIR": str(d), "PROFTUI_FREQUENCY": str(hz),
               "PROFTUI_FRONTEND_PID": str(os.getpid())}
        if unwind:
            env["PROFTUI_SAMPLER_UNWIND"] = unwind
        return [], env

    def count(d: Path) -> int:
        total = 0
        for path in d.glob("sampler.*.ptw"):
            f = SamplerFile(path)
            total += sum(slot.samples for slot in f.slots())  # taken, in a ring or not
            f.close()
        return total

    return setup, count


def gperftools(library: str, hz: int) -> tuple[Setup, Count]:
    def setup(d: Path) -> tuple[list[str], dict[str, str]]:
        return [], {"LD_PRELOAD": library, "CPUPROFILE": str(d / "prof.out"),
                    "CPUPROFILE_FREQUENCY": str(hz)}

    def count(d: Path) -> int:
        _, records, _ = parse_gperftools((d / "prof.out").read_bytes())
        return sum(c for c, _ in records)

    return setup, count


def perf(hz: int) -> tuple[Setup, Count]:
    def setup(d: Path) -> tuple[list[str], dict[str, str]]:
        return ["perf", "record", "-q", "-F", str(hz), "-g", "-o", str(d / "perf.data"), "--"], {}

    def count(d: Path) -> int:
        out = subprocess.run(["perf", "script", "-i", str(d / "perf.data"), "-F", "tid"],
                             capture_output=True, text=True, check=True).stdout
        return len(out.splitlines())

    return setup, count


def find_libprofiler() -> str | None:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libprofiler.so.0 " in line and "=>" in line:
            return line.split("=>")[1].strip()
    return None


def perf_usable() -> bool:
    if shutil.which("perf") is None:
        return False
    with tempfile.TemporaryDirectory() as d:
        return subprocess.run(["perf", "record", "-q", "-o", f"{d}/t.data", "--", "true"],
                              capture_output=True).returncode == 0


def unwind_costs() -> None:
    """Time the handler's stack walk alone, on a frame-pointer and an -O2 build."""
    sources = [str(ROOT / "benchmarks/bench_unwind.c"),
               *(str(p) for p in sorted((ROOT / "csrc" / "sampler").glob("*.c"))),
               *(str(p) for p in sorted((ROOT / "csrc" / "common").glob("*.c")))]
    print(f"\n{'stack walk (20 calls deep)':50} {'frames':>8} {'ns/walk':>9}")
    signal_ns = 0.0
    for label, flag in (("-fno-omit-frame-pointer", "-fno-omit-frame-pointer"),
                        ("-O2 (no frame pointers)", "-fomit-frame-pointer")):
        out = ROOT / "build" / "bench" / f"bench_unwind{flag}"
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-g", flag, f"-I{ROOT / 'csrc/common'}",
                        f"-I{ROOT / 'csrc/sampler'}", *sources,
                        "-o", str(out), "-pthread", "-ldl"], check=True)
        result = subprocess.run([str(out), "20"], capture_output=True, text=True, check=True)
        for line in result.stdout.splitlines():
            mode, frames, ns = line.split()
            if mode == "signal":
                signal_ns = float(ns)
                continue
            kind = {"cfi": "CFI rows", "cfi-copy": "CFI rows, 4 KiB copy (attach)",
                    "leaf-cold": "1 lookup, tables flushed",
                    "leaf-warm": "1 lookup, same pcs warm"}
            name = f"{label}, {kind.get(mode, 'frame pointers')}"
            # 20 calls, capture(), main and libc's start: a short walk times less work
            # (frame pointers on the -O2 build have nothing to follow).
            short = "  (SHORT: the walk stopped early)" if int(frames) < 20 and (
                mode != "fp" or flag == "-fno-omit-frame-pointer") and (
                not mode.startswith("leaf")) else ""
            print(f"{name:50} {frames:>8} {float(ns):9.1f}{short}")
    if signal_ns:
        print(f"for scale: the kernel's delivery of one signal (empty handler) costs "
              f"{signal_ns / 1000:.1f} us of CPU here, {signal_ns / 1e4:.2f}% at 1000 Hz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--work", type=int, default=600, help="smp_work rounds (~1 ms each)")
    args = parser.parse_args()
    binaries = {"nofp": build(["-O2", "-g"], "smp_work_nofp"),
                "fp": build(["-O2", "-g", "-fno-omit-frame-pointer"], "smp_work_fp")}
    configs: list[Config] = []

    def add(name: str, binary: str, hz: int, pair: tuple[Setup, Count]) -> None:
        configs.append(Config(name, binary, hz, pair[0], pair[1], [], [], []))

    add("anchor (-O2)", "nofp", 0, plain())
    add("anchor (-O2 -fno-omit-frame-pointer)", "fp", 0, plain())
    for hz in (1000, 250):
        add(f"proftui {hz} Hz, CFI unwind", "nofp", hz, proftui(hz))
    add("proftui 1000 Hz, fp unwind (fp build)", "fp", 1000, proftui(1000, "fp"))
    libprofiler = find_libprofiler()
    if libprofiler:
        for hz in (1000, 250):
            add(f"gperftools {hz} Hz", "nofp", hz, gperftools(libprofiler, hz))
    if perf_usable():
        for hz in (1000, 250):
            add(f"perf record -F {hz} -g", "fp", hz, perf(hz))
    for _ in range(args.rounds):  # interleaved: drift hits every configuration alike
        for config in configs:
            with tempfile.TemporaryDirectory(prefix="proftui-bench-") as tmp:
                d = Path(tmp)
                os.chmod(d, 0o700)
                prefix, env = config.setup(d)
                wall, cpu = run([*prefix, str(binaries[config.binary]), str(args.work)], env)
                config.walls.append(wall)
                config.cpus.append(cpu)
                config.samples.append(config.count(d))
    anchors = {c.binary: c for c in configs if c.hz == 0}
    print(f"smp_work {args.work} rounds, {args.rounds} interleaved runs each; anchor best wall "
          f"{min(anchors['nofp'].walls):.3f} s, CPU {min(anchors['nofp'].cpus):.3f} s")
    print(f"{'configuration':42} {'wall +':>8} {'CPU +':>8} {'delivered':>10} {'of asked':>9} "
          f"{'us/sample':>10}")
    for c in configs:
        anchor = anchors[c.binary]
        overhead = statistics.median(w / a for w, a in zip(c.walls, anchor.walls, strict=True)) - 1
        cpu_overhead = statistics.median(
            u / a for u, a in zip(c.cpus, anchor.cpus, strict=True)) - 1
        if c.hz == 0:
            print(f"{c.name:42} {'-':>8} {'-':>8} {'-':>10} {'-':>9} {'-':>10}")
            continue
        samples = sorted(c.samples)[len(c.samples) // 2]
        rate = samples / min(anchor.cpus)
        extra_cpu = statistics.median(u - a for u, a in zip(c.cpus, anchor.cpus, strict=True))
        per_sample = 1e6 * extra_cpu / samples if samples else float("nan")
        print(f"{c.name:42} {100 * overhead:7.2f}% {100 * cpu_overhead:7.2f}% {rate:8.0f}/s "
              f"{100 * rate / c.hz:8.1f}% {per_sample:10.2f}")
    print("wall +/CPU +: median over rounds of run / the same round's anchor run (CPU includes "
          "perf's own work); delivered: median samples (recorded + dropped) / anchor CPU s; "
          "us/sample: median extra CPU / samples")
    unwind_costs()


if __name__ == "__main__":
    main()
