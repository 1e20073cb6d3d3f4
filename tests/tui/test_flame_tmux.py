"""The flame graph pane (`5`) in a real terminal (tmux): a saved sampler profile of a
compiled fixture (tests/fixtures/diff_work.c: work_a..work_d do 1:2:3:4 units), keys
sent one by one, the screen read back with capture-pane (with its colours, `-e`)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.registry import COLLECTORS

from tests.conftest import build_fixture
from tests.helpers.reference import fixture_cpu_shares
from tests.helpers.tmux import PROFTUI, Terminal

UNIT = "60000000"  # loop iterations per unit of work: ~1 s of CPU in all
WORK = {"work_a": 1, "work_b": 2, "work_c": 3, "work_d": 4}
TOLERANCE = 3.0  # percentage points, as issue 17's diff test
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def coloured_screen(term: Terminal) -> list[str]:
    """The screen's lines with their SGR escapes and trailing cells (capture-pane -e -N)."""
    return subprocess.run(["tmux", "capture-pane", "-e", "-N", "-p", "-t", term.name],
                          capture_output=True, text=True).stdout.splitlines()


def backgrounds(line: str) -> list[tuple[str, int]]:
    """Runs of one background colour on a captured line: (colour, cells)."""
    runs: list[tuple[str, int]] = []
    bg, pos = "default", 0
    for match in SGR.finditer(line + "\x1b[m"):
        text = line[pos:match.start()]
        if text:
            if runs and runs[-1][0] == bg:
                runs[-1] = (bg, runs[-1][1] + len(text))
            else:
                runs.append((bg, len(text)))
        pos = match.end()
        codes = match.group(1).split(";") if match.group(1) else ["0"]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in ("0", "", "49"):
                bg = "default"
            elif code == "48" and i + 1 < len(codes):
                n = 5 if codes[i + 1] == "5" else 3
                bg = ";".join(codes[i:i + n])
                i += n - 1
            elif code.isdigit() and (40 <= int(code) <= 47 or 100 <= int(code) <= 107):
                bg = code
            i += 1
    return runs


def frame_line(lines: list[str], name: str) -> str:
    found = [line for line in lines if re.search(rf"\b{name}\b", SGR.sub("", line))
             and "total" not in SGR.sub("", line)]
    assert found, "\n".join(SGR.sub("", line) for line in lines)
    return found[0]


def test_flame_pane_navigate_zoom_search_in_a_terminal(terminal: list[Terminal],
                                                       tmp_path: Path) -> None:
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    binary = build_fixture("diff_work.c", ["-O2", "-g", "-fno-omit-frame-pointer"])
    saved = tmp_path / "work.proftui"
    cpu = tmp_path / "work.cpu"  # each worker's CPU time on this run, from diff_work itself
    record = subprocess.run([str(PROFTUI), "record", "--mode", "sampler", "-o", str(saved),
                             str(binary), UNIT, str(cpu)], capture_output=True, text=True,
                            timeout=180)
    assert record.returncode == 0, record.stderr
    measured = fixture_cpu_shares(cpu)
    term = Terminal([str(PROFTUI), "open", str(saved)], tmp_path)
    terminal.append(term)
    term.wait_for("Self%", "work_d", "1 Flat")
    term.key("5")
    screen = term.wait_for("work_a", "work_d", "Zoom")
    # Root at the bottom: the workers' row stands on main; all four are drawn.
    for name in WORK:
        assert name in screen, screen
    # Up from the root (all → _start → libc → libc → main) to main's widest callee.
    for _ in range(5):
        term.key("Up", settle=0.15)
    screen = term.wait_for(" work_d  total")
    status = next(line for line in screen.splitlines() if " work_d  total" in line)
    share = float(re.search(r"total [\d,]+ \(([\d.]+)%\)", status).group(1))  # type: ignore[union-attr]
    assert abs(share - measured["work_d"]) <= TOLERANCE, (status, measured)  # ~4 of 10 units
    before = backgrounds(frame_line(coloured_screen(term), "work_d"))
    # Several frames share the row (their 256-colour shades may coincide, so >= 2 runs).
    assert len([r for r in before if r[0] != "default"]) >= 2, before
    term.key("Enter")  # zoom: work_d fills the width, its callers stay as full rows
    screen = term.wait_for("zoom:")
    assert "work_c" not in screen and "work_a" not in screen, screen
    lines = coloured_screen(term)
    runs = backgrounds(frame_line(lines, "work_d"))
    width = sum(cells for _bg, cells in runs)
    assert width >= 150 and runs[0][1] >= width - 1, runs  # one frame, full width
    caller = backgrounds(frame_line(lines, "main"))  # the path to the root stays, full width
    assert caller[0][1] >= width - 1, caller
    term.key("Right")  # a lone frame has no sibling: the selection stays
    term.wait_for(" work_d  total")
    term.key("/")
    term.wait_for("search the flame graph")
    for ch in "work_b":
        term.key(ch, settle=0.05)
    term.key("Enter")
    screen = term.wait_for("/work_b:", "in matching frames")
    found = re.search(r"/work_b: ([\d.]+)% in matching frames", screen)
    assert found is not None, screen
    assert abs(float(found.group(1)) - measured["work_b"]) <= TOLERANCE, (screen, measured)
    term.key("Escape")  # zoom out: the whole width again, the other workers back
    screen = term.wait_for("work_a", "work_c")
    assert "zoom:" not in screen, screen
    term.key("q")
    term.wait_for("PROFTUI-EXIT=0")
