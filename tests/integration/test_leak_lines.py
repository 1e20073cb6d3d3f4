"""The leak summary against valgrind on the same binaries (issue 27): each stack that
leaked, with the line of every call on it, as valgrind's loss records give them: each
caller on the line of its call, not of its definition, and each allocation of one
function a record of its own."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_fixture

CLI = [sys.executable, "-m", "proftui.tui.cli"]
FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"]
ALLOCATORS = ("malloc", "calloc", "realloc")

Stack = tuple[str, ...]  # "function (file:line)", innermost first, down to main


def valgrind_leaks(binary: Path) -> dict[Stack, tuple[int, int]]:
    """(bytes, blocks) per stack of every block live at exit (loss records of one stack
    as written, whatever their kind or call instruction, added up)."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed")
    run = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=all",
                          "--num-callers=20", str(binary)], capture_output=True, text=True,
                         timeout=300)
    out: dict[Stack, tuple[int, int]] = {}
    for record in re.split(r"\n==\d+== \n", run.stderr):
        head = re.search(r"([\d,]+) bytes in ([\d,]+) blocks are .* in loss record", record)
        if head is None:
            continue
        frames = re.findall(r"(?:at|by) 0x[0-9A-F]+: (\S+) \(([^)]*)\)", record)
        stack = tuple(f"{fn} ({where})" for fn, where in frames if fn not in ALLOCATORS)
        bytes_, blocks = (int(g.replace(",", "")) for g in head.groups())
        old = out.get(stack, (0, 0))
        out[stack] = (old[0] + bytes_, old[1] + blocks)
    return out


def proftui_leaks(binary: Path) -> dict[Stack, tuple[int, int]]:
    """The same from `proftui --mode heap --text`'s leak summary, cut after main."""
    run = subprocess.run([*CLI, "--mode", "heap", "--text", str(binary)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    summary = run.stdout[run.stdout.index("Leak summary"):]
    out: dict[Stack, tuple[int, int]] = {}
    for record in summary.split("\n\n"):
        head = re.search(r"([\d,]+) bytes in ([\d,]+) blocks? leaked, stack", record)
        if head is None:
            continue
        stack: list[str] = []
        for fn, where in re.findall(r"^    (?:at|by) (\S+) \(([^)]*)\)$", record, re.M):
            stack.append(f"{fn} ({where})")
            if fn == "main":
                break
        bytes_, blocks = (int(g.replace(",", "")) for g in head.groups())
        old = out.get(tuple(stack), (0, 0))
        out[tuple(stack)] = (old[0] + bytes_, old[1] + blocks)
    return out


@pytest.mark.parametrize("source", ["leak_lines.c", "hv_sites.c"])
def test_leaks_agree_with_valgrind(source: str) -> None:
    binary = build_fixture(source, FLAGS, output=f"{Path(source).stem}_leaks")
    theirs = valgrind_leaks(binary)
    assert len(theirs) >= 2, theirs
    ours = proftui_leaks(binary)
    assert ours == theirs


def test_a_saved_profile_keeps_the_leak_stacks(tmp_path: Path) -> None:
    binary = build_fixture("leak_lines.c", FLAGS, output="leak_lines_leaks")
    saved = tmp_path / "leaks.proftui"
    record = subprocess.run([*CLI, "record", "--mode", "heap", "-o", str(saved), str(binary)],
                            capture_output=True, text=True, timeout=300)
    assert record.returncode == 0, record.stderr
    report = subprocess.run([*CLI, "report", str(saved)], capture_output=True, text=True,
                            timeout=300)
    summary = report.stdout[report.stdout.index("Leak summary"):]
    assert "from 6 allocation stacks" in summary
    assert "    by main (leak_lines.c:20)" in summary and "    at main (leak_lines.c:21)" in summary
