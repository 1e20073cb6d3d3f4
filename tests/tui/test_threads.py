"""The per-thread view on tests/fixtures/thr_ratio.c: four named threads doing 1:2:3:4
units of work in thr_spin_1..4, and main a little in thr_main_work.

Shares are checked against the fixture's own CPU time per thread
(CLOCK_THREAD_CPUTIME_ID, written to a report file), which stays right on a loaded
machine; the 1:2:3:4 split itself is checked more loosely (the threads compete for
2 cores with other work, which can change the cost of an iteration a little).
Runs: the sampler live in the app and saved then opened, and attach mode.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.model.parts import PartInfo, list_parts
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import threads_as_roots
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.source import SourcePane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.screens.threads import ThreadsScreen
from textual.pilot import Pilot

from tests.conftest import build_fixture
from tests.helpers.collect import attach
from tests.helpers.profiles import two_processes
from tests.helpers.thr_ratio import FLAGS, WORKERS, Report, read_report, sampler_run
from tests.helpers.tui import (
    choose_thread,
    flat_ready,
    run_app,
    screen_ready,
    screen_text,
    wait_for,
)

SPIN = {f"worker-{i}": f"thr_spin_{i}" for i in range(1, 5)}
SAMPLED_TOLERANCE = 0.03  # sampled share vs measured CPU share, absolute
NOMINAL_TOLERANCE = 0.08  # measured CPU share vs 1:2:3:4, absolute


def sampled_shares(costs: dict[int, float], report: Report) -> dict[str, float]:
    """Each worker's share of the workers' total, from cost by tid."""
    mine = {w: costs.get(report.threads[w][0], 0.0) for w in WORKERS}
    total = sum(mine.values())
    assert total > 0, costs
    return {w: value / total for w, value in mine.items()}


def check_shares(costs: dict[int, float], report: Report, samples: float = 0) -> None:
    """Sampled shares agree with the measured CPU time, and that with 1:2:3:4.  With
    `samples` (those taken), the bound is at least 4 standard errors of each share: a
    loaded machine leaves an attach few samples."""
    sampled, measured = sampled_shares(costs, report), report.measured_shares()
    for units, worker in enumerate(WORKERS, 1):
        share = measured[worker]
        bound = max(SAMPLED_TOLERANCE,
                    4 * math.sqrt(share * (1 - share) / samples) if samples else 0)
        assert abs(sampled[worker] - share) <= bound, (sampled, measured, samples)
        assert abs(measured[worker] - units / 10) <= NOMINAL_TOLERANCE, measured


def thread_costs(choices: list[PartInfo], metric: int = 0) -> dict[int, float]:
    return {c.tid: c.cost[metric] for c in choices if c.kind == "thread" and c.tid is not None}


def flat_names(app: ProfTuiApp) -> list[str]:
    """The flat profile's functions (as given to the pane, shown or not), costliest first."""
    return [e.frame.function for e in app.query_one(FlatPane).entries]


def root_rows(tree: CallTreeView) -> list[tuple[str, float]]:
    """(label, share of the whole) of the tree's top rows."""
    rows = []
    assert tree.view_profile is not None
    for node in tree.root.children:
        if node.data is None or node.data.call is None:
            continue
        frame = tree.view_profile.frames[node.data.call.frame_id]
        rows.append((frame.function, node.data.call.total_cost[0] / node.data.whole))
    return rows


def test_thread_views_on_a_saved_profile(thr_ratio: tuple[Profile, Report]) -> None:
    profile, report = thr_ratio
    tids = {name: tid for name, (tid, _ns) in report.threads.items()}

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        assert set(SPIN.values()) <= set(flat_names(app))
        # The picker: All, then main and the 4 workers by share (one process: no
        # process row), each with its name and tid.
        await pilot.press("t")
        await wait_for(pilot, lambda: screen_ready(app, ThreadsScreen), what="picker")
        screen = app.screen
        assert isinstance(screen, ThreadsScreen)
        kinds = [c.kind for c in screen.choices]
        assert kinds[0] == "all" and kinds.count("thread") >= 5, kinds
        threads = [c for c in screen.choices if c.kind == "thread"]
        assert {c.tid for c in threads} >= set(tids.values()), (threads, tids)
        assert [c.name for c in threads[:4]] == list(reversed(WORKERS)), threads
        costs = [c.cost[0] for c in threads]
        assert costs == sorted(costs, reverse=True)
        check_shares(thread_costs(screen.choices), report)
        text = screen_text(app)
        for name in WORKERS:
            assert f"thread {tids[name]}" in text and name in text, text
        await pilot.press("escape")  # cancel: nothing changes
        await wait_for(pilot, lambda: not isinstance(app.screen, ThreadsScreen),
                       what="picker closed")
        assert app.part is None

        # One thread: the flat profile, header and tree follow.
        chosen = await choose_thread(pilot, app, "worker-3")
        assert app.part == chosen.label == f"pid {profile.meta.pids[0]} tid {tids['worker-3']}"
        await wait_for(pilot, lambda: flat.shown and flat.shown[0].frame.function
                       == "thr_spin_3", what="worker-3's flat profile")
        names = set(flat_names(app))
        assert not names & {"thr_spin_1", "thr_spin_2", "thr_spin_4", "thr_main_work"}, names
        assert flat.shown[0].self_percent > 90
        header = screen_text(app).splitlines()[0]
        assert f"thread {tids['worker-3']} worker-3" in header, header
        assert f"in thread {tids['worker-3']} worker-3" in screen_text(app)
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await pilot.press("h")
        await wait_for(pilot, lambda: "thr_spin_3" in screen_text(app), what="hot path")
        assert "thr_spin_4" not in screen_text(app)
        await pilot.press("u")  # bottom-up of the thread: its leaf first
        await wait_for(pilot, lambda: not tree.pending and tree.view == "bottom-up"
                       and root_rows(tree)[:1] and root_rows(tree)[0][0] == "thr_spin_3",
                       what="bottom-up of worker-3")
        await pilot.press("escape")  # back to top-down; the thread stays chosen
        await wait_for(pilot, lambda: tree.view == "top-down", what="back")
        assert app.part == chosen.label
        # Focus on a function (callers and callees) within the thread.
        await pilot.press("1")
        await wait_for(pilot, lambda: flat.shown and flat.shown[0].frame.function
                       == "thr_spin_3", what="flat pane")
        await pilot.press("enter")
        await wait_for(pilot, lambda: tree.view == "focus" and not tree.pending,
                       what="focus on thr_spin_3")
        callers = next(n for n in tree.root.children if n.data and n.data.key == "callers")
        assert callers.data.whole == pytest.approx(chosen.cost[0])  # this thread's only
        assert callers.children[0].data.key.function == "thr_spin_3"
        assert "worker" in [c.data.key.function for c in callers.children[0].children
                            if c.data and c.data.call]  # its caller
        await pilot.press("escape", "escape")  # back to the top-down tree
        await wait_for(pilot, lambda: app.nav[-1].pane == "tree"
                       and tree.view == "top-down", what="top-down again")

        # Threads as roots, all threads: one root per thread with its share.
        await choose_thread(pilot, app, None)
        assert app.part is None
        await wait_for(pilot, lambda: "thr_spin_1" in flat_names(app), what="all threads")
        await pilot.press("T")
        await wait_for(pilot, lambda: not tree.pending and len(root_rows(tree)) >= 5,
                       what="threads as roots")
        rows = root_rows(tree)
        assert all(label.startswith("thread ") for label, _ in rows), rows
        by_tid = {int(label.split()[1]): share for label, share in rows}
        check_shares(by_tid, report)
        assert sum(by_tid.values()) == pytest.approx(1.0)
        assert f"thread {tids['worker-4']} worker-4" in screen_text(app)
        # Enter on a thread row shows that thread only.
        row = next(n for n in tree.root.children if n.data is not None and n.data.call
                   is not None and tree.view_profile.frames[n.data.call.frame_id].function
                   == f"thread {tids['worker-2']} worker-2")
        tree.move_to(row)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.part is not None and app.part.endswith(
            f"tid {tids['worker-2']}"), what="thread chosen from its row")
        await wait_for(pilot, lambda: not tree.pending and len(root_rows(tree)) == 1,
                       what="one root")
        await pilot.press("T")  # off: the thread's own tree
        await wait_for(pilot, lambda: not tree.pending and root_rows(tree)
                       and not root_rows(tree)[0][0].startswith("thread "),
                       what="thread's tree")
        # The source pane says its line costs are of all threads.
        await pilot.press("1")
        await wait_for(pilot, lambda: flat.shown and flat.shown[0].frame.function
                       == "thr_spin_2", what="worker-2's flat profile")
        await pilot.press("3")
        source = app.query_one(SourcePane)
        await wait_for(pilot, lambda: source.listing is not None
                       and "line costs of all threads" in screen_text(app),
                       what="source note")
        # Esc walks back the trail with the thread kept; at its start, all threads.
        while len(app.nav) > 1:
            await pilot.press("escape")
            assert app.part is not None and app.part.endswith(f"tid {tids['worker-2']}")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.part is None and "thr_spin_4" in flat_names(app),
                       what="zoomed out to all threads")
        assert "worker-2" not in screen_text(app).splitlines()[0]

    run_app(ProfTuiApp(profile=profile), body)


def test_part_model_on_a_sampled_profile(thr_ratio: tuple[Profile, Report]) -> None:
    profile, report = thr_ratio
    choices = list_parts(profile)
    check_shares(thread_costs(choices), report)
    derived, tree = threads_as_roots(profile)
    roots = {derived.frames[n.frame_id].function: n.total_cost[0]
             for n in tree.root.children.values()}
    by_tid = {int(label.split()[1]): cost for label, cost in roots.items()}
    assert by_tid == thread_costs(choices)
    assert tree.root.total_cost == profile.tree.root.total_cost


def test_live_sampler_thread_filter_survives_snapshots(tmp_path: Path) -> None:
    """Chosen while the target runs; kept through snapshots to the end; a thread that
    ended stays in the picker."""
    collector, report_path = sampler_run(tmp_path, "300000000")
    collector.start()
    try:
        app = ProfTuiApp(collector=collector)

        def named_threads() -> set[str]:
            if app.profile is None:
                return set()
            return {c.name for c in list_parts(app.profile) if c.kind == "thread"}

        async def body(pilot: Pilot, app: ProfTuiApp) -> None:
            await wait_for(pilot, lambda: set(WORKERS) <= named_threads(), timeout=30,
                           what="the four workers sampled")
            chosen = await choose_thread(pilot, app, "worker-4")
            flat = app.query_one(FlatPane)
            await wait_for(pilot, lambda: flat.shown and flat.shown[0].frame.function
                           == "thr_spin_4", what="worker-4's flat profile")
            first = app.profile
            # (or the target ended before the choice: then its final profile is shown)
            await wait_for(pilot, lambda: app.profile is not first or app.ended,
                           what="next snapshot")
            assert app.part == chosen.label
            assert not {"thr_spin_1", "thr_spin_2", "thr_spin_3"} & set(flat_names(app))
            await wait_for(pilot, lambda: app.ended, timeout=90, what="target exit")
            await pilot.pause()
            assert app.part == chosen.label
            assert flat_names(app)[0] == "thr_spin_4"
            header = screen_text(app).splitlines()[0]
            assert "exited with status 0" in header and "worker-4" in header, header
            await pilot.press("t")
            await wait_for(pilot, lambda: screen_ready(app, ThreadsScreen),
                           what="picker")
            screen = app.screen
            assert isinstance(screen, ThreadsScreen)
            assert {c.name for c in screen.choices} >= set(WORKERS)  # ended, still there
            check_shares(thread_costs(screen.choices), read_report(report_path))
            await pilot.press("escape")

        run_app(app, body)
    finally:
        collector.stop()


def test_attach_thread_shares(tmp_path: Path) -> None:
    binary = build_fixture("thr_ratio.c", [*FLAGS, "-fno-omit-frame-pointer"])
    report_path = tmp_path / "report.txt"
    proc = subprocess.Popen([str(binary), str(report_path), "100000000", "wait"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    collector = None
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == f"ready {proc.pid}\n"
        collector = attach(proc.pid, frequency_hz=1000)
        proc.stdin.write("go\n")
        proc.stdin.close()
        profile = collector.wait()
        assert proc.wait(timeout=60) == 0
        report = read_report(report_path)
        choices = list_parts(profile)
        assert {c.name for c in choices} >= set(WORKERS), choices
        # CPU time: ptrace samples are weighted by the CPU time they stand for
        check_shares(thread_costs(choices, profile.metric_index("cpu_ns")), report,
                     profile.total(0))
        _derived, tree = threads_as_roots(profile)
        assert len(tree.root.children) >= 4
    finally:
        if collector is not None:
            collector.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_processes_in_the_thread_views() -> None:
    """Two processes (a program and its child): a process row in the picker merges its
    threads; threads as roots puts each process first, its threads below."""
    profile = two_processes()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        await pilot.press("t")
        await wait_for(pilot, lambda: screen_ready(app, ThreadsScreen), what="picker")
        assert "process 10" in screen_text(app) and "child" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        await choose_thread(pilot, app, "prog")  # the first "prog" row: process 10
        assert app.part == "pid 10"
        await wait_for(pilot, lambda: {e.frame.function for e in flat.entries} == {
            "main", "a", "start", "b"}, what="process 10's functions")
        assert {e.frame.function: e.self_percent for e in flat.entries}["b"] == 75.0
        assert "process 10 prog 40.0%" in screen_text(app).splitlines()[0]
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending and {r[0] for r in root_rows(tree)}
                       == {"main", "start"}, what="process 10's merged tree")
        await pilot.press("escape", "escape")  # trail start: all threads again
        await wait_for(pilot, lambda: app.part is None, what="all threads")
        await pilot.press("2", "T")
        await wait_for(pilot, lambda: not tree.pending and len(root_rows(tree)) == 2
                       and root_rows(tree)[0][0] == "process 20 child",
                       what="process roots")
        assert root_rows(tree)[0][1] == pytest.approx(0.6)
        await pilot.press("h")  # hot path: process 20 -> its thread -> main -> c
        await wait_for(pilot, lambda: "thread 20 child" in screen_text(app), what="hot")

    run_app(ProfTuiApp(profile=profile), body)
