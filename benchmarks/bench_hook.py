"""Nanoseconds per instrumented call: proftui's hook runtime against its anchors.

One call-heavy fixture (tests/fixtures/ins_bench.c: recursive fib, two real
calls per level) built every way, all measured in this run:

  plain          no instrumentation (the anchor: what a call costs)
  glibc no-op    -finstrument-functions with glibc's empty default hooks
  empty preload  -finstrument-functions with an LD_PRELOADed pair of empty hooks
  gprof -pg      mcount
  uftrace        `uftrace record` of the -finstrument-functions build (if installed)
  proftui        the hook runtime's default: counts, time sampled per calling context
  proftui timed  --timed (PROFTUI_TIMED=1): two fenced TSC timestamps per call
  proftui count  --count-only (PROFTUI_COUNT_ONLY=1): no clock at all

Then the same for inlined calls (tests/fixtures/ins_bench_inline.c: a loop
calling a function gcc inlines, whose hooks run in the container's frame),
proftui timed against that fixture's own uninstrumented build.

Each variant runs the same fib twice, with SMALL and LARGE repetitions; the
cost per call is the time difference divided by the call difference, so
process start, the runtime's calibration and file creation cancel out.  Best
of TRIALS runs.  Goals: timed <= 30 ns/call overhead (issue 3); the default
within 2x of gprof's overhead per call (issue 25).

Then a real program (issue 25): Lua -O2 -finstrument-functions running
tests/fixtures/lua/intern_sort.lua, CPU time under uftrace and under the hook
runtime's default against the same binary run plainly (glibc's empty hooks);
goal: proftui's overhead (slowdown - 1) at most a third of uftrace's.  The
target's own CPU time only (LD_PRELOAD, no front end), as for fib.

Then, for Lua and for the C++ fixture tests/fixtures/ins_cxx_work.cpp (templates,
inlining, many small functions), what issue 34 asks of a real program, in one run:
  hook share   the [instrumentation] row's share of proftui's samples, and perf's
               share of the runtime library (and its clock's signal trampoline) in
               the same run; goal <= 30 %
  slowdown     CPU time under proftui's hooks / CPU time of the same binary with
               glibc's empty hooks (best of TRIALS alternating runs each, the ratio:
               2.41x is 2.41)
  share diff   the largest difference, over perf's top 10 on the empty-hook binary,
               between proftui's self shares (hooks left out) and perf's (hooks left
               out the same way: tests/helpers/reference.py); goal <= 3 points
  floor        glibc's empty hooks' share of perf's samples on the empty-hook binary
               (libc's __cyg_profile_func_* and their PLT stubs): what the calls to
               any hook cost before it does anything
Medians of REAL_ROUNDS runs of each tool, alternating.  `--program "CMD ARGS"` adds a
program of your own built -O2 -g -finstrument-functions (a fetched library's benchmark),
measured the same way.
Usage: python benchmarks/bench_hook.py [fib_n] [lua_rounds] [--real-only] [--program CMD]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.runtime.libraries import runtime_library_path  # noqa: E402

from tests.conftest import LUA_SCRIPTS, build_lua  # noqa: E402
from tests.helpers import reference  # noqa: E402
from tests.helpers.uftrace import simple_name  # noqa: E402

CXX_FIXTURE = ROOT / "tests" / "fixtures" / "ins_cxx_work.cpp"
# As tests/integration/test_instrument_vs_perf.py builds it: the STL stays uninstrumented.
CXX_FLAGS = ["-O2", "-g", "-pthread", "-finstrument-functions",
             "-finstrument-functions-exclude-file-list=/usr/include"]
REAL_HZ = 4000
REAL_ROUNDS = 3
REAL_TOP = 10

FIXTURE = ROOT / "tests" / "fixtures" / "ins_bench.c"
INLINE_FIXTURE = ROOT / "tests" / "fixtures" / "ins_bench_inline.c"
# The same call structure everywhere: no tail-recursion rewrite of fib.
BASE_FLAGS = ["-O2", "-fno-optimize-sibling-calls"]
SMALL, LARGE = 1, 5
TRIALS = 7
RDTSC_FLOOR = """
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
int main(void) {
    struct timespec a, b;
    unsigned long long s = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 5000000; i++) s += __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.2f %llu\\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 5e6, s & 1);
    return 0;
}
"""
EMPTY_HOOKS = """
void __cyg_profile_func_enter(void *f, void *s) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *f, void *s) __attribute__((no_instrument_function));
void __cyg_profile_func_enter(void *f, void *s) { (void)f; (void)s; }
void __cyg_profile_func_exit(void *f, void *s) { (void)f; (void)s; }
"""


def compile_c(work: Path, name: str, flags: list[str], source: Path) -> Path:
    out = work / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(source)], check=True)
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str], fresh_dir: Path | None) -> tuple[float, int]:
    """CPU seconds (user + system) of one run and the call count the fixture prints.

    CPU time rather than wall time: the other jobs on a shared machine delay
    the target but do not add to its CPU time.
    """
    if fresh_dir is not None:
        shutil.rmtree(fresh_dir, ignore_errors=True)
        fresh_dir.mkdir(mode=0o700)
    start = _children_cpu()
    done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    elapsed = _children_cpu() - start
    calls = int(done.stdout.split()[1])
    return elapsed, calls


def per_call_ns(argv: list[str], n: int, env: dict[str, str],
                fresh_dir: Path | None = None) -> float:
    """(best LARGE - best SMALL) / calls difference, in ns."""
    best: dict[int, tuple[float, int]] = {}
    for reps in (SMALL, LARGE):
        for _ in range(TRIALS):
            elapsed, calls = run_once([*argv, str(n), str(reps)], env, fresh_dir)
            if reps not in best or elapsed < best[reps][0]:
                best[reps] = (elapsed, calls)
    (t_small, c_small), (t_large, c_large) = best[SMALL], best[LARGE]
    return max(0.0, (t_large - t_small) / (c_large - c_small) * 1e9)


def best_cpu(argv: list[str], env: dict[str, str], fresh_dir: Path | None) -> float:
    """Best CPU seconds of TRIALS runs of a command line."""
    best = float("inf")
    for _ in range(TRIALS):
        if fresh_dir is not None:
            shutil.rmtree(fresh_dir, ignore_errors=True)
            fresh_dir.mkdir(mode=0o700)
        start = _children_cpu()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        best = min(best, _children_cpu() - start)
    return best


def best_cpu_pair(argv: list[str], plain_env: dict[str, str], hooked_env: dict[str, str],
                  fresh_dir: Path) -> tuple[float, float]:
    """best_cpu of a command plainly and under the hooks, the runs alternating so a load
    that comes and goes weighs on both."""
    plain = hooked = float("inf")
    for _ in range(TRIALS):
        start = _children_cpu()
        subprocess.run(argv, env=plain_env, check=True, capture_output=True)
        plain = min(plain, _children_cpu() - start)
        shutil.rmtree(fresh_dir, ignore_errors=True)
        fresh_dir.mkdir(mode=0o700)
        start = _children_cpu()
        subprocess.run(argv, env=hooked_env, check=True, capture_output=True)
        hooked = min(hooked, _children_cpu() - start)
    return plain, hooked


def lua_slowdowns(work: Path, rounds: int, env: dict[str, str], hook: str) -> None:
    """Lua under uftrace and under proftui's default, against the plain run."""
    lua = str(build_lua(["-finstrument-functions", "-pthread"]))
    script = [lua, str(LUA_SCRIPTS / "intern_sort.lua"), str(rounds)]
    run_dir = work / "lua-run"
    base = best_cpu(script, env, None)
    proftui = best_cpu(script, {**env, "LD_PRELOAD": hook, "PROFTUI_DIR": str(run_dir)}, run_dir)
    uftrace = shutil.which("uftrace")
    print(f"\nLua intern_sort.lua {rounds} rounds, CPU seconds, best of {TRIALS}:")
    print(f"{'plain (glibc no-op hooks)':<40} {base:7.3f}")
    print(f"{'proftui (default: sampled)':<40} {proftui:7.3f}  slowdown {proftui / base:6.2f}x")
    if not uftrace:
        print("uftrace: not installed (apt-get install uftrace); no ratio")
        return
    traced = best_cpu([uftrace, "record", "--no-libcall", "-d", str(work / "lua.uftrace"),
                      *script], env, None)
    ratio = (proftui / base - 1) / (traced / base - 1)
    print(f"{'uftrace record --no-libcall':<40} {traced:7.3f}  slowdown {traced / base:6.2f}x")
    print(f"goal: proftui's overhead (slowdown - 1) <= 1/3 of uftrace's: {ratio:.2f} -> "
          f"{'met' if ratio <= 1 / 3 else 'MISSED'}")


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    names = set().union(*runs)
    return {name: statistics.median(run.get(name, 0.0) for run in runs) for name in names}


def _keyed(shares: dict[str, float], key: Callable[[str], str]) -> dict[str, float]:
    out: Counter[str] = Counter()
    for name, share in shares.items():
        out[key(name)] += share
    return dict(out)


def real_program(work: Path, title: str, argv: list[str], env: dict[str, str], hook: str,
                 key: Callable[[str], str]) -> None:
    """Hook share, slowdown against the empty-hook binary and the largest self-share
    difference from perf on that binary, for one instrumented program (argv[0])."""
    binary = Path(argv[0])
    run_dir = work / "real-run"
    hooked_env = {**env, "LD_PRELOAD": hook, "PROFTUI_DIR": str(run_dir),
                  "PROFTUI_FREQUENCY": str(REAL_HZ)}
    base, under = best_cpu_pair(argv, env, hooked_env, run_dir)
    plain_runs: list[dict[str, float]] = []
    same_runs: list[dict[str, float]] = []
    our_runs: list[dict[str, float]] = []
    ours_hook: list[float] = []
    perf_hook: list[float] = []
    floor: list[float] = []
    for i in range(REAL_ROUNDS):
        data = work / f"plain{i}.data"
        subprocess.run(["perf", "record", "-q", "-g", "-F", str(REAL_HZ), "-o", str(data), "--",
                        *argv], check=True, capture_output=True, env=env, timeout=300)
        plain_runs.append(_keyed(reference.perf_program_shares(data, binary), key))
        floor.append(reference.perf_leaf_share(  # glibc's empty hooks or their PLT stubs
            data, binary.name[:15], lambda symbol, _: symbol.startswith("__cyg_profile_func_")))
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(mode=0o700)
        data = work / f"hooked{i}.data"
        subprocess.run(["perf", "record", "-q", "-g", "-F", str(REAL_HZ), "-o", str(data), "--",
                        *argv], check=True, capture_output=True, env=hooked_env, timeout=300)
        same_runs.append(_keyed(reference.perf_program_shares(data, binary, hook), key))
        perf_hook.append(reference.perf_runtime_share(data, binary.name[:15], hook))
        profile = reference.hook_file_profile(run_dir)
        ours_hook.append(reference.proftui_symbol_shares(profile).get(reference.HOOK_ROW, 0.0))
        our_runs.append(_keyed(reference.proftui_program_shares(profile), key))
    plain, same, ours = _medians(plain_runs), _medians(same_runs), _medians(our_runs)
    top = sorted(plain, key=plain.__getitem__, reverse=True)[:REAL_TOP]
    print(f"\n{title}: medians of {REAL_ROUNDS} runs at {REAL_HZ} Hz, hooks left out of "
          "every share")
    print(f"{'function':<40} {'perf, empty hooks':>17} {'perf, proftui':>13} {'proftui':>8} "
          f"{'diff':>7}")
    worst = 0.0
    for name in top:
        diff = ours.get(name, 0.0) - plain[name]
        worst = max(worst, abs(diff))
        print(f"{name[:40]:<40} {plain[name]:17.2f} {same.get(name, 0.0):13.2f} "
              f"{ours.get(name, 0.0):8.2f} {diff:+7.2f}")
    share, perf_share = statistics.median(ours_hook), statistics.median(perf_hook)
    print(f"hook share: {share:.1f} % of proftui's samples ([instrumentation]), "
          f"{perf_share:.1f} % of perf's (the runtime library) -> "
          f"{'met' if max(share, perf_share) <= 30 else 'MISSED'} (goal <= 30 %)")
    print(f"floor: glibc's empty hooks hold {statistics.median(floor):.1f} % of perf's samples "
          "on the empty-hook binary")
    print(f"slowdown: {under:.3f} s / {base:.3f} s CPU = {under / base:.2f}x against the same "
          f"binary with glibc's empty hooks (the time added is {100 * (1 - base / under):.0f} % "
          "of the hooked run)")
    print(f"largest self-share difference over perf's top {REAL_TOP}: {worst:.2f} points -> "
          f"{'met' if worst <= 3 else 'MISSED'} (goal <= 3)")


def real_programs(lua_rounds: int, env: dict[str, str], hook: str,
                  extra: list[str] | None = None) -> None:
    """real_program for Lua (intern_sort.lua) and the C++ fixture, when perf can sample."""
    with tempfile.TemporaryDirectory(prefix="bench-hook-real-") as tmp:
        work = Path(tmp)
        if not reference.perf_allowed(work):
            print("\nperf cannot sample here: no hook share or share difference")
            return
        lua = build_lua(["-finstrument-functions", "-pthread"])
        real_program(work, f"Lua intern_sort.lua {lua_rounds} rounds",
                     [str(lua), str(LUA_SCRIPTS / "intern_sort.lua"), str(lua_rounds)],
                     env, hook, lambda name: name)
        cxx = work / "ins_cxx_work"
        subprocess.run(["g++", *CXX_FLAGS, "-o", str(cxx), str(CXX_FIXTURE)], check=True)
        real_program(work, "C++ fixture ins_cxx_work 50 rounds", [str(cxx), "50"], env, hook,
                     simple_name)
        for command in extra or []:
            argv = shlex.split(command)
            argv[0] = str(Path(argv[0]).resolve())
            real_program(work, command, argv, env, hook, simple_name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("fib_n", nargs="?", type=int, default=27, help="fib's depth (27)")
    parser.add_argument("lua_rounds", nargs="?", type=int, default=20,
                        help="intern_sort.lua rounds (20)")
    parser.add_argument("--real-only", action="store_true",
                        help="only the real programs (Lua and the C++ fixture)")
    parser.add_argument("--program", action="append", default=[], metavar="CMD",
                        help="also measure this -finstrument-functions program (repeatable)")
    options = parser.parse_args()
    real_only, n, lua_rounds = options.real_only, options.fib_n, options.lua_rounds
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROFTUI_", "LD_PRELOAD"))}
    hook = runtime_library_path("proftui_hook")
    if real_only:
        real_programs(lua_rounds, env, hook, options.program)
        return
    rows: list[tuple[str, float | None, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-hook-") as tmp:
        work = Path(tmp)
        plain = compile_c(work, "plain", BASE_FLAGS, FIXTURE)
        inst = compile_c(work, "inst", [*BASE_FLAGS, "-finstrument-functions"], FIXTURE)
        pg = compile_c(work, "pg", [*BASE_FLAGS, "-pg"], FIXTURE)
        (work / "empty.c").write_text(EMPTY_HOOKS)
        empty = work / "libempty.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(empty), str(work / "empty.c")],
                       check=True)
        run_dir = work / "run"
        gmon_dir = work / "gmon"
        gmon_dir.mkdir()

        rows.append(("plain (anchor)", per_call_ns([str(plain)], n, env), ""))
        rows.append(("-finstrument-functions, glibc no-op hooks",
                     per_call_ns([str(inst)], n, env), ""))
        rows.append(("-finstrument-functions, empty preload hooks",
                     per_call_ns([str(inst)], n, {**env, "LD_PRELOAD": str(empty)}), ""))
        rows.append(("gprof -pg", per_call_ns(
            [str(pg)], n, {**env, "GMON_OUT_PREFIX": str(gmon_dir / "gmon.out")}), ""))
        uftrace = shutil.which("uftrace")
        if uftrace:
            rows.append(("uftrace record (0.13, -finstrument-functions build)", per_call_ns(
                [uftrace, "record", "--no-libcall", "-d", str(work / "uftrace.data"),
                 str(inst)], n, env), ""))
        else:
            rows.append(("uftrace record", None, "not installed (apt-get install uftrace)"))
        proftui_env = {**env, "LD_PRELOAD": hook, "PROFTUI_DIR": str(run_dir)}
        rows.append(("proftui default (sampled)", per_call_ns([str(inst)], n, proftui_env,
                                                              run_dir), ""))
        rows.append(("proftui --timed", per_call_ns(
            [str(inst)], n, {**proftui_env, "PROFTUI_TIMED": "1"}, run_dir), ""))
        rows.append(("proftui --count-only", per_call_ns(
            [str(inst)], n, {**proftui_env, "PROFTUI_COUNT_ONLY": "1"}, run_dir), ""))
        inline_plain = compile_c(work, "inline-plain", ["-O2"], INLINE_FIXTURE)
        inline_inst = compile_c(work, "inline-inst", ["-O2", "-finstrument-functions"],
                                INLINE_FIXTURE)
        inline_anchor = per_call_ns([str(inline_plain)], n, env)
        inline_timed = per_call_ns([str(inline_inst)], n,
                                   {**proftui_env, "PROFTUI_TIMED": "1"}, run_dir)

        rdtsc_ns = None
        if os.uname().machine == "x86_64":
            (work / "rdtsc.c").write_text(RDTSC_FLOOR)
            rdtsc = compile_c(work, "rdtsc", ["-O2"], work / "rdtsc.c")
            rdtsc_ns = min(float(subprocess.run([str(rdtsc)], capture_output=True, text=True,
                                                check=True).stdout.split()[0])
                           for _ in range(3))

    anchor = rows[0][1] or 0.0
    gprof = next(r[1] for r in rows if r[0] == "gprof -pg")
    gprof_over = (gprof or 0.0) - anchor
    print(f"fib({n}), calls per repetition measured by difference of {LARGE} and {SMALL} reps, "
          f"best of {TRIALS}")
    print(f"{'variant':<52} {'ns/call':>8} {'overhead':>9} {'vs gprof':>9}")
    results: dict[str, float] = {}
    for name, value, note in rows:
        if value is None:
            print(f"{name:<52} {'-':>8} {'-':>9} {'-':>9}  {note}")
            continue
        over = value - anchor
        results[name] = over
        ratio = f"{over / gprof_over:.2f}x" if gprof_over > 0 and name != "plain (anchor)" else ""
        print(f"{name:<52} {value:8.1f} {over:9.1f} {ratio:>9}")
    if rdtsc_ns is not None:
        print(f"one rdtsc costs {rdtsc_ns:.1f} ns here: timed mode reads the clock twice per "
              "call, fenced (rdtsc;lfence at entry, rdtscp at exit) so the body's own work "
              "stays between the two")
    print(f"{'inlined calls: plain (anchor)':<52} {inline_anchor:8.1f} {0.0:9.1f}")
    print(f"{'inlined calls: proftui --timed':<52} {inline_timed:8.1f} "
          f"{inline_timed - inline_anchor:9.1f}")
    timed, default = results["proftui --timed"], results["proftui default (sampled)"]
    verdict = 'met' if timed <= 30 else 'MISSED'
    print(f"goal: --timed overhead <= 30 ns/call: {timed:.1f} -> {verdict}"
          + ("" if timed <= 30 else " (the goal predates the fences, about 19 ns here: "
             "without them a 77 ms phase of calls read as 10 ms)"))
    ratio = default / gprof_over if gprof_over > 0 else float("inf")
    print(f"goal: default <= 2x gprof overhead per call: {default:.1f} ns vs gprof "
          f"{gprof_over:.1f} ns = {ratio:.2f}x -> {'met' if ratio <= 2 else 'MISSED'}")
    with tempfile.TemporaryDirectory(prefix="bench-hook-lua-") as tmp:
        lua_slowdowns(Path(tmp), lua_rounds, env, hook)
    real_programs(lua_rounds, env, hook, options.program)


if __name__ == "__main__":
    main()
