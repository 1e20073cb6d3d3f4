"""gperftools CPU profiles of a real fixture, made by libprofiler, opened by proftui.

The reference is `google-pprof --text` on the same file: every function of the
fixture must show the same flat and cumulative sample counts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile

from tests.helpers.cpu_records import record_gperftools
from tests.helpers.profiles import assert_round_trips

FIXTURE_FUNCTIONS = ("spin", "work_hot", "work_cold", "recurse", "main")


def google_pprof_text(binary: Path, prof: Path) -> dict[str, tuple[int, int]]:
    """name -> (flat, cum) samples from `google-pprof --text`."""
    tool = shutil.which("google-pprof") or shutil.which("pprof")
    if tool is None:
        pytest.skip("google-pprof (Debian google-perftools) is not installed")
    result = subprocess.run([tool, "--text", str(binary), str(prof)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$", line)
        if match:
            rows[match[3].strip()] = (int(match[1]), int(match[2]))
    return rows


def by_name(profile: Profile) -> dict[str, tuple[float, float]]:
    return {e.frame.function: (e.self_cost[0], e.total_cost[0]) for e in flat_profile(profile)}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return record_gperftools(tmp_path_factory.mktemp("gperf"))


def test_counts_match_google_pprof(recorded: tuple[Path, Path]) -> None:
    binary, prof = recorded
    reference = google_pprof_text(binary, prof)
    profile = load_any(prof)
    assert profile.meta.mode == "import"
    ours = by_name(profile)
    for name in FIXTURE_FUNCTIONS:
        assert name in reference, reference
        assert ours[name] == reference[name], name
    top = flat_profile(profile)[0].frame.function
    # The fixture's shape (spin ~3x work_hot's own loop): once, in a quiet suite run,
    # both google-pprof and proftui put work_hot first; the counts say how the run went.
    assert top == max(reference, key=lambda n: reference[n][0]) == "spin", \
        {name: reference[name] for name in FIXTURE_FUNCTIONS}
    # the fixture's proportions: work_hot does ~3x work_cold's work, plus its own
    assert ours["work_hot"][1] > 2 * ours["work_cold"][1] > 0
    assert ours["work_hot"][0] > 0  # its own loop


def test_cli_reads_it_by_content(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    _binary, prof = recorded
    renamed = tmp_path / "profile.proftui"  # the extension must not matter
    renamed.write_bytes(prof.read_bytes())
    for command in (["report", "-n", "5"], ["open"]):
        result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", *command, str(renamed)],
                                capture_output=True, text=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        flat = result.stdout.split("Flat profile:")[1]
        first_row = next(ln for ln in flat.splitlines() if re.match(r"\s+[\d.]+\s+\d", ln))
        assert first_row.split()[-1] == "spin"
        assert "imported from gperftools CPU profile" in result.stdout


def test_saved_import_round_trips(recorded: tuple[Path, Path], tmp_path: Path) -> None:
    _binary, prof = recorded
    profile = load_any(prof)
    loaded = assert_round_trips(profile, tmp_path / "run.proftui")
    files = {f.file for f in profile.frames if f.file and Path(f.file).exists()}
    assert files <= set(loaded.sources)
