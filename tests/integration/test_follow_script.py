"""`proftui record --follow ./script.sh`: the script runs (its interpreter profiled, the
programs it runs preloaded, as `perf record` does), and the report, the JSON report and
the folded export keep its programs apart with `--by process`.  Without --follow a
script is refused in one line that says to add it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_fixture

STEPS = "200"  # millions of steps: about 0.3 s of CPU per program


def proftui(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A script that runs alpha then beta (two programs), recorded with --follow: the
    directory, the profile, and the script."""
    work = tmp_path_factory.mktemp("follow")
    alpha, beta = (build_fixture("smp_follow.c", ["-O1", "-g", "-fno-omit-frame-pointer",
                                                  f"-DWORK={name}"], output=f"fl_{name}")
                   for name in ("alpha", "beta"))
    script = work / "run.sh"
    script.write_text(f"#!/bin/sh\n{alpha} {STEPS}\n{beta} {STEPS}\nexit 3\n")
    script.chmod(0o755)
    result = proftui("record", "--follow", "-o", "run.proftui", str(script), cwd=work)
    assert result.returncode == 3, result.stderr  # the script's own status
    assert result.stdout == "alpha done\nbeta done\n"  # its programs' output, untouched
    return work, work / "run.proftui", script


def test_script_refused_without_follow_says_to_add_it(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    script.chmod(0o755)
    result = proftui("record", "-o", "x.proftui", str(script), cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "a script" in result.stderr
    assert "--follow" in result.stderr
    assert not (tmp_path / "x.proftui").exists()


def _pids(doc: dict) -> dict[str, int]:  # type: ignore[type-arg]
    """function -> the pid of its flat rows (one pid each: asserted)."""
    found: dict[str, set[int]] = {}
    for row in doc["flat"]:
        found.setdefault(row["function"], set()).add(row["pid"])
    for name in ("alpha_work", "beta_work"):
        assert len(found[name]) == 1, found
    return {name: next(iter(pids)) for name, pids in found.items()}


def test_json_by_process_keeps_the_programs_apart(recorded: tuple[Path, Path, Path]) -> None:
    work, saved, script = recorded
    result = proftui("report", "--json", "--by", "process", str(saved), cwd=work)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    meta = doc["meta"]
    assert meta["argv"] == [str(script)] and meta["by"] == "process"
    assert len(meta["pids"]) >= 3  # the shell, alpha, beta
    pids = _pids(doc)
    alpha, beta = pids["alpha_work"], pids["beta_work"]
    assert alpha != beta and {alpha, beta} <= set(meta["pids"])
    names = {p["pid"]: p["name"] for p in meta["processes"]}
    assert names[alpha].startswith("fl_alpha") and names[beta].startswith("fl_beta")
    roots = {node["pid"]: node for node in doc["tree"] if "pid" in node}
    for pid, mine, other in ((alpha, "alpha_work", "beta_work"),
                             (beta, "beta_work", "alpha_work")):
        below, stack = set(), list(roots[pid]["children"])
        while stack:
            node = stack.pop()
            below.add((node["function"], os.path.basename(node["module"])))
            stack.extend(node["children"])
        assert any(f == mine for f, _ in below) and all(f != other for f, _ in below)
        program = names[pid][:8]  # comm: the file name, cut to 15 characters
        assert any(f == "main" and module.startswith(program) for f, module in below)
        assert not any(f == "main" and not module.startswith(program) for f, module in below)
        assert roots[pid]["total"]["samples"] > 100  # about 300 ms at 1 kHz


def test_text_and_folded_by_process(recorded: tuple[Path, Path, Path]) -> None:
    work, saved, _script = recorded
    report = proftui("report", "--by", "process", str(saved), cwd=work)
    assert report.returncode == 0, report.stderr
    flat = report.stdout.split("Flat profile:")[1].split("Call tree")[0]
    rows = {line.split()[-1]: line.split()[-2] for line in flat.splitlines()
            if line.endswith(("alpha_work", "beta_work"))}
    assert set(rows) == {"alpha_work", "beta_work"} and rows["alpha_work"] != rows["beta_work"]
    assert f"process {rows['alpha_work']} fl_alpha" in report.stdout
    merged = proftui("report", str(saved), cwd=work).stdout
    assert "processes merged; `--by process` keeps them apart" in merged
    assert "main (in fl_alpha" in merged and "main (in fl_beta" in merged
    folded = proftui("export", "-f", "folded", "--by", "process", "-o", "-", str(saved),
                     cwd=work)
    assert folded.returncode == 0, folded.stderr
    lines = folded.stdout.splitlines()
    for name in ("alpha", "beta"):
        mine = [line for line in lines if f"{name}_work" in line]
        assert mine and all(line.startswith(f"process {rows[name + '_work']} fl_{name}")
                            for line in mine), lines
