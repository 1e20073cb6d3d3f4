"""Thread names that are not UTF-8 or hold terminal control sequences (prctl(PR_SET_NAME)).

Before: the sampler's drain thread died on the first such name (samples lost), the
TUI's process poll crashed the app within a second (killing the target).  Now every
name is escaped where it is read (collectors/runtime/thread_names.py) and the run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.model.storage import load
from proftui.collectors.model.views import flat_profile
from proftui.collectors.registry import COLLECTORS
from proftui.collectors.runtime.process_status import ProcStat, ThreadStat
from proftui.collectors.runtime.thread_names import printable_name
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.process import ProcPane
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.collect import attach_profile
from tests.helpers.tmux import PROFTUI, Terminal
from tests.helpers.tui import run_app, screen_text

WORK = "200"  # million iterations per worker thread: about 1 s of CPU in all
# The sampler at 1 MiB holds about 1,000 samples: 3 s of CPU overflows it unless drained
# (odd names must not stop the drain thread: without it 75% of such a run is dropped).
SAMPLER_WORK, SAMPLER_BUFFER = "600", "1"
ODD_SHOWN = ["\\xff\\xfebad\\xc3(", "\\x1b[31mRED\\x1b[0m", "\\x1b]0;pwn\\x07x\\x7f",
             "\\x1b[2Jclear\\x9b"]  # smp_names.c's names as proftui shows them


def test_printable_name_rule() -> None:
    assert printable_name(b"worker-1") == "worker-1"
    assert printable_name(b"\xff\xfebad\xc3(") == ODD_SHOWN[0]
    assert printable_name(b"\x1b[31mRED\x1b[0m") == ODD_SHOWN[1]
    assert printable_name("caf\u00e9 \u202e".encode()) == "caf\u00e9 \\u202e"  # bidi override
    assert printable_name("x\udcff") == "x\\xff"  # psutil's surrogateescape'd byte
    for raw in (bytes(range(256)), b"\x00\n\t\r", "\ud800".encode("utf-8", "surrogatepass")):
        shown = printable_name(raw)
        assert shown.isprintable()
        json.dumps(shown, ensure_ascii=False).encode("utf-8")  # storable as is


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    tmpdir = tmp / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], cwd=tmp,
                            capture_output=True, text=True, timeout=180,
                            env={**os.environ, "TMPDIR": str(tmpdir)})
    assert "Traceback" not in result.stderr and "Exception in thread" not in result.stderr, \
        result.stderr
    assert os.listdir(tmpdir) == [], "run directory left under TMPDIR"
    return result


@pytest.mark.parametrize("mode,flags", [("sampler", ["-O1", "-g", "-pthread"]),
                                        ("instrument", ["-O1", "-g", "-pthread",
                                                        "-finstrument-functions"])])
def test_odd_names_keep_every_sample(tmp_path: Path, mode: str, flags: list[str]) -> None:
    if mode not in COLLECTORS:
        pytest.skip(f"{mode} mode is not in this build")
    binary = build_fixture("smp_names.c", flags, output=f"smp_names_{mode}")
    work = SAMPLER_WORK if mode == "sampler" else WORK
    extra = ["--buffer", SAMPLER_BUFFER] if mode == "sampler" else []
    direct = subprocess.run([str(binary), work, "odd"], capture_output=True, text=True,
                            timeout=120)
    assert direct.returncode == 7
    profiles = {}
    for names in ("plain", "odd"):
        out = tmp_path / f"{names}.proftui"
        run = _run(["record", "-o", str(out), "--mode", mode, *extra, str(binary), work,
                    names], tmp_path)
        assert run.returncode == direct.returncode, run.stderr
        assert run.stdout == direct.stdout
        profiles[names] = load(out)
    odd = profiles["odd"]
    shown = set(odd.meta.threads.values())
    assert set(ODD_SHOWN[1:]) <= shown, shown
    assert all("\x1b" not in name and name.isprintable() for name in shown)
    assert set(profiles["plain"].meta.threads.values()) >= {"worker-1", "worker-2", "worker-3"}
    if mode == "sampler":
        # A fixed amount of CPU work: the odd-named run keeps as many samples (task-clock).
        counts = {k: sum(e.self_cost[0] for e in flat_profile(p)) for k, p in profiles.items()}
        # (a drain starved on a loaded machine may drop a little; the bug dropped 75%)
        assert odd.meta.dropped <= 0.05 * counts["odd"], (odd.meta.dropped, counts)
        assert counts["odd"] >= 0.85 * counts["plain"], counts
    else:
        spin = {k: next(e for e in flat_profile(p) if e.frame.function == "spin").calls
                for k, p in profiles.items()}
        assert spin == {"plain": 3, "odd": 3}


def test_tui_shows_odd_names_escaped(terminal: list[Terminal],
                                     tmp_path: Path) -> None:
    binary = build_fixture("smp_names.c", ["-O1", "-g", "-pthread"], output="smp_names_sampler")
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    term = Terminal(["env", f"TMPDIR={tmpdir}", str(PROFTUI), "--mode", "sampler", str(binary),
                     "600", "odd"], tmp_path)
    terminal.append(term)
    term.wait_for("sampler", "running", timeout=60)
    term.key("4")
    screen = term.wait_for(*ODD_SHOWN, timeout=30)  # escaped text, not interpreted
    time.sleep(2)  # past the first process polls, which read the names
    screen = term.screen()
    assert "Traceback" not in screen and "Error" not in screen
    assert "pwn" not in subprocess.run(["tmux", "display", "-p", "-t", term.name,
                                        "#{pane_title}"], capture_output=True,
                                       text=True).stdout  # no OSC title change
    term.wait_for("exited with status 7", timeout=120)  # the target ran to its end
    term.key("q")
    term.wait_for("PROFTUI-EXIT=7")
    assert os.listdir(tmpdir) == []


def test_process_pane_shows_names_as_text_not_markup() -> None:
    """Escaped names that look like Rich markup ("[/oops]") show as is, not as markup."""
    odd = [printable_name(b"[/oops]\x1b[2J"), "[bold]x[/bold]", *ODD_SHOWN]
    stat = ProcStat(pid=4242, alive=True, state="running", name=odd[0], num_threads=len(odd),
                    threads=tuple(ThreadStat(100 + i, n, 1.0) for i, n in enumerate(odd)),
                    cpu_history=(1.0,), rss_history=(1.0,))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        app.query_one(ProcPane).show_stat(stat)
        await pilot.pause()
        text = screen_text(app)
        for name in odd:
            assert name in text, (name, text)
        assert "\x1b" not in text  # no raw ESC reaches the screen

    run_app(ProfTuiApp(profile=attach_profile()), body)
