"""The diff views on real profiles: `open NEW --base BASE` (flat Δ columns, tree Δ,
shares/absolute), the live mark (`b`, `B`, `x`) on a running sampler target, and the
same in a real terminal.

The fixture (tests/fixtures/dft_work.c) is built twice: BASE does 6:3:1:1 units of
work in dft_a, dft_b, dft_c, dft_old; NEW doubles dft_a's and has dft_new instead of
dft_old.  Both binaries are named alike, as two builds of one program are (frames
match by function and module base name).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model.profile import CallNode, Profile
from proftui.collectors.model.views import flat_profile
from proftui.collectors.registry import COLLECTORS
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.tree import CallTreeView, NodeData
from proftui.tui.widgets.flat_table import FlatTable
from proftui.tui.widgets.status_line import StatusLine
from textual.pilot import Pilot
from textual.widgets.tree import TreeNode

from tests.conftest import build_fixture
from tests.helpers.tmux import PROFTUI, Terminal
from tests.helpers.tui import SIZE, flat_ready, run, run_app, run_live, screen_text, wait_for

FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]
ROUNDS = "1500"


def _binary(times: int, where: Path) -> Path:
    """dft_work built with dft_a's work times `times`, copied to where/dft_work."""
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    built = build_fixture("dft_work.c", [*FLAGS, f"-DA_TIMES={times}"])
    where.mkdir(parents=True, exist_ok=True)
    target = where / "dft_work"
    shutil.copy2(built, target)
    return target


def _record(binary: Path, out: Path) -> Path:
    """Record `binary`; its own CPU clocks go to OUT.clocks (`_own_share`)."""
    clocks = out.with_suffix(".clocks")
    done = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "--mode",
                           "sampler", "-o", str(out), str(binary), ROUNDS, "0", str(clocks)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def _own_share(recorded: Path) -> float:
    """dft_a's share (points) of the run's work by the fixture's own CPU clock."""
    spent = dict(line.split() for line in recorded.with_suffix(".clocks").read_text().split("\n")
                 if line)
    return 100 * int(spent["dft_a"]) / (int(spent["dft_a"]) + int(spent["others"]))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(BASE, NEW) .proftui files recorded by the sampler."""
    root = tmp_path_factory.mktemp("diff")
    base = _record(_binary(1, root / "v1"), root / "base.proftui")
    new = _record(_binary(2, root / "v2"), root / "new.proftui")
    return base, new


def _shares(profile: Profile, metric: int = 0) -> dict[str, tuple[float, float]]:
    """Function name -> (self %, total %) of the whole, computed without the diff code."""
    whole = profile.total(metric)
    return {e.frame.function: (100 * e.self_cost[metric] / whole,
                               100 * e.total_cost[metric] / whole)
            for e in flat_profile(profile)}


def _costs(profile: Profile, metric: int = 0) -> dict[str, tuple[float, float]]:
    return {e.frame.function: (e.self_cost[metric], e.total_cost[metric])
            for e in flat_profile(profile)}


def _node(profile: Profile, *names: str) -> CallNode | None:
    """The node at the end of the first path through `names` (a suffix of the stack)."""
    for node in profile.tree.nodes():
        path = [profile.frames[f].function for f in node.path()]
        if path[-len(names):] == list(names):
            return node
    return None


def test_open_with_a_base_shows_deltas(saved: tuple[Path, Path]) -> None:
    base_path, new_path = saved
    base, new = load_any(base_path), load_any(new_path)
    app = ProfTuiApp(profile=new, base=base, base_name="base.proftui")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = app.query_one(FlatPane)
        await wait_for(pilot, lambda: flat.changes is not None and flat.shown,
                       what="Δ columns")
        m = app.metric
        header = screen_text(app).splitlines()[0]
        assert "Δ vs base.proftui (shares)" in header, header
        # Sorted by |Δself| first: dft_a, which doubled, leads.
        assert flat.sort_key == "dself" and flat.shown[0].frame.function == "dft_a"
        new_s, base_s = _shares(new, m), _shares(base, m)
        by_name = {e.frame.function: e for e in flat.shown}
        for name in ("dft_a", "dft_b", "dft_c"):
            change = flat.changes[by_name[name].frame_id]
            assert change.self_delta == pytest.approx(new_s[name][0] - base_s[name][0])
            assert change.total_delta == pytest.approx(new_s[name][1] - base_s[name][1])
            assert change.status == ""
        # Against the fixture's own CPU clocks (about 6/11 to 12/17 of the work): within
        # 4 standard errors of two sampled shares, at least 3 points.
        grew = flat.changes[by_name["dft_a"].frame_id].self_delta
        truth = _own_share(new_path) - _own_share(base_path)
        p1, p0 = new_s["dft_a"][0] / 100, base_s["dft_a"][0] / 100
        error = 100 * math.sqrt(p1 * (1 - p1) / new.total(0) + p0 * (1 - p0) / base.total(0))
        assert abs(grew - truth) < max(3.0, 4 * error), (grew, truth, error)
        # dft_old is BASE's only: a row with no cost, "gone"; dft_new is "new".
        gone, fresh = by_name["dft_old"], by_name["dft_new"]
        assert gone.total_cost[m] == 0
        assert flat.changes[gone.frame_id].status == "gone"
        assert flat.changes[gone.frame_id].self_delta == pytest.approx(-base_s["dft_old"][0])
        assert flat.changes[fresh.frame_id].status == "new"
        text = screen_text(app)
        row = next(line for line in text.splitlines() if " dft_a " in line)
        assert f"{new_s['dft_a'][0] - base_s['dft_a'][0]:+.1f}" in row, row
        assert any("dft_old gone" in line for line in text.splitlines()), text
        table = app.query_one(FlatTable)
        assert "ΔSelf pt" in text and table.normalise == "shares"

        # The tree: main -> dft_a's Δ, on the aligned baseline's same path.
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending and tree.root.children, what="tree")
        await pilot.press("h")
        new_node, base_node = _node(new, "main", "dft_a"), _node(base, "main", "dft_a")
        assert new_node is not None and base_node is not None
        # (the same float operations as the pane's, so that rounding cannot differ)
        expected = (100.0 * new_node.total_cost[m] / new.total(m)
                    - 100.0 * base_node.total_cost[m] / base.total(m))
        await wait_for(pilot, lambda: f"Δ{expected:+.1f}" in screen_text(app),
                       what=f"tree Δ{expected:+.1f} of dft_a")
        # Bottom-up (u): dft_a's root row carries the same change.
        await pilot.press("u")
        await wait_for(pilot, lambda: tree.view == "bottom-up" and not tree.pending,
                       what="bottom-up")
        line = next(line for line in screen_text(app).splitlines() if " dft_a " in line)
        assert f"Δ{new_s['dft_a'][1] - base_s['dft_a'][1]:+.1f}" in line, line

        # `a`: absolute units, in the header, the flat columns and the tree.
        await pilot.press("a")
        await wait_for(pilot, lambda: "(absolute)" in screen_text(app).splitlines()[0],
                       what="absolute header")
        new_c, base_c = _costs(new, m), _costs(base, m)
        step = new_c["dft_a"][1] - base_c["dft_a"][1]
        assert step > 0
        line = next(line for line in screen_text(app).splitlines() if " dft_a " in line)
        assert f"Δ+{step:,.0f}" in line, line
        await pilot.press("1")
        await wait_for(pilot, lambda: table.normalise == "absolute", what="flat absolute")
        row = next(line for line in screen_text(app).splitlines() if " dft_a " in line)
        cells = row.split()
        assert cells[4] == f"+{new_c['dft_a'][0] - base_c['dft_a'][0]:,.0f}", row
        assert "ΔSelf pt" not in screen_text(app)
        # `B` with --base: the Δ columns off, then on again.
        await pilot.press("B")
        await wait_for(pilot, lambda: flat.changes is None, what="Δ hidden")
        assert "hidden (B)" in screen_text(app).splitlines()[0]
        assert flat.sort_key == "self"  # the sort the Δ sort replaced
        await pilot.press("B")
        await wait_for(pilot, lambda: flat.changes is not None, what="Δ shown again")

    run_app(app, body)


def test_mark_keys_on_a_saved_profile_say_why(saved: tuple[Path, Path]) -> None:
    app = ProfTuiApp(profile=load_any(saved[1]))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.query_one(FlatPane).shown, what="flat rows")
        await pilot.press("b")
        await pilot.pause()
        assert "during a live run" in app.query_one(StatusLine).note
        await pilot.press("B")
        await pilot.pause()
        assert "--base" in app.query_one(StatusLine).note
        assert app.baseline is None and app.query_one(FlatPane).changes is None

    run_app(app, body)


def test_live_mark_shows_the_phase_since_it(tmp_path: Path) -> None:
    from proftui.collectors.sampler.collector import SamplerCollector

    binary = _binary(1, tmp_path / "v1")
    # Phase one (6:3:1:1), then a phase as long in which only dft_c runs.
    collector = SamplerCollector([str(binary), "3000", "1"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        # Enough samples that the phase before the mark has dft_c's share of
        # phase one (~9%), not the noise of a few.
        await wait_for(pilot, lambda: app.profile is not None
                       and app.profile.total(app.profile.metric_index("samples"))
                       > 300, timeout=60, what="samples")
        await pilot.press("b")
        await wait_for(pilot, lambda: "mark at" in screen_text(app).splitlines()[0],
                       what="mark in the header")
        mark = app._mark
        assert mark is not None and app.baseline is None  # whole view: no Δ yet
        await pilot.press("B")
        await wait_for(pilot, lambda: app.baseline is not None
                       and app.query_one(FlatPane).changes is not None,
                       what="since-the-mark views")
        assert "since mark at" in screen_text(app).splitlines()[0]
        assert "Δ vs before it (shares)" in screen_text(app).splitlines()[0]
        await wait_for(pilot, lambda: app.ended, timeout=90, what="target exit")
        await wait_for(pilot, lambda: app._whole is app.final_profile()
                       and app.profile is not app._whole, what="final since view")
        m = app.metric
        whole, since = app._whole, app.profile
        assert since.total(m) < whole.total(m)
        # Counters only grow: the phase since the mark and the mark add up.
        assert since.total(m) + mark.total(m) == pytest.approx(whole.total(m))
        flat = app.query_one(FlatPane)
        changes = {e.frame.function: flat.changes[e.frame_id] for e in flat.shown}
        # After the mark dft_c dominates (phase two is all dft_c): it grew.
        assert changes["dft_c"].self_delta > 20, changes["dft_c"]
        assert changes["dft_a"].self_delta < 0
        since_s, mark_s = _shares(since, m), _shares(mark, m)
        assert changes["dft_c"].self_delta == pytest.approx(
            since_s["dft_c"][0] - mark_s["dft_c"][0])
        # `B` back to the whole profile, `x` clears the mark.
        await pilot.press("B")
        await wait_for(pilot, lambda: app.profile is app._whole and app.baseline is None,
                       what="whole profile again")
        await pilot.press("x")
        await pilot.pause()
        assert app._mark is None and "mark" not in screen_text(app).splitlines()[0]

    run_live(collector, body)


def test_mark_takes_a_fresh_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`b` marks the profile as it is when pressed, not the last snapshot shown (QA: with
    paced snapshots a mark at 1.2 s held only the first 0.15 s of samples)."""
    import proftui.tui.poller as poller_module
    from proftui.collectors.sampler.collector import SamplerCollector

    binary = _binary(1, tmp_path / "v1")
    monkeypatch.setattr(poller_module, "POLL_INTERVAL_S", 30.0)  # shown snapshots go stale
    collector = SamplerCollector([str(binary), "3000", "1"], CollectorOptions(output="log"))

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: app.profile is not None, timeout=60,
                       what="the first snapshot")
        stale = app.profile
        assert stale is not None
        m = stale.metric_index("samples")
        await pilot.pause(1.5)  # the target runs on; no new snapshot is taken
        assert app.profile is stale
        await pilot.press("b")
        await wait_for(pilot, lambda: app._mark is not None, timeout=30, what="mark")
        mark = app._mark
        assert mark is not None
        # ~1.5 s more of samples than the stale snapshot (1000 Hz default rate)
        assert mark.total(m) > stale.total(m) + 300, (mark.total(m), stale.total(m))
        assert "mark at" in screen_text(app).splitlines()[0]

    run_live(collector, body)


def test_open_base_in_a_terminal(terminal: list[Terminal], saved: tuple[Path, Path],
                                 tmp_path: Path) -> None:
    base_path, new_path = saved
    new, base = load_any(new_path), load_any(base_path)
    term = Terminal([str(PROFTUI), "open", str(new_path), "--base", str(base_path)], tmp_path)
    terminal.append(term)
    # Every row drawn (a loaded machine can capture the table half drawn).
    screen = term.wait_for("ΔSelf pt", " dft_a ", " dft_b ", " dft_c ", "dft_old gone",
                           "Δ vs base.proftui (shares)")
    new_s, base_s = _shares(new), _shares(base)
    # Table rows only (the status line names the selected function too).
    rows = {line.split()[-2]: line.split() for line in screen.splitlines()
            if re.search(r" dft_(a|b|c) ", line) and len(line.split()) == 8}
    for name in ("dft_a", "dft_b", "dft_c"):
        cells = rows[name]  # Self% Self Total% Total ΔSelf ΔTotal Function Module
        assert cells[4] == f"{new_s[name][0] - base_s[name][0]:+.1f}", cells
        assert cells[5] == f"{new_s[name][1] - base_s[name][1]:+.1f}", cells
    first = next(line for line in screen.splitlines() if "dft_" in line)
    assert "dft_a" in first, screen  # sorted by |Δ|
    assert any("dft_old gone" in line for line in screen.splitlines()), screen
    term.key("a")
    screen = term.wait_for("(absolute)")
    new_c, base_c = _costs(new), _costs(base)
    row = next(line.split() for line in screen.splitlines()
               if " dft_a " in line and len(line.split()) == 8)
    assert row[4] == f"+{new_c['dft_a'][0] - base_c['dft_a'][0]:,.0f}", row
    term.key("q")
    term.wait_for("PROFTUI-EXIT=0")


def test_open_bad_base_is_one_line(saved: tuple[Path, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.proftui"
    bad.write_text("not a profile\n")
    for base in (bad, tmp_path / "missing.proftui"):
        done = subprocess.run([sys.executable, "-m", "proftui.tui.cli", "open",
                               str(saved[1]), "--base", str(base)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("proftui: --base: "), done.stderr


@pytest.mark.parametrize("width", [80, 110, 160])
def test_delta_columns_leave_room_for_the_name(width: int) -> None:
    """With the Δ columns on, numbers still give way to the function name first."""
    from proftui.collectors.model.diffviews import FunctionChange
    from proftui.tui.widgets.flat_table import COLUMNS, DSELF, DTOTAL, MODULE, NAME

    table = FlatTable()
    table.has_calls = False
    plain = table._widths(width)
    table.changes = {0: FunctionChange(1.0, 1.0, "")}
    widths = table._widths(width)
    assert sum(widths) == width - 1 and len(widths) == len(COLUMNS)
    assert widths[DSELF] >= 7 and widths[DTOTAL] >= 7  # "+100.0" and a space
    assert plain[DSELF] == plain[DTOTAL] == 0
    assert widths[NAME] >= (20 if width == 80 else 44), widths
    assert widths[MODULE] > 0


def test_narrow_terminal_header_keeps_what_matters(saved: tuple[Path, Path]) -> None:
    """At 80x24 with a baseline: the header drops the pid, elapsed time and a zero drop
    count before the sample count or the Δ mode; no column header is cut mid-word; wider
    again, everything is back."""
    base, new = (load_any(p) for p in saved)
    app = ProfTuiApp(profile=new, base=base, base_name="base.proftui")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await flat_ready(pilot, app)
        lines = screen_text(app).splitlines()
        header, columns = lines[0], next(line for line in lines if "Self%" in line)
        samples = f"{new.total(0):,.0f} samples"
        assert "Δ vs base.proftui (shares)" in header and samples in header, header
        assert "pid" not in header and "dropped" not in header, header
        words = columns.split()
        assert words[-1] in ("Module", "Function") and "ΔSelf▼" in words, words
        await pilot.resize_terminal(160, 24)
        await wait_for(pilot, lambda: "dropped" in screen_text(app).splitlines()[0],
                       what="the whole header")
        header = screen_text(app).splitlines()[0]
        assert f"pid {new.meta.pids[0]}" in header and samples in header, header
        assert "ΔSelf pt▼" in screen_text(app)

    run_app(app, body, (80, 24))


def test_tree_shows_gone_call_paths_under_their_caller(saved: tuple[Path, Path]) -> None:
    """main -> dft_old is BASE's only: a "gone" row under main with minus BASE's share as
    its Δ, after NEW's rows, which keep their numbers; Enter on it says what it is."""
    base, new = (load_any(p) for p in saved)
    app = ProfTuiApp(profile=new, base=base, base_name="base.proftui")
    plain = ProfTuiApp(profile=new)

    def node_of(tree: CallTreeView, name: str) -> TreeNode[NodeData] | None:
        """The first row called `name`."""
        assert tree.view_profile is not None
        stack = list(tree.root.children)
        while stack:
            node = stack.pop()
            if node.data is not None and node.data.call is not None and \
                    tree.view_profile.frames[node.data.call.frame_id].function == name:
                return node
            stack.extend(node.children)
        return None

    def rows_of(tree: CallTreeView, name: str) -> list[str]:
        """The rows under the first row called `name`, as text."""
        node = node_of(tree, name)
        return [str(c.label) for c in node.children] if node is not None else []

    async def tree_of(app: ProfTuiApp, pilot) -> CallTreeView:  # type: ignore[no-untyped-def]
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending and node_of(tree, "main") is not None,
                       what="main's row")
        # The trunk opens itself down to main unless main's caller has a second callee
        # (CI: one sample of 1,818 in ld.so's lazy binder beside main): open main here.
        main = node_of(tree, "main")
        assert main is not None
        main.expand()
        await wait_for(pilot, lambda: bool(rows_of(tree, "main")), what="main's callees")
        return tree

    async def body() -> None:
        async with plain.run_test(size=SIZE) as pilot:
            before = rows_of(await tree_of(plain, pilot), "main")
        async with app.run_test(size=SIZE) as pilot:
            tree = await tree_of(app, pilot)
            rows = rows_of(tree, "main")
            # BASE-only paths come after NEW's rows; besides dft_old, a stray sample of
            # BASE's (one in printf, seen in CI) may make one more.
            kept = [r for r in rows if not re.search(r"Δ\S+ gone ", r)]
            assert rows[:len(kept)] == kept, rows
            gone = [r for r in rows if "gone dft_old" in r]
            assert len(gone) == 1, rows
            base_main = _node(base, "main", "dft_old")
            assert base_main is not None and _node(new, "main", "dft_old") is None
            m = app.metric
            expected = -100.0 * base_main.total_cost[m] / base.total(m)
            assert f"Δ{expected:+.1f}" in gone[0], gone[0]
            # NEW's rows: the same numbers as without a baseline (the Δ cell aside).
            strip = re.compile(r"(?<= ) *Δ( new|\S+) ")
            assert [strip.sub("", r) for r in kept] == before, (rows, before)
            # Enter on the gone row: a notice, nothing else moves.
            main = node_of(tree, "main")
            assert main is not None
            node = next(c for c in main.children if "gone dft_old" in str(c.label))
            tree.move_to(node)
            await pilot.press("enter")
            await pilot.pause()
            assert app.nav[-1].pane == "tree"
            assert tree.selected_frame() is None

    run(body)
