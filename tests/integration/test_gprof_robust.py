"""gprof mode on hostile targets: a -pg plugin, a stolen SIGPROF, a chroot or a new user.

Each run is compared with the same binary run without proftui: the exit status and
output must be the same, the profile kept (with one warning saying what it lacks) or
one line saying why there is none, and nothing left under TMPDIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.gprof.collector import gmon_result
from proftui.collectors.model.storage import load
from proftui.collectors.model.views import flat_profile

from tests.conftest import build_fixture
from tests.helpers.gprof_agree import assert_agree, gprof_rows, grouped_rows

pytestmark = pytest.mark.skipif(shutil.which("gprof") is None, reason="gprof (binutils) missing")

PG = ["-O1", "-g", "-pg"]


def proftui(args: list[str], tmp: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI with TMPDIR pointed at a fresh directory that must be empty afterwards."""
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], cwd=cwd,
                            capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    assert os.listdir(tmpdir) == [], "run directory left under TMPDIR"
    return result


def direct(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def plugin_pair() -> tuple[Path, Path]:
    program = build_fixture("gp_plugin.c", [*PG, "-ldl"])
    plugin = build_fixture("gp_plugin_lib.c", [*PG, "-fPIC", "-shared"], output="gp_plugin_lib")
    return program, plugin


def test_pg_plugin_leaves_the_programs_profile(plugin_pair: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    program, plugin = plugin_pair
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = direct([str(program), str(plugin), "3"], plain_dir)
    assert plain.returncode == 3, plain.stderr
    gmon = plain_dir / "gmon.out"
    # The same gmon.out: proftui's flat profile is gprof's (both drop the arcs into the
    # plugin, and they do not make proftui take the file for another program's).
    ours = grouped_rows(gmon_result(gmon, program), program)
    assert_agree(ours, gprof_rows(program, gmon))
    assert ours["own_work"].calls == 1 and "plugin_spin" not in ours
    report = proftui(["report", "--json", str(gmon), "--binary", str(program)], tmp_path)
    assert report.returncode == 0, report.stderr
    warnings = json.loads(report.stdout)["meta"]["warnings"]
    assert any("this profile lacks 3 calls from " in w for w in warnings), warnings

    out = tmp_path / "run.proftui"
    run = proftui(["record", "-o", str(out), str(program), str(plugin), "3"], tmp_path)
    assert run.returncode == plain.returncode == 3, run.stderr
    assert run.stdout == plain.stdout
    profile = load(out)
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert rows["own_work"].calls == 1 and rows["own_work"].self_cost[0] > 0
    assert not any("plugin" in name for name in rows)
    # The live run saw the plugin mapped, so the warning names it and the function called.
    note = [w for w in profile.meta.warnings if "this profile lacks" in w]
    assert len(note) == 1, profile.meta.warnings
    assert f"main -> plugin_spin ({plugin.name}): 3" in note[0]


@pytest.mark.parametrize("how,cause", [("handler", "ITIMER_PROF"),
                                        ("block", "blocked SIGPROF in every thread")])
def test_stolen_sigprof_is_explained(tmp_path: Path, how: str, cause: str) -> None:
    binary = build_fixture("gp_itimer.c", PG)
    plain = direct([str(binary), how], tmp_path)
    out = tmp_path / "run.proftui"
    run = proftui(["record", "-o", str(out), str(binary), how], tmp_path)
    assert run.returncode == plain.returncode == 0, run.stderr
    assert run.stdout == plain.stdout
    # gprof on the target's own gmon.out: the calls, and no time anywhere.
    rows = gprof_rows(binary, tmp_path / "gmon.out")
    assert rows["step"].calls == 100_000_000 and rows["step"].seconds == 0.0
    profile = load(out)
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["step"].calls == 100_000_000
    assert sum(e.self_cost[0] for e in flat.values()) == 0
    note = [w for w in profile.meta.warnings if "no time samples" in w]
    assert len(note) == 1 and cause in note[0], profile.meta.warnings


def test_plain_target_gets_no_sigprof_warning(tmp_path: Path) -> None:
    binary = build_fixture("gp_itimer.c", PG)
    out = tmp_path / "run.proftui"
    run = proftui(["record", "-o", str(out), str(binary), "plain"], tmp_path)
    assert run.returncode == 0, run.stderr
    profile = load(out)
    assert not any("no time samples" in w for w in profile.meta.warnings)
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["step"].self_cost[0] > 0


@pytest.mark.parametrize("how", ["chroot", "setuid"])
def test_unreachable_run_directory_is_named(tmp_path: Path, how: str) -> None:
    binary = build_fixture("gp_chroot.c", PG)
    jail = tmp_path / "jail"
    jail.mkdir()
    arg = str(jail) if how == "chroot" else "setuid"
    plain = direct([str(binary), arg], tmp_path)
    if plain.returncode == 77:
        pytest.skip(f"{how} not permitted here ({plain.stderr.strip()}): needs root")
    assert plain.returncode == 0, plain.stderr
    run = proftui(["--text", str(binary), arg], tmp_path)
    assert run.returncode == plain.returncode == 0
    assert run.stdout == plain.stdout
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("proftui:")]
    assert len(lines) == 1 and "no gmon.out" in lines[0], run.stderr
    assert "_exit" not in lines[0]
    if how == "chroot":
        assert f"changed its root directory to {jail}" in lines[0]
    else:
        assert "switched to user id 65534" in lines[0]


def test_chroot_seen_when_the_watch_starts_late(tmp_path: Path) -> None:
    """A target that chroots before proftui's first look still counts as having moved
    (CI under load: the watch started after the chroot and compared the jail with itself)."""
    import time

    from proftui.collectors.gprof.watch import TargetWatch

    binary = build_fixture("gp_chroot.c", PG)
    jail = tmp_path / "jail"
    jail.mkdir()
    target = subprocess.Popen([str(binary), str(jail)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while os.readlink(f"/proc/{target.pid}/root") != str(jail):
            if target.poll() is not None:
                pytest.skip(f"chroot not permitted here ({target.stderr.read().strip()})")
            assert time.monotonic() < deadline, "the fixture never changed its root"
            time.sleep(0.001)
        watch = TargetWatch(target.pid, binary)
        time.sleep(0.1)
        watch.stop()
        assert watch.new_root == str(jail)
    finally:
        target.kill()
        target.wait()


def test_exit_without_handlers_lists_the_causes(tmp_path: Path) -> None:
    binary = build_fixture("gp_exit.c", PG)
    plain = direct([str(binary)], tmp_path)
    run = proftui(["--text", str(binary)], tmp_path)
    assert run.returncode == plain.returncode == 4
    assert run.stdout == plain.stdout
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("proftui:")]
    assert len(lines) == 1
    for cause in ("_exit()", "GMON_OUT_PREFIX", "root"):
        assert cause in lines[0]
