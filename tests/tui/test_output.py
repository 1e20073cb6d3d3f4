"""The target's output in the Process pane: live, bounded, escaped; and after quitting.

Pilot tests drive the app on a real launched collector (the target's stdout
and stderr captured by collectors/runtime/output.py); the tmux tests run the
installed `proftui` command in a real terminal, as a person would, and read
what it prints after the TUI is gone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from proftui.collectors.base import Collector, CollectorOptions
from proftui.collectors.registry import COLLECTORS
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.process import ProcPane
from proftui.tui.widgets.output_panel import HEAD_LINES, TAIL_LINES, OutputLog
from textual.pilot import Pilot

from tests.conftest import build_fixture, build_lua
from tests.helpers.tmux import PROFTUI, Terminal
from tests.helpers.tui import run_app, run_live, screen_text, wait_for

ERROR_LINE = "out_fail: cannot open 'missing.dat': No such file or directory"


def _launch_mode() -> str:
    for mode in ("sampler", "instrument", "gprof"):
        if mode in COLLECTORS:
            return mode
    pytest.skip("no launching collector is built")


def _collector(source: str, *args: str) -> Collector:
    mode = _launch_mode()
    flags = {"sampler": [], "instrument": ["-finstrument-functions"], "gprof": ["-pg"]}[mode]
    binary = build_fixture(source, ["-O2", "-g", *flags], output=f"{Path(source).stem}_{mode}")
    return COLLECTORS[mode]([str(binary), *args], CollectorOptions(output="log"))


def _log(app: ProfTuiApp) -> OutputLog:
    return app.query_one(OutputLog)


def test_failed_target_output_is_shown() -> None:
    collector = _collector("out_fail.c", "40", "300")
    collector.start()
    app = ProfTuiApp(collector=collector)
    notes: list[str] = []

    original = app.notify

    def spy(message: str, **kwargs: object) -> None:
        notes.append(message)
        original(message, **kwargs)  # type: ignore[arg-type]

    app.notify = spy  # type: ignore[method-assign]

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.ended, timeout=30, what="the target's end")
        assert any("exited with status 3" in n and "press 4 for its output" in n
                   for n in notes), notes
        await pilot.press("4")
        log = _log(app)
        await wait_for(pilot, lambda: log.finished and ERROR_LINE in log.lines,
                       what="the error line in the panel")
        pane = app.query_one(ProcPane)
        assert pane.has_class("-output-only")  # a failure opens the output full height
        lines = list(log.lines)
        assert lines[0] == "out_fail line 1" and lines[39] == "out_fail line 40"
        assert lines[-1] == ERROR_LINE
        # escape sequences shown as text, never sent; markup shown as typed
        assert r"colour \x1b[31mRED\x1b[0m and bell \x07 end" in lines
        assert "[bold red]not markup[/bold red]" in lines
        assert not any("\x1b" in line or "\x07" in line for line in lines)
        text = screen_text(app)
        assert ERROR_LINE in text and "[bold red]not markup[/bold red]" in text
        assert "exited with status 3" in text
        await pilot.press("o")  # status and output share the pane again
        await pilot.pause()
        assert not pane.has_class("-output-only")
        assert "peak RSS" in screen_text(app)
        await pilot.press("q")

    try:
        run_app(app, body)
    finally:
        collector.stop()


def test_flood_is_bounded_with_a_marker() -> None:
    """20 MB of lines: the panel keeps the first and last lines, counts the rest."""
    collector = _collector("out_flood.c", "1200000")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        log = _log(app)
        await wait_for(pilot, lambda: log.finished, timeout=60, what="the end of output")
        await pilot.pause()
        output = collector.output()
        assert output is not None and output.dropped_bytes > 0
        lines = list(log.lines)
        assert len(lines) <= HEAD_LINES + TAIL_LINES + 2
        assert lines[0] == "flood line 1"
        assert lines[HEAD_LINES - 1] == f"flood line {HEAD_LINES}"
        assert lines[-1] == "flood done" and lines[-2] == "flood line 1200000"
        markers = [line for line in lines if line.startswith("… ")]
        assert markers and all(m.endswith(" bytes not kept …") for m in markers)
        # every byte the target wrote is behind a shown line or counted in a marker
        model = log.lines_model
        expected = sum(len(f"flood line {i}\n") for i in range(1, 1200001)) + 11
        assert model.shown_bytes + model.not_kept_bytes == output.total_bytes == expected
        assert sum(gap for _text, gap in model.entries()) == model.not_kept_bytes
        pattern = re.compile(r"flood line [1-9][0-9]*|flood done")
        for i, line in enumerate(lines):  # whole lines, except pieces cut by a gap
            if not (line in markers or pattern.fullmatch(line)):
                assert lines[i - 1] in markers or lines[i + 1] in markers, line
        assert "bytes not kept" in screen_text(app) or log.scroll_y > 0
        await pilot.press("q")

    run_live(collector, body)


def test_output_shows_while_the_target_runs() -> None:
    collector = _collector("out_fail.c", "40", "20000")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        log = _log(app)
        await wait_for(pilot, lambda: "[bold red]not markup[/bold red]" in log.lines,
                       what="the output so far")
        assert collector.is_running() and not log.finished
        text = screen_text(app)
        assert "out_fail line 40" in text and "peak RSS" in text  # output below status
        assert not app.query_one(ProcPane).has_class("-output-only")
        await pilot.press("q")  # still running: proftui asks first
        await pilot.press("y")

    run_live(collector, body)


def test_no_output_says_why() -> None:
    from tests.helpers.profiles import sample_profile

    app = ProfTuiApp(profile=sample_profile())

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        await pilot.pause()
        assert "saved profile: the program's output is not part of it" in screen_text(app)
        pane = app.query_one(ProcPane)
        pane.follow_output(None, "attach")  # what the app does in attach mode
        await pilot.pause()
        assert "attached process: its output goes where it always did" in screen_text(app)
        assert pane.has_class("-no-output")

    run_app(app, body)


# -- after quitting: the tail on the terminal ---------------------------------------------

def _tmux(command: list[str], cwd: Path, terminal: list[Terminal]) -> Terminal:
    term = Terminal(command, cwd)
    terminal.append(term)
    return term


def test_tail_printed_after_quit_when_target_failed(terminal: list[Terminal],
                                                    tmp_path: Path) -> None:
    mode = _launch_mode()
    flags = {"sampler": [], "instrument": ["-finstrument-functions"], "gprof": ["-pg"]}[mode]
    binary = build_fixture("out_fail.c", ["-O2", "-g", *flags], output=f"out_fail_{mode}")
    term = _tmux([str(PROFTUI), str(binary), "40", "300"], tmp_path, terminal)
    term.wait_for("exited with status 3", timeout=60)  # the toast wraps: see the pilot test
    term.key("4")
    term.wait_for(ERROR_LINE)
    term.key("q")
    screen = term.wait_for("PROFTUI-EXIT=3")
    after = screen[screen.index("proftui: target exited with status 3"):]
    lines = after.splitlines()
    assert "last 20 lines of its output" in lines[0]
    # 43 lines written: the last 20 are lines 24-40 and the last three
    assert lines[1] == "out_fail line 24" and lines[17] == "out_fail line 40"
    assert lines[18] == r"colour \x1b[31mRED\x1b[0m and bell \x07 end"
    assert lines[20] == ERROR_LINE and lines[21] == "PROFTUI-EXIT=3"


def test_nothing_printed_after_quit_when_target_succeeded(terminal: list[Terminal],
                                                          tmp_path: Path) -> None:
    mode = _launch_mode()
    flags = {"sampler": [], "instrument": ["-finstrument-functions"], "gprof": ["-pg"]}[mode]
    binary = build_fixture("out_flood.c", ["-O2", "-g", *flags], output=f"out_flood_{mode}")
    term = _tmux([str(PROFTUI), str(binary), "50"], tmp_path, terminal)
    term.wait_for("exited with status 0", timeout=60)
    term.key("q")
    screen = term.wait_for("PROFTUI-EXIT=0")
    assert "flood" not in screen and "proftui: target" not in screen


def test_lua_missing_script_error_is_shown(terminal: list[Terminal], tmp_path: Path) -> None:
    """The real program: `proftui ./lua missing.lua` ends with Lua's own message."""
    if "sampler" not in COLLECTORS:
        pytest.skip("the sampler runtime is not built")
    lua = build_lua()
    term = _tmux([str(PROFTUI), str(lua), "missing.lua"], tmp_path, terminal)
    term.wait_for("exited with status 1", timeout=60)
    term.key("4")
    term.wait_for("cannot open missing.lua")
    term.key("q")
    screen = term.wait_for("PROFTUI-EXIT=1")
    after = screen[screen.index("proftui: target exited with status 1; its output:"):]
    assert "cannot open missing.lua" in after.splitlines()[1]


def test_stdout_and_stderr_interleave_as_written() -> None:
    """On a terminal stdout is line-buffered, so its lines and stderr's alternate as
    written (a pipe would bring stdout in blocks); the title counts every line written,
    not the ones the panel happened to read."""
    mode = _launch_mode()
    flags = {"sampler": [], "instrument": ["-finstrument-functions"], "gprof": ["-pg"]}[mode]
    binary = build_fixture("out_mixed.c", ["-O2", "-g", *flags], output=f"out_mixed_{mode}")
    pairs, bulk = 300, 60000

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("4")
        log = _log(app)
        await wait_for(pilot, lambda: log.finished, timeout=60, what="the end of output")
        await pilot.pause(0.5)
        lines = list(log.lines)
        expected = ["stdout is a terminal"] + [f"{kind} line {i}" for i in range(1, pairs + 1)
                                               for kind in ("out", "err")]
        assert lines[:HEAD_LINES] == expected[:HEAD_LINES]
        assert lines[-1] == f"bulk line {bulk}"
        total = 1 + 2 * pairs + bulk
        title = next(line for line in screen_text(app).splitlines() if "stdout+stderr" in line)
        assert f" {total:,} lines" in title, title
        assert f"first {HEAD_LINES:,} and last {TAIL_LINES:,} kept" in title, title

    run_live(COLLECTORS[mode]([str(binary), str(pairs), str(bulk)],
                              CollectorOptions(output="log")), body)
