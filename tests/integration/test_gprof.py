"""gprof mode end to end: proftui's numbers agree with GNU gprof on the same gmon.out."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.gprof.collector import gmon_result
from proftui.collectors.model.storage import load
from proftui.collectors.model.views import flat_profile

pytestmark = pytest.mark.skipif(shutil.which("gprof") is None, reason="gprof (binutils) missing")

INDEX = re.compile(r"\[\d+\]$")


def run_pg(binary: Path, cwd: Path, *args: str) -> Path:
    """Run a -pg binary in `cwd` so it leaves cwd/gmon.out; return that path."""
    subprocess.run([str(binary), *args], cwd=cwd, check=True, capture_output=True, timeout=60)
    gmon = cwd / "gmon.out"
    assert gmon.exists()
    return gmon


def gprof_flat(binary: Path, gmon: Path) -> dict[str, tuple[str, int | None]]:
    """name -> (self seconds as printed, calls or None) from `gprof -b -p`."""
    out = subprocess.run(["gprof", "-b", "-p", str(binary), str(gmon)], capture_output=True,
                         text=True, check=True).stdout
    rows: dict[str, tuple[str, int | None]] = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4 or not re.fullmatch(r"[\d.]+", fields[0]) or "." not in fields[0]:
            continue
        if len(fields) >= 7 and fields[3].isdigit():
            rows[" ".join(fields[6:])] = (fields[2], int(fields[3]))
        else:
            rows[" ".join(fields[3:])] = (fields[2], None)
    return rows


def gprof_arcs(binary: Path, gmon: Path) -> dict[tuple[str, str], int]:
    """(caller, callee) -> calls from the call graph of `gprof -b -q`."""
    out = subprocess.run(["gprof", "-b", "-q", str(binary), str(gmon)], capture_output=True,
                         text=True, check=True).stdout
    arcs: dict[tuple[str, str], int] = {}
    for block in out.split("-----------------------------------------------"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        primary_at = next((i for i, ln in enumerate(lines) if ln.startswith("[")), None)
        if primary_at is None or "as a whole" in lines[primary_at]:
            continue
        primary = _name(lines[primary_at].split()[4:])
        # Parents above the primary line, children below (gprof omits a function with no
        # time and no calls from the graph, so main's arcs show only as callers' lines).
        for at, line in enumerate(lines):
            fields = line.split()
            if at == primary_at or "<spontaneous>" in line or not line.startswith(" "):
                continue  # entries are indented; headers and the primary line are not
            called = next((i for i, f in enumerate(fields) if re.fullmatch(r"\d+(/\d+)?", f)
                           and not INDEX.fullmatch(f)), None)
            if called is None:
                continue
            other = _name(fields[called + 1:])
            key = (other, primary) if at < primary_at else (primary, other)
            arcs[key] = int(fields[called].split("/")[0])
    return arcs


def _name(fields: list[str]) -> str:
    words = [f for f in fields if not INDEX.fullmatch(f)]
    text = " ".join(words)
    text = re.sub(r"\s*<cycle \d+>", "", text)
    return re.sub(r"^[\d.+/]+\s+", "", text).strip()


def ours(binary: Path, gmon: Path) -> tuple[dict[str, tuple[str, int | None]],
                                           dict[tuple[str, str], int]]:
    result = gmon_result(gmon, binary)
    names = [s.name for s in result.table.symbols]
    flat = {names[i]: (f"{result.seconds(result.self_ticks[i]):.2f}", result.calls[i] or None)
            for i in result.reported if result.self_ticks[i] or result.calls[i]}
    arcs = {(names[p], names[c]): n for (p, c), n in result.arcs.items()}
    return flat, arcs


@pytest.mark.parametrize("fixture,args", [("gp_split.c", ["1500"]), ("gp_recurse.c", ["30"])])
def test_gprof_mode_agrees_with_gprof_b(compile_c, tmp_path: Path, fixture: str,
                                        args: list[str]) -> None:
    binary = compile_c(fixture, ["-O1", "-g", "-pg"])
    gmon = run_pg(binary, tmp_path, *args)
    flat, arcs = ours(binary, gmon)
    theirs = gprof_flat(binary, gmon)
    printed = {name: row for name, row in flat.items() if row[0] != "0.00" or row[1]}
    assert printed == {n: r for n, r in theirs.items() if r[0] != "0.00" or r[1]}
    assert arcs == gprof_arcs(binary, gmon)


def test_known_split_shows_in_total_time(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_split.c", ["-O1", "-g", "-pg"])
    out = tmp_path / "run.proftui"
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out),
                             str(binary), "1500", "7"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 7, result.stderr  # the target's exit status
    assert result.stdout.startswith("done")  # and its output, untouched
    profile = load(out)
    assert profile.meta.mode == "gprof" and profile.meta.exit_status == 7
    entries = {e.frame.function: e for e in flat_profile(profile)}
    assert entries["step"].calls == 15000
    assert entries["step"].self_percent > 90
    total = entries["main"].total_cost[0]
    assert total > 0
    for name, share in (("heavy", 0.6), ("medium", 0.3), ("light", 0.1)):
        assert entries[name].total_cost[0] / total == pytest.approx(share, abs=0.03)
    # The estimated tree keeps the parent chain main -> heavy -> step.
    tree = profile.tree
    assert tree is not None
    main = next(n for n in tree.root.children.values()
                if profile.frames[n.frame_id].function == "main")
    heavy = next(n for n in main.children.values()
                 if profile.frames[n.frame_id].function == "heavy")
    step = next(iter(heavy.children.values()))
    assert profile.frames[step.frame_id].function == "step" and step.calls == 9000
    # Histogram bins become source-line costs for the annotated source pane.
    assert any(path.endswith("gp_split.c") for path, _ in profile.line_costs)


def test_fork_gives_one_part_per_process(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_fork.c", ["-O1", "-g", "-pg"])
    out = tmp_path / "run.proftui"
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out),
                             str(binary)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split("\n")) == ["", "child done", "parent done"]
    profile = load(out)
    assert len(profile.meta.pids) == 2 and len(profile.parts) == 2
    entries = {e.frame.function: e for e in flat_profile(profile)}
    assert entries["spin"].calls == 400  # merged: 300 in the parent + 100 in the child
    per_part = []
    for part in profile.parts.values():
        names = {profile.frames[n.frame_id].function for n in part.nodes()
                 if n.frame_id >= 0}
        per_part.append(names)
    assert any("parent_work" in p and "child_work" not in p for p in per_part)
    assert any("child_work" in p and "parent_work" not in p for p in per_part)


@pytest.mark.parametrize("how,status,word", [("", 4, "_exit"), ("abort", 134, "SIGABRT")])
def test_missing_gmon_out_is_explained(compile_c, how: str, status: int, word: str) -> None:
    binary = compile_c("gp_exit.c", ["-O1", "-g", "-pg"])
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "--text", str(binary),
                             *([how] if how else [])], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == status
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("proftui:")]
    assert len(lines) == 1 and "no gmon.out" in lines[0] and word in lines[0]
    assert "sampler" in lines[0]
    assert result.stdout.strip() == "1500000" or result.stdout.strip().isdigit()


def test_json_report_of_gprof_run(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_recurse.c", ["-O1", "-g", "-pg"])
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "--json", str(binary), "22"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["meta"]["mode"] == "gprof"
    rows = {row["function"]: row for row in report["flat"]}
    assert rows["fib"]["calls"] == 1  # gprof counts self-recursive calls apart
    # is_even(i + 22) for i < 2000 runs i + 22 steps of the even/odd cycle from main.
    steps = sum(i + 22 for i in range(2000))
    assert rows["is_even"]["calls"] + rows["is_odd"]["calls"] == steps + 2000
    # The function's line is where its code starts (SymCache): the "{" after line 9.
    assert rows["fib"]["file"].endswith("gp_recurse.c") and rows["fib"]["line"] in (9, 10)


def test_existing_gmon_out_opens_with_its_binary(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_split.c", ["-O1", "-g", "-pg"])
    gmon = run_pg(binary, tmp_path, "800")
    cli = [sys.executable, "-m", "proftui.tui.cli", "report", "--json", str(gmon)]
    result = subprocess.run([*cli, "--binary", str(binary)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows = {row["function"]: row for row in json.loads(result.stdout)["flat"]}
    assert rows["step"]["calls"] == 8000 and rows["heavy"]["calls"] == 1
    missing = subprocess.run(cli, capture_output=True, text=True)
    assert missing.returncode != 0 and "--binary" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    other = compile_c("sym_lines.c", ["-O2", "-g", "-pg"])
    wrong = subprocess.run([*cli, "--binary", str(other)], capture_output=True, text=True)
    assert wrong.returncode != 0 and "not written by" in wrong.stderr
