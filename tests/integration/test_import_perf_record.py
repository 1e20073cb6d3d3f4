"""`perf script` output of `perf record -g` on a real fixture, opened by proftui.

The reference is `perf report` on the same perf.data: the top function by self
overhead must be proftui's top function too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model.views import callers, flat_profile

from tests.helpers.cpu_records import record_perf


def perf_report_top(data: Path) -> str:
    result = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                             "--sort", "sym", "-g", "none"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.splitlines():
        match = re.match(r"\s*[\d.]+%\s+\[.\]\s+(\S.*?)\s*$", line)
        if match:
            return match[1]
    raise AssertionError(f"no symbol in perf report:\n{result.stdout[:2000]}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return record_perf(tmp_path_factory.mktemp("perf"))


def test_same_top_function_as_perf_report(recorded: tuple[Path, Path]) -> None:
    data, script = recorded
    profile = load_any(script)
    flat = flat_profile(profile)
    assert flat[0].frame.function == perf_report_top(data) == "spin"
    by_name = {e.frame.function: e for e in flat}
    # call chains: spin is reached through all three paths, work_hot's the widest
    spin_callers = {profile.frames[n.frame_id].function: n.cost[0]
                    for n in callers(profile, by_name["spin"].frame_id)}
    assert {"work_hot", "work_cold", "recurse"} <= set(spin_callers)
    assert spin_callers["work_hot"] > 2 * spin_callers["work_cold"] > 0
    assert by_name["main"].total_percent > 90
    assert profile.meta.period_ns and profile.metrics[1].name == "cpu_ns"


def test_cli_export_from_perf_script(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    _data, script = recorded
    out = tmp_path / "out.folded"
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "export",
                             "--format", "folded",
                             "-o", str(out), str(script)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = out.read_text().splitlines()
    assert any(re.search(r";main;work_hot;spin \d+$", ln) for ln in lines)
    assert any(re.search(r";main;recurse;recurse;recurse;recurse;spin \d+$", ln)
               for ln in lines)
