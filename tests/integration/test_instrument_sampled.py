"""Instrument mode's default time: a per-thread clock ticks the thread's current calling
context (csrc/hook/pt_hook_tick.c).  Calls still open are timed live, the hooks' own
cost is a row of its own, ticks in other code are named by it, wall-clock mode, threads,
and targets that fork, exec, own SIGPROF or close every descriptor."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.instrument.collector import TIMED_NOTE
from proftui.collectors.model.profile import CALLS, SAMPLES, WALL_NS

from tests.helpers import reference
from tests.helpers.costs import flat_rows, self_of
from tests.helpers.instrument import (
    build,
    calls_by_path,
    kill_after_a_look,
    open_call_seen_live,
    record,
    start_ins_open,
)

NS = 1  # metric index of the time in ns (0 is samples)


def test_calls_still_open_show_their_time_live() -> None:
    """leaf_spin computes for 3 s without calling anything instrumented: its ticks are in
    its node while it runs, so the live profile shows them (no reading of the target's
    memory), and main's total covers them.  Wall-clock ticks: the fixture's phases are
    wall time, and a shared machine gives it less CPU than that."""
    live, final = open_call_seen_live(NS, wall_clock=True)
    assert not [w for w in live.meta.warnings if "memory cannot be read" in w]
    assert final.metrics == (SAMPLES, WALL_NS)
    assert self_of(final, "leaf_spin", NS) == pytest.approx(3e9, rel=0.15)
    assert flat_rows(final)["loop_calls"].total_cost[NS] == pytest.approx(1e9, rel=0.2)


def test_a_killed_target_keeps_its_sampled_time() -> None:
    """Ticks live in the run file: a target killed mid-call keeps what it had."""
    live, final = kill_after_a_look(start_ins_open("30", "1", wall_clock=True))
    spun = self_of(live, "leaf_spin", NS)
    assert final.meta.exit_signal == signal.SIGKILL and not final.meta.complete
    assert self_of(final, "leaf_spin", NS) >= spun > 0.8e9


def test_hook_cost_is_a_row_of_its_own() -> None:
    """3 M short calls: the hooks' time is [instrumentation] under the calls it ran for,
    and a note says how much; the functions keep their exact counts."""
    profile, _ = record([build("ins_basic.c"), "300000"])
    assert calls_by_path(profile)[("main", "run", "leaf_b")] == 900000
    rows = flat_rows(profile)
    assert rows["[instrumentation]"].self_cost[0] > 0
    assert rows["[instrumentation]"].calls is None  # a cost, not a function that was called
    under = {profile.frames[node.parent.frame_id].function for node in profile.tree.nodes()
             if profile.frames[node.frame_id].function == "[instrumentation]"
             and node.parent is not None and node.parent.parent is not None}
    assert {"run", "leaf_a", "leaf_b"} & under, under
    notes = [w for w in profile.meta.warnings if "shown as [instrumentation]" in w]
    assert len(notes) == 1 and "% of the samples" in notes[0]


def test_ticks_name_the_code_they_landed_in() -> None:
    """fill() spends its time in libc's memset: a row named by it under fill, as perf
    names it; spin()'s ticks land on its loop's lines, not only its definition line."""
    binary = build("ins_libc.c")
    profile, output = record([binary, "2000"], frequency_hz=4000)
    assert output.startswith("libc ")
    memset_rows = [node for node in profile.tree.nodes()
                   if "memset" in profile.frames[node.frame_id].function]
    assert memset_rows and all(profile.frames[n.parent.frame_id].function == "fill"  # type: ignore[union-attr]
                               for n in memset_rows)
    assert sum(n.self_cost[0] for n in memset_rows) > 10
    assert flat_rows(profile)["fill"].self_cost[0] < sum(n.self_cost[0] for n in memset_rows)
    source = Path(__file__).parents[1] / "fixtures" / "ins_libc.c"
    spin_line = source.read_text().splitlines().index(
        "__attribute__((noinline)) unsigned long spin(long n)") + 1
    lines = {line for (file, line), costs in profile.line_costs.items()
             if file.endswith("ins_libc.c") and costs[0] > 0}
    assert any(line > spin_line + 1 for line in lines), lines


def test_wall_clock_ticks_sleeping_calls_too() -> None:
    """--wall: sleeper (0.4 s asleep, in libc's clock_nanosleep: a row under it) and
    spinner (0.4 s of CPU) weigh about the same; the default CPU clock gives sleeper
    almost nothing."""
    binary = build("smp_wall.c")
    wall, _ = record([binary], wall_clock=True)
    assert wall.metrics == (SAMPLES, WALL_NS)
    assert "wall" in wall.meta.clock
    rows = flat_rows(wall)
    assert rows["sleeper"].total_cost[NS] == pytest.approx(0.4e9, rel=0.25)
    assert any("nanosleep" in name for name in rows), sorted(rows)
    assert rows["spinner"].total_cost[NS] > 0.3e9
    cpu, _ = record([binary])
    assert flat_rows(cpu)["sleeper"].total_cost[NS] < 0.05e9
    assert flat_rows(cpu)["spinner"].total_cost[NS] > 0.3e9


def test_threads_are_ticked_by_their_own_cpu_time(tmp_path: Path) -> None:
    """Four threads doing 1:2:3:4 units: each one's samples follow its own CPU clock."""
    binary = build("smp_threads.c")
    report = tmp_path / "cpu"
    profile, output = record([binary, str(report)], frequency_hz=2000)
    assert output == "threads done\n"
    pid = profile.meta.pids[0]
    per_thread = sorted(tree.root.total_cost[0] for part, tree in profile.parts.items()
                        if part.startswith(f"pid {pid} tid ") and tree.root.total_cost[0] > 20)
    assert len(per_thread) == 4, profile.parts.keys()
    cpu = sorted(int(line) for line in report.read_text().split())
    for samples, spent in zip(per_thread, cpu, strict=True):
        assert abs(samples / sum(per_thread) - spent / sum(cpu)) <= 0.03, (per_thread, cpu)


@pytest.mark.parametrize("how", ["fork", "exec"])
def test_child_processes_keep_ticking(how: str) -> None:
    """A fork child re-arms its own clock in its own file; an exec'd image starts its
    own (the clocks stop before exec: a tick after it would kill the new image)."""
    binary = build("smp_robust.c")
    plain = subprocess.run([str(binary), how], capture_output=True, text=True, timeout=60)
    profile, output = record([binary, how], frequency_hz=5000)
    assert (output, profile.meta.exit_status) == (plain.stdout, plain.returncode)
    assert len(profile.meta.pids) >= 2
    children = [tree.root.total_cost[0] for part, tree in profile.parts.items()
                if part.split()[1] != str(profile.meta.pids[0])]
    assert sum(children) > 20, profile.parts.keys()  # the children's own samples


@pytest.mark.parametrize("how", ["handler", "ignore"])
def test_target_owning_sigprof_keeps_it(how: str) -> None:
    binary = build("smp_signals.c")
    plain = subprocess.run([str(binary), how], capture_output=True, text=True, timeout=60)
    profile, output = record([binary, how])
    assert (output, profile.meta.exit_status) == (plain.stdout, plain.returncode)
    assert "MISSING" not in output
    assert "SIGPROF" not in profile.meta.clock
    assert any("uses SIGPROF itself" in w for w in profile.meta.warnings)
    assert flat_rows(profile)["busy"].self_cost[0] > 50


def test_target_blocking_the_clock_is_said() -> None:
    """A target that blocks SIGPROF gets no ticks: the profile says that only a part of
    its CPU time was sampled, as the sampler does (0 everywhere and no word before)."""
    binary = build("smp_signals.c")
    profile, output = record([binary, "block"])
    assert (output, profile.meta.exit_status) == ("block: done\n", 4)
    if "SIGPROF" not in profile.meta.clock:
        pytest.skip(f"the clock does not use SIGPROF here: {profile.meta.clock}")
    assert flat_rows(profile)["busy"].calls == 1
    assert any(w.startswith("only ") and "block the sampling signal" in w
               for w in profile.meta.warnings), profile.meta.warnings


@pytest.mark.parametrize("how", ["closefds", "closerange"])
def test_target_closing_all_fds_keeps_its_clock(how: str) -> None:
    binary = build("smp_robust.c")
    profile, output = record([binary, how])
    assert (output, profile.meta.exit_status) == ("closefds done\n", 3)
    assert flat_rows(profile)["busy"].self_cost[0] > 50


def test_timed_and_count_only_say_what_they_measure() -> None:
    binary = build("ins_basic.c")
    timed, _ = record([binary, "1000"], timed=True)
    assert timed.metrics == (WALL_NS,) and TIMED_NOTE in timed.meta.warnings
    assert "[instrumentation]" not in flat_rows(timed)
    counted, _ = record([binary, "1000"], count_only=True)
    assert counted.metrics == (CALLS,) and "count only" in counted.meta.clock
    assert calls_by_path(timed) == calls_by_path(counted)


def test_program_shares_leave_the_hooks_out() -> None:
    """The reader the perf comparisons use: out of 100 without [instrumentation]."""
    profile, _ = record([build("ins_libc.c"), "500"])
    shares = reference.proftui_program_shares(profile)
    assert "[instrumentation]" not in shares
    assert sum(shares.values()) == pytest.approx(100.0)


def test_notes_name_functions_shorter_than_their_hooks() -> None:
    """ins_tiny: 20 M calls of a one-instruction function from one loop.  The notes name
    it, with the compiler option that drops its hooks; the loop and main (one call each)
    are not named."""
    from proftui.collectors.instrument.short_calls import _source_name

    profile, _ = record([build("ins_tiny.c"), "20000000"])
    note = next((w for w in profile.meta.warnings if "shorter than their hooks" in w), "")
    assert "tiny (20,000,000 calls" in note, profile.meta.warnings
    assert "-finstrument-functions-exclude-function-list=tiny " in note
    assert "run_tiny" not in note and "main" not in note
    assert _source_name("std::vector<int, A<B> > ns::Tally<int, 3>::add(int, char)") == \
        "ns::Tally::add"
