"""gprof mode on -O2 code: clones, cycles, C++, threads, and the Lua interpreter,
each checked against `gprof -b` on the same gmon.out."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.gprof.collector import display_name, gmon_result, load_gmon_file
from proftui.collectors.gprof.tree import MAX_NODES
from proftui.collectors.model.views import flat_profile

from tests.conftest import LUA_SCRIPTS, build_fixture, build_lua
from tests.helpers.gprof_agree import (
    assert_agree,
    gprof_rows,
    grouped_rows,
    max_difference,
    printed,
    whole_functions,
)

pytestmark = pytest.mark.skipif(shutil.which("gprof") is None, reason="gprof (binutils) missing")

LUA_SCRIPT = LUA_SCRIPTS / "gprof_work.lua"
CLI = [sys.executable, "-m", "proftui.tui.cli"]


def run_pg(binary: Path, cwd: Path, *args: str) -> Path:
    """Run a -pg binary in `cwd` so it leaves cwd/gmon.out; return that path."""
    subprocess.run([str(binary), *args], cwd=cwd, check=True, capture_output=True, timeout=120)
    gmon = cwd / "gmon.out"
    assert gmon.exists()
    return gmon


def report_json(gmon: Path, binary: Path) -> dict:
    result = subprocess.run([*CLI, "report", "--json", str(gmon), "--binary", str(binary)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def local_functions(binary: Path) -> list[str]:
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return [line.split()[2] for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[1] == "t"]


def test_cycle_is_one_node_counted_once(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_cycle.c", ["-O2", "-g", "-pg"])
    gmon = run_pg(binary, tmp_path, "300")
    result = gmon_result(gmon, binary)
    index = {s.name: i for i, s in enumerate(result.table.symbols)}
    a, b, c = index["a"], index["b"], index["c"]
    for arc in ((a, b), (a, c), (b, c), (c, a)):
        assert result.arcs.get(arc, 0) > 0, arc
    assert sorted(result.cycles) == [sorted([a, b, c])]
    theirs = gprof_rows(binary, gmon)
    assert_agree(grouped_rows(result, binary), theirs)
    # a and b only call: a tick lands in their few instructions now and then (one did
    # on a loaded run), never a share worth a row.
    assert theirs["c"].seconds > 0
    assert result.self_ticks[a] + result.self_ticks[b] < 0.05 * result.self_ticks[c], (
        result.self_ticks[a], result.self_ticks[b], result.self_ticks[c])

    profile = load_gmon_file(gmon, binary)
    histogram_ns = result.total_ticks / result.prof_rate * 1e9
    assert profile.tree.root.total_cost[0] == pytest.approx(histogram_ns, rel=1e-9)
    c_nodes = [n for n in profile.tree.nodes() if profile.frames[n.frame_id].function == "c"]
    assert sum(n.self_cost[0] for n in c_nodes) == pytest.approx(histogram_ns, rel=1e-9)
    # main enters the cycle at a, once: a spanning tree of the cycle, each member once.
    assert len(c_nodes) == 1
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert abs(flat["c"].self_percent - theirs["c"].percent) <= 0.005 + 1e-9
    assert flat["c"].calls == theirs["c"].calls


CLONES = {"constprop": "scaled.constprop.", "isra": "sum_pair.isra.", "part": "check.part.",
          "cold": "rare.cold"}


def test_clones_are_functions_of_their_own(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_clones.c", ["-O2", "-g", "-pg"])
    names = local_functions(binary)
    made = {kind: next((n for n in names if n.startswith(prefix)), None)
            for kind, prefix in CLONES.items()}
    if not any(made.values()):
        pytest.skip(f"this gcc made none of the clones {sorted(CLONES.values())}")
    missing = sorted(kind for kind, name in made.items() if name is None)
    if missing:
        print(f"this gcc did not make the {missing} clones; checking the others")
    rounds = 40  # ~0.1 s in each clone: 10 samples apiece
    gmon = run_pg(binary, tmp_path, str(rounds))
    result = gmon_result(gmon, binary)
    table = {s.name for s in result.table.symbols}
    assert all(name in table for name in made.values() if name)
    rows = {row["function"]: row for row in report_json(gmon, binary)["flat"]}
    positive = sum(1 for r in range(rounds) if r % 3) + sum(1 for r in range(rounds) if r % 2)
    expected_calls = {"constprop": rounds, "isra": 2 * rounds, "part": positive}
    for kind, calls in expected_calls.items():
        raw = made[kind]
        if raw is None:
            continue
        shown = display_name(raw)
        assert shown.endswith(f" [clone .{raw.split('.', 1)[1]}]"), shown
        assert rows[shown]["calls"] == calls, shown
        assert rows[shown]["self"]["cpu_ns"] > 0, shown  # its loop ran there, not elsewhere
    if made["cold"]:
        assert display_name(made["cold"]) == "rare [clone .cold]"
        assert rows["rare"]["calls"] == rounds
    # gprof folds some clones into the function before them; grouped the same way,
    # every number is gprof's.
    assert_agree(grouped_rows(result, binary), gprof_rows(binary, gmon))


CXX_ROUNDS = 6


@pytest.fixture(scope="module")
def cxx_gmon(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(gp_cxx built -O2 -pg, the gmon.out of its run of CXX_ROUNDS rounds)."""
    binary = build_fixture("gp_cxx.cpp", ["-O2", "-g", "-pg"], compiler="g++")
    return binary, run_pg(binary, tmp_path_factory.mktemp("cxx"), str(CXX_ROUNDS))


def test_cxx_program_gmon_agrees_with_gprof(cxx_gmon: tuple[Path, Path]) -> None:
    binary, gmon = cxx_gmon
    report = report_json(gmon, binary)  # accepted as the program's own
    rows = {row["function"]: row for row in report["flat"]}
    assert rows["work::checked(long)"]["calls"] == 20000 * CXX_ROUNDS
    assert rows["work::risky_sum(long)"]["calls"] == CXX_ROUNDS
    assert any("[clone ." in name for name in rows)
    result = gmon_result(gmon, binary)
    assert_agree(grouped_rows(result, binary), gprof_rows(binary, gmon))


def test_another_programs_gmon_is_refused(cxx_gmon: tuple[Path, Path]) -> None:
    gmon = cxx_gmon[1]
    other = build_fixture("gp_cycle.c", ["-O2", "-g", "-pg"])
    wrong = subprocess.run([*CLI, "report", "--json", str(gmon), "--binary", str(other)],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode != 0 and "not written by" in wrong.stderr


def test_multithreaded_target_is_flagged(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_threads.c", ["-O2", "-g", "-pg", "-pthread"])
    out = subprocess.run([*CLI, "--json", str(binary), "3"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("4 threads")  # the target's output, untouched
    report = json.loads(out.stdout[out.stdout.index("{"):])
    notes = [w for w in report["meta"]["warnings"] if w.startswith("multithreaded")]
    assert len(notes) == 1 and "sampler" in notes[0]
    rows = {row["function"]: row for row in report["flat"]}
    # What the note says: the three thread starts have no recorded caller (start_thread
    # is in libc), and calls can only be lost, never invented.
    # libc's start_thread calls the thread function; glibc's mcount drops a call made
    # while another thread is inside mcount, so that one arc may be missing.
    assert rows["worker"]["calls"] in (None, 1)
    assert rows["step"]["calls"] <= 4 * 200000
    single = compile_c("gp_cycle.c", ["-O2", "-g", "-pg"])
    plain = subprocess.run([*CLI, "--json", str(single), "10"], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    meta = json.loads(plain.stdout[plain.stdout.index("{"):])["meta"]
    assert not any(w.startswith("multithreaded") for w in meta["warnings"])


def _lua_binary() -> Path:
    return build_lua(["-pg"])


def test_lua_every_function_agrees_with_gprof(tmp_path: Path) -> None:
    binary = _lua_binary()
    gmon = run_pg(binary, tmp_path, str(LUA_SCRIPT))
    result = gmon_result(gmon, binary)
    ours, theirs = grouped_rows(result, binary), gprof_rows(binary, gmon)
    assert_agree(ours, theirs)
    seconds, percent = max_difference(printed(ours), printed(theirs))
    print(f"lua: {len(printed(theirs))} functions agree with gprof -b; max difference "
          f"{seconds:.4f} s, {percent:.4f} % (gprof prints 2 decimals)")
    assert len(printed(theirs)) > 50

    # The report is small and its tree adds up to the histogram.
    report = report_json(gmon, binary)
    assert len(json.dumps(report)) < 20_000_000

    def count(nodes: list[dict]) -> int:
        return sum(1 + count(n["children"]) for n in nodes)

    assert count(report["tree"]) <= MAX_NODES + 1
    profile = load_gmon_file(gmon, binary)
    histogram_ns = result.total_ticks / result.prof_rate * 1e9
    assert profile.tree.root.total_cost[0] == pytest.approx(histogram_ns, rel=1e-9)
    # proftui's own flat profile (self, calls, % of the histogram) for every function
    # gprof keeps whole.
    entries = {e.frame.raw_name: e for e in flat_profile(profile)}
    whole = [name for name in theirs if name in whole_functions(result, binary)]
    assert len(whole) > 0.8 * len(theirs)
    for name in whole:
        entry, row = entries[name], theirs[name]
        assert entry.calls == row.calls, name
        assert abs(entry.self_cost[0] / 1e9 - row.seconds) <= 0.005 + 1e-9, name
        assert abs(entry.self_percent - row.percent) <= 0.005 + 1e-9, name
