"""Symbols on big binaries: proftui's detection and exit-to-profile time vs perf report.

    python benchmarks/bench_symbols.py [--rounds 3] [--seconds 0.8] [--functions 3000]

Targets: python3.11d (Debian's python3.11-dbg, 24 MB with DWARF; skipped
with the reason when missing) running a --seconds script, and a generated C
program of many compile units with inlined helpers (-O2 -g) spinning
through its functions for --seconds.  For each, in one run:
  * detection: `inspect_binary` (mode, static, stripped), median of 5;
  * exit-to-profile: `proftui record --mode sampler -o X TARGET`, from the
    target's last line of work (it prints the time) to proftui's exit with
    the profile saved; cold = empty symbol cache dir, warm = the cache that
    the cold run left; median over --rounds;
  * perf: `perf record -F 1000 -g` of the same workload, then the time of
    `perf report --stdio` and of `perf report --stdio -s sym,srcline` (the
    anchor; skipped with the reason when perf is missing or not allowed);
  * the sampled leaf addresses: `addr2line -f -i -C` (one process) and
    proftui's Symbolizer (frames + lines, cold and warm) on the same set.
Goals: detection <= 50 ms; exit-to-profile cold <= perf report with
srclines; warm at least 5x faster than it.  Times are wall-clock on a
possibly shared machine: compare the ratios, which use the same run's anchor.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.detect import inspect_binary  # noqa: E402
from proftui.collectors.model.storage import load  # noqa: E402
from proftui.collectors.symbols.symbolizer import Symbolizer  # noqa: E402

UNITS = 30
END_MARK = "proftui-bench-end"
PROFTUI = [sys.executable, "-m", "proftui.tui.cli"]
PYTHON_DBG = Path("/usr/bin/python3.11d")
PY_SCRIPT = f"""
import json, sys, time
start = time.perf_counter()
data = [{{"k": i, "v": str(i) * 3}} for i in range(2000)]
def spin(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
while time.perf_counter() - start < {{seconds}}:
    spin(20000)
    json.loads(json.dumps(data))
    sorted(data, key=lambda d: d["v"])
sys.stderr.write(f"{END_MARK} {{time.time():.6f}}\\n")
"""


def generate(directory: Path, functions: int) -> Path:
    """A C program of UNITS compile units; it calls every function until argv[1] s pass."""
    per_unit = max(1, functions // UNITS)
    sources, names = [], []
    for unit in range(UNITS):
        lines = ["#include <stdint.h>",
                 f"static inline uint64_t mix{unit}(uint64_t x) {{",
                 "    x ^= x >> 13;", "    x *= 0x9E3779B97F4A7C15ull;", "    return x ^ (x >> 7);",
                 "}"]
        for i in range(per_unit):
            lines += [f"__attribute__((noinline)) uint64_t f{unit}_{i}(uint64_t v) {{",
                      "    uint64_t s = v;",
                      f"    for (int k = 0; k < {3 + i % 5}; k++)",
                      f"        s += mix{unit}(s + k);",
                      "    return s;", "}"]
            names.append(f"f{unit}_{i}")
        path = directory / f"unit{unit}.c"
        path.write_text("\n".join(lines) + "\n")
        sources.append(path)
    main = directory / "main.c"
    main.write_text("\n".join([
        "#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>",
        *[f"uint64_t {n}(uint64_t);" for n in names],
        f"static uint64_t (*const table[])(uint64_t) = {{{', '.join(names)}}};",
        "static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t);",
        "    return t.tv_sec + t.tv_nsec / 1e9; }",
        "int main(int argc, char **argv) {",
        "    double until = now(CLOCK_MONOTONIC) + (argc > 1 ? atof(argv[1]) : 0.8);",
        "    uint64_t s = 1;",
        "    while (now(CLOCK_MONOTONIC) < until)",
        "        for (size_t i = 0; i < sizeof table / sizeof *table; i++) s = table[i](s);",
        f'    fprintf(stderr, "{END_MARK} %.6f\\n", now(CLOCK_REALTIME));',
        "    return (int)(s & 1) * 0;", "}", ""]))
    binary = directory / "big"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(binary), str(main), *map(str, sources)],
                   check=True)
    return binary


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def exit_to_profile(argv: list[str], output: Path, cache: Path) -> float:
    """Seconds from the target's end mark to `proftui record` exiting with the profile saved."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    done = subprocess.run([*PROFTUI, "record", "-o", str(output), "--mode", "sampler", *argv],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    finished = time.time()
    marks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith(END_MARK)]
    if done.returncode != 0 or not marks or not output.is_file():
        sys.exit(f"proftui record failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return finished - float(marks[-1])


def perf_times(argv: list[str], work: Path) -> tuple[float, float] | str:
    """(perf report, perf report -s sym,srcline) seconds, or why perf cannot run."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    data = work / "perf.data"
    done = subprocess.run(["perf", "record", "-F", "1000", "-g", "-o", str(data), "--", *argv],
                          capture_output=True, text=True)
    if done.returncode != 0 or not data.is_file():
        return f"perf record failed: {done.stderr.strip().splitlines()[-1:]}"

    def report(*extra: str) -> None:
        subprocess.run(["perf", "report", "-i", str(data), "--stdio", *extra],
                       capture_output=True, check=True)

    return timed(report), timed(lambda: report("-s", "sym,srcline"))


def symbolize(binary: Path, addresses: list[int], cache: Path) -> float:
    def run() -> None:
        symbolizer = Symbolizer(cache_dir=cache)
        for address in addresses:
            symbolizer.frames(str(binary), address)
            symbolizer.location(str(binary), address)
        symbolizer.flush()
    return timed(run)


def bench(name: str, binary: Path, argv: list[str], rounds: int, work: Path) -> None:
    print(f"\n== {name}: {binary} ({binary.stat().st_size / 1e6:.1f} MB)")
    detect = statistics.median(timed(lambda: inspect_binary(binary)) for _ in range(5))
    colds, warms = [], []
    output = work / f"{name}.proftui"
    for r in range(rounds):
        cache = work / f"cache-{name}-{r}"
        colds.append(exit_to_profile(argv, output, cache))
        warms.append(exit_to_profile(argv, output, cache))
    cold, warm = statistics.median(colds), statistics.median(warms)
    profile = load(output)
    addresses = sorted({a for (module, a) in profile.address_costs if module == str(binary)})
    perf = perf_times(argv, work)
    a2l = timed(lambda: subprocess.run(["addr2line", "-f", "-i", "-C", "-e", str(binary),
                                        *map(hex, addresses)], capture_output=True, check=True))
    sym_cold = symbolize(binary, addresses, work / f"sym-{name}")
    sym_warm = symbolize(binary, addresses, work / f"sym-{name}")
    anchor = perf[1] if isinstance(perf, tuple) else None

    def row(what: str, seconds: float, goal: str = "") -> None:
        ratio = f"{seconds / anchor:10.3f}x" if anchor else f"{'-':>11}"
        print(f"  {what:<44}{seconds:9.3f}{ratio}  {goal}")

    print(f"  {'what':<44}{'seconds':>9}  {'vs perf srcline'}")
    row("proftui detection (inspect_binary)", detect, f"{detect * 1e3:.2f} ms: " + (
        "ok (<= 50 ms)" if detect <= 0.05 else "MISSED (goal <= 50 ms)"))
    row(f"proftui exit-to-profile, cold (median/{rounds})", cold,
        "" if not anchor else "ok (<= perf)" if cold <= anchor else "MISSED (goal <= perf)")
    row(f"proftui exit-to-profile, warm (median/{rounds})", warm,
        "" if not anchor else "ok (>= 5x faster)" if warm * 5 <= anchor
        else "MISSED (goal 5x faster)")
    if isinstance(perf, tuple):
        row("perf report --stdio", perf[0])
        row("perf report --stdio -s sym,srcline (anchor)", perf[1])
    else:
        print(f"  perf skipped: {perf}")
    row(f"addr2line -f -i -C, {len(addresses)} sampled addresses", a2l)
    row("proftui Symbolizer, same addresses, cold", sym_cold)
    row("proftui Symbolizer, same addresses, warm", sym_warm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.8)
    parser.add_argument("--functions", type=int, default=3000)
    args = parser.parse_args()
    for tool in ("gcc", "addr2line"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed")
    with tempfile.TemporaryDirectory(prefix="proftui-bench-") as tmp:
        work = Path(tmp)
        if PYTHON_DBG.is_file():
            script = PY_SCRIPT.replace("{seconds}", str(args.seconds))
            bench("python3.11d", PYTHON_DBG, [str(PYTHON_DBG), "-c", script], args.rounds, work)
        else:
            print(f"\n== python3.11d skipped: {PYTHON_DBG} missing "
                  "(apt-get install python3.11-dbg, or ./install.sh --test)")
        binary = generate(work, args.functions)
        bench("generated", binary, [str(binary), str(args.seconds)], args.rounds, work)


if __name__ == "__main__":
    main()
