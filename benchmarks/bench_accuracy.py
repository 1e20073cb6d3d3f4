"""Accuracy table: per mode and program, the largest self-share difference against the reference.

Each row profiles one real program in one proftui mode and measures the same
execution with the reference tool (the anchor):

  sampler     Lua -O2 under `perf record -- proftui record`: perf on the same run
  attach      Lua -O2, proftui attach and `perf record -p` on the same process
  gprof       Lua -O2 -pg: `gprof -b` on the same gmon.out
  instrument  Lua -O2 -finstrument-functions: uftrace on the same binary (if installed)

It prints, for the reference's top-10 functions, the worst absolute
difference in self share (percentage points) and the function where it
occurs.  Shares are per ELF symbol (inlined frames fold into their
container, clone suffixes dropped), see tests/helpers/reference.py.

usage: python benchmarks/bench_accuracy.py [--scale N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.model import storage  # noqa: E402

from tests.conftest import LUA_SCRIPTS, build_lua  # noqa: E402
from tests.helpers import reference  # noqa: E402

Row = tuple[str, str, str, float, str, int]  # mode, program, reference, worst, where, n


def worst_difference(ours: dict[str, float], theirs: dict[str, float]) -> tuple[float, str]:
    """Largest |ours - theirs| over the reference's top-10 functions, and where."""
    top = sorted(theirs, key=theirs.__getitem__, reverse=True)[:10]
    diffs = {name: abs(theirs[name] - ours.get(name, 0.0)) for name in top}
    where = max(diffs, key=diffs.__getitem__)
    return diffs[where], where


def sampler_row(work: Path, scale: str) -> Row | None:
    """proftui's sampler against perf recording the same execution."""
    if not reference.perf_allowed(work):
        print("sampler: skipped (perf missing or not permitted)")
        return None
    lua = build_lua()
    out, data = work / "s.proftui", work / "s.perf"
    subprocess.run(
        ["perf", "record", "-q", "-F", "1000", "-g", "-o", str(data), "--", sys.executable,
         "-m", "proftui.tui.cli", "record", "-o", str(out), "--mode", "sampler", "-F", "1000",
         str(lua), str(LUA_SCRIPTS / "cpu.lua"), scale],
        check=True, capture_output=True, timeout=900)
    profile = storage.load(out)
    ours = reference.proftui_symbol_shares(profile)
    theirs = reference.perf_user_shares(data, lua.name[:15])
    worst, where = worst_difference(ours, theirs)
    return ("sampler", "lua -O2", "perf (same run)", worst, where, int(profile.total()))


def gprof_row(work: Path, scale: str) -> Row | None:
    """proftui's gprof mode against `gprof -b` on the same gmon.out (% time per function)."""
    from proftui.collectors.gprof.collector import gmon_result

    from tests.helpers.gprof_agree import gprof_rows, grouped_rows

    lua = build_lua(["-pg"])
    subprocess.run([str(lua), str(LUA_SCRIPTS / "cpu.lua"), scale], cwd=work, check=True,
                   capture_output=True, timeout=900)
    gmon = work / "gmon.out"
    result = gmon_result(gmon, lua)
    ours = {name: row.percent for name, row in grouped_rows(result, lua).items()}
    theirs = {name: row.percent for name, row in gprof_rows(lua, gmon).items()}
    worst, where = worst_difference(ours, theirs)
    return ("gprof", "lua -O2", "gprof -b (same gmon)", worst, where, result.total_ticks)


def instrument_row(work: Path, scale: str) -> Row | None:
    """proftui's hook library against uftrace on the same binary and input (two runs:
    both tools instrument, so they cannot share one).  Self share per function."""
    from tests.helpers.instrument import record
    from tests.helpers.uftrace import from_profile, shares, uftrace_reason, uftrace_tree

    reason = uftrace_reason()
    if reason:
        print(f"instrument: skipped ({reason})")
        return None
    lua = build_lua(["-finstrument-functions", "-pthread"])
    argv: list[str | Path] = [lua, LUA_SCRIPTS / "instrument_work.lua", "60"]
    profile, _ = record(argv)
    ours, theirs = shares(from_profile(profile)), shares(uftrace_tree(argv, work))
    worst, where = worst_difference({n: ours.self_pct(n) for n in ours.self},
                                    {n: theirs.self_pct(n) for n in theirs.self})
    return ("instrument", "lua -O2", "uftrace (same binary)", worst, where,
            int(profile.total()))


def attach_row(work: Path, scale: str) -> Row | None:
    """proftui attach and `perf record -p` on the same running process, side by side."""
    if not reference.perf_allowed(work):
        print("attach: skipped (perf missing or not permitted)")
        return None
    lua = build_lua()
    target = subprocess.Popen([str(lua), str(LUA_SCRIPTS / "cpu.lua"), str(int(scale) * 4)],
                              stdout=subprocess.DEVNULL)
    out, data = work / "a.proftui", work / "a.perf"
    try:
        perf = subprocess.Popen(["perf", "record", "-q", "-F", "1000", "-g", "-o", str(data),
                                 "-p", str(target.pid), "--", "sleep", "3"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "--pid",
                        str(target.pid), "--duration", "3", "-o", str(out)],
                       check=True, capture_output=True, timeout=120)
        perf.wait(timeout=60)
    finally:
        target.kill()
        target.wait()
    profile = storage.load(out)
    ours = reference.proftui_symbol_shares(profile)
    theirs = reference.perf_user_shares(data, lua.name[:15])
    worst, where = worst_difference(ours, theirs)
    return ("attach", "lua -O2", "perf -p (same process)", worst, where, int(profile.total()))


ROWS: list[Callable[[Path, str], Row | None]] = [sampler_row, attach_row, gprof_row,
                                                 instrument_row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="25", help="Lua workload scale (~0.13 s per unit)")
    args = parser.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="proftui-acc-") as tmp:
        for make in ROWS:
            try:
                row = make(Path(tmp), args.scale)
            except BaseException as exc:  # a skipped row must not stop the table
                print(f"{make.__name__}: skipped ({type(exc).__name__}: {exc})")
                continue
            if row is not None:
                rows.append(row)
    print(f"\n{'mode':11} {'program':10} {'reference':22} {'worst Δ':>8}  {'where':32}"
          f" {'weight':>10}")
    for mode, program, ref, worst, where, n in rows:
        print(f"{mode:11} {program:10} {ref:22} {worst:7.2f}pt  {where:32} {int(n):10d}")


if __name__ == "__main__":
    main()
