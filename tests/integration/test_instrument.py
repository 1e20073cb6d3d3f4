"""Instrument mode end to end: exact counts per calling context, output and exit
status untouched, sampled time (the default), --timed, count-only, clock fallback,
deep recursion, threads."""

from __future__ import annotations

import re
import subprocess

import pytest
from proftui.collectors.instrument.hook_profile import (
    SHORT_CALL_ERRORS,
    calibration_error_ns,
    short_call_warning,
)
from proftui.collectors.model.calltree import CallNode
from proftui.collectors.model.profile import CPU_NS, SAMPLES, WALL_NS, Frame, Profile, ProfileMeta
from proftui.collectors.model.views import flat_profile

from tests.helpers.instrument import build, calls_by_path, record

BASIC = {  # ins_basic.c with n = 1000
    ("main",): 1,
    ("main", "run"): 1,
    ("main", "run", "leaf_a"): 2000,
    ("main", "run", "mid"): 1000,
    ("main", "run", "mid", "leaf_a"): 1000,
    ("main", "run", "leaf_b"): 3000,
}


def test_exact_calls_per_context() -> None:
    binary = build("ins_basic.c")
    plain = subprocess.run([str(binary), "1000", "3"], capture_output=True, text=True)
    profile, output = record([binary, "1000", "3"])
    assert output == plain.stdout == "ins_basic n=1000\n"
    assert profile.meta.exit_status == plain.returncode == 3
    assert profile.meta.exit_signal is None
    assert calls_by_path(profile) == BASIC
    assert profile.meta.complete and profile.meta.dropped == 0
    assert profile.metrics == (SAMPLES, CPU_NS)  # the default: time sampled per context
    # Times: every caller's total covers its callees; the run is main's, the hooks' own
    # cost and the code before main aside (rows at the root).
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["run"].total_cost[0] >= flat["leaf_a"].total_cost[0] + flat["leaf_b"].total_cost[0]
    roots = {profile.frames[c.frame_id].function: c.total_cost[0]
             for c in profile.tree.root.children.values()}
    assert sum(roots.values()) == pytest.approx(profile.total(), rel=1e-9)
    assert set(roots) - {"main"} <= {"[instrumentation]", "[uninstrumented code]"}, roots
    # Caller -> callee arcs with exact counts.
    ids = {profile.frames[i].function: i for i in range(len(profile.frames))}
    assert profile.arcs[(ids["run"], ids["leaf_a"])] == 2000
    assert profile.arcs[(ids["mid"], ids["leaf_a"])] == 1000


def test_times_follow_the_work_done() -> None:
    # leaf_a runs 50 iterations, leaf_b 20: per call, leaf_a costs more.  Wall
    # time on a shared machine can be hit by preemption: one of 3 runs must show it.
    seen = []
    for _ in range(3):
        profile, _ = record([build("ins_basic.c"), "3000"], timed=True)
        flat = {e.frame.function: e for e in flat_profile(profile)}
        a, b = flat["leaf_a"].self_cost[0] / 9000, flat["leaf_b"].self_cost[0] / 9000
        seen.append((round(a, 1), round(b, 1)))
        if a > 1.5 * b > 0:
            return
    pytest.fail(f"leaf_a vs leaf_b ns per call: {seen}")


@pytest.mark.parametrize("clock", ["tsc", "monotonic"])
def test_a_call_body_is_timed_in_full(clock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """ins_chain.c does the same multiply chain as 2 M calls of step20 (80 cycles each) and
    inline in one loop, and times the inline phase itself (no calls in it, so no hooks).
    An unordered rdtsc let the out-of-order core finish step20's chain under the exit
    hook's own work: proftui said chain_call took 10 ms and step20 2 ms of the 77 ms
    both phases take (CLOCK_MONOTONIC in the uninstrumented build: 77.3 and 77.3 ms).

    That direction is held tight with the TSC clock (the body is all there); with the
    vDSO clock the notes must say how uncertain the body is.  The other one depends on the
    machine: when it is shared the hooks cost more than their calibration at start
    (2.2-3.3x the truth for this 20 ns function beside a busy suite): this test checks
    that a calibration was made and applied (the clock line gives it); the arithmetic of
    the compensation is tests/unit/test_wire_hook.py's."""
    if clock == "monotonic":
        monkeypatch.setenv("PROFTUI_CLOCK", "monotonic")
    binary = build("ins_chain.c")
    calls = 2_000_000
    profile, output = record([binary, str(calls)], timed=True)
    own = float(output.split("chain_inline ")[1]) * 1e9
    flat = {e.frame.function: e for e in flat_profile(profile)}
    called, inline = flat["chain_call"].total_cost[0], flat["chain_inline"].total_cost[0]
    step = flat["step20"].total_cost[0]
    print(f"{clock}: chain_call {called / 1e6:.1f} ms, step20 {step / 1e6:.1f} ms, "
          f"chain_inline {inline / 1e6:.1f} ms (its own clock {own / 1e6:.1f} ms); "
          f"{profile.meta.clock}")
    assert inline == pytest.approx(own, rel=0.15)
    assert flat["step20"].calls == calls
    match = re.search(r"compensated \(([0-9.]+) ns inside, ([0-9.]+) ns in caller",
                      profile.meta.clock)
    assert match and float(match[1]) + float(match[2]) > 0, profile.meta.clock
    if clock == "tsc":
        # The body is not hidden (the bug left 3% of it).  Beside two busy loops the
        # start's calibration may subtract a little more than the hooks then cost:
        # step20 came out at 0.745 of its time once, so the bound is below that.
        assert called >= 0.8 * own and step >= 0.6 * own
    else:
        # vDSO clock reads: the pair's calibrated ~100 ns moves 7-13% between runs, so a
        # 20 ns body comes out at 0.4-1.6x.  Where step20 measures under the notes'
        # threshold they name it, with an error per call that covers the miss.  Beside
        # busy loops the hooks cost more than calibrated and step20 may measure above
        # it (35.5 ns a call against a 34.5 ns threshold, once): then no note, as
        # test_functions_too_short_to_time_are_named_in_the_notes checks for `tiny`.
        note = next((w for w in profile.meta.warnings if "below what the hooks" in w), "")
        pair = float(match[1]) + float(match[2])
        short_ns = SHORT_CALL_ERRORS * calibration_error_ns(profile.meta.clock, pair)
        if abs(step / calls - short_ns) > 0.5:  # the clock line rounds the pair to 0.1 ns
            assert bool(note) == (step / calls < short_ns), (step / calls, short_ns, note)
        if note:
            assert note.startswith("step20 averages under"), profile.meta.warnings
            error = float(re.search(r"error of about ([0-9]+) ns a call", note)[1])
            assert error >= 5 and abs(step - own) <= 3 * error * calls, (error, note)
    # chain_call holds step20 and its own loop; the loop's 1-2 ms are within the
    # compensation's spread (a few ns a call, times 2 M calls): at least equal.
    assert step <= called


def test_functions_too_short_to_time_are_named_in_the_notes() -> None:
    """20 M calls of a ~1 ns function: the compensation's ~1 ns error per call is a
    large share of the run, and the notes say which function and how much.  The note is
    given when the function measures under 5 ns a call; on a shared machine the hooks
    cost more than calibrated and `tiny` may measure more (9-50 ns beside a busy suite),
    so each run checks that the note and the measurement agree, and the note itself is
    checked on the profile of a run that measured under 5 ns (built here if none did)."""
    for _ in range(2):
        profile, output = record([build("ins_tiny.c"), "20000000"], timed=True)
        assert output.startswith("tiny ")
        tiny = next(e for e in flat_profile(profile) if e.frame.function == "tiny")
        assert tiny.calls == 20_000_000
        notes = [w for w in profile.meta.warnings if "below what the hooks can time" in w]
        short = tiny.self_cost[0] / 20e6 < 5.0
        assert bool(notes) == short, (tiny.self_cost[0] / 20e6, notes)
        if short:
            break
    else:  # every run measured tiny above 5 ns: the note on what a quiet machine measures
        notes = [w for w in [short_call_warning(_quiet_tiny_profile())] if w]
    assert len(notes) == 1 and notes[0].startswith("tiny averages under 5 ns"), notes
    assert "20.0 M calls" in notes[0] and "--mode sampler" in notes[0]


def _quiet_tiny_profile() -> Profile:
    """What ins_tiny measures on a quiet machine: main -> run_tiny (20 ms of its own) ->
    tiny (20 M calls, 1 ns each), timed."""
    profile = Profile(ProfileMeta(mode="instrument"), (WALL_NS,))
    ids = [profile.frames.intern(Frame(name, "/bin/ins_tiny"))
           for name in ("main", "run_tiny", "tiny")]
    tree = profile.tree
    tree.add_stack(ids[:2], [20e6])
    tree.add_stack(ids, [20e6])
    for node, calls in zip(range(1, 4), (1, 1, 20_000_000), strict=True):
        tree.calls[node] = calls
    return profile.finalize()


def test_count_only_counts_calls_without_time() -> None:
    profile, _ = record([build("ins_basic.c"), "1000"], count_only=True)
    assert calls_by_path(profile) == BASIC
    assert [m.name for m in profile.metrics] == ["calls"]
    assert "count only" in profile.meta.clock
    # The metric is the call count itself: self cost of leaf_b = its calls.
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["leaf_b"].self_cost[0] == 3000


def test_monotonic_clock_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFTUI_CLOCK", "monotonic")
    profile, _ = record([build("ins_basic.c"), "300"], timed=True)
    assert profile.meta.clock.startswith("CLOCK_MONOTONIC")
    paths = calls_by_path(profile)
    assert paths[("main", "run", "leaf_b")] == 900
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["run"].total_cost[0] > 0


def test_recursion_100000_deep() -> None:
    profile, output = record([build("ins_recurse.c"), "100000"])
    assert output == "levels 100000 even 1\n"
    main = next(iter(profile.tree.root.children.values()))
    assert profile.frames[main.frame_id].function == "main"
    # Follow the chain of `down` without recursion in Python.
    depth, node = 0, main
    while True:
        downs = [c for c in node.children.values() if profile.frames[c.frame_id].function == "down"]
        if not downs:
            break
        assert len(downs) == 1 and downs[0].calls == 1
        node, depth = downs[0], depth + 1
    assert depth == 100000

    def calls(node: CallNode) -> list[CallNode]:
        """The children that are calls: a clock tick in the hooks themselves adds an
        [instrumentation] child anywhere, and one in the dynamic linker a child named by
        its code (the innermost call's return makes the first call of the exit hook,
        bound lazily then; ld.so's `do_lookup_x` came as a child in 1 of 8 runs)."""
        return [c for c in node.children.values()
                if profile.frames[c.frame_id].function != "[instrumentation]"
                and not profile.frames[c.frame_id].module.rsplit("/", 1)[-1].startswith("ld-")]

    assert not calls(node)  # the innermost call is a leaf
    # Mutual recursion keeps alternating contexts: even -> odd -> ... (11 levels).
    names = []
    node = next(c for c in main.children.values()
                if profile.frames[c.frame_id].function == "is_even")
    while node is not None:
        names.append(profile.frames[node.frame_id].function)
        node = next(iter(calls(node)), None)
    assert names == ["is_even", "is_odd"] * 5 + ["is_even"]
    assert profile.meta.dropped == 0


def test_threads_have_their_own_trees() -> None:
    profile, output = record([build("ins_threads.c")])
    assert output == "threads done\n"
    for label in profile.parts:
        paths = calls_by_path(profile, label)
        if ("worker",) not in paths:
            assert paths == {("main",): 1, ("main", "work"): 7}
    # 8 threads, each calling work (i + 1) * 100 times in its own tree.
    assert len(profile.parts) == 9
    assert sorted(calls_by_path(profile, label).get(("worker", "work"), 0)
                  for label in profile.parts) == [0] + [100 * i for i in range(1, 9)]
    assert calls_by_path(profile)[("worker", "work")] == 3600
    assert {f"worker-{i}" for i in range(8)} <= set(profile.meta.threads.values())


def test_functions_4_gib_apart_are_counted_apart() -> None:
    """A bucket lane keys a context by the low half of the function's address; the fast
    path counted a function 4 GiB from a known one (a library mapped far from the
    program) as that one: leaf had 1003 calls here, the other none."""
    profile, output = record([build("ins_fnhi.c"), "1000"])
    assert output.startswith("fnhi 2")
    calls = calls_by_path(profile)
    assert calls[("main", "leaf")] == 3
    assert sorted(calls.values()) == [1, 3, 1000], calls
