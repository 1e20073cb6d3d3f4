"""A fleet answer built into a profile without a server: trees, parts and costs from
rows of stack hashes, and frames read once by hash (collectors/fleet/answer.py)."""

from __future__ import annotations

from proftui.collectors.fleet.answer import Answer, profile_of
from proftui.collectors.fleet.batch import metric_spec
from proftui.collectors.fleet.url import parse
from proftui.collectors.model.profile import CPU_NS, SAMPLES, CallTree, Profile
from proftui.collectors.model.views import flat_profile

from tests.helpers.fleet import tree_paths

SPEC = metric_spec((SAMPLES, CPU_NS), False)
MAIN, WORK, SPIN = 11, 12, 13  # frame hashes
FRAMES = {h: (name, "/bin/app", "b1", "app.c", line, 0x1000 + line, name, 0)
          for h, name, line in ((MAIN, "main", 3), (WORK, "work", 7), (SPIN, "spin", 9))}
NO_SITE = ("", -1, -1, "", 0)


def _answer(frames: dict[int, tuple]) -> Answer:
    stacks = {100: (100, [MAIN, WORK], *NO_SITE), 200: (200, [MAIN, WORK, SPIN], *NO_SITE)}
    rows = [(SPEC, 100, (1, ""), [3.0, 30.0], 0), (SPEC, 200, (1, ""), [1.0, 10.0], 0),
            (SPEC, 200, (2, ""), [4.0, 40.0], 0)]
    labels = {1: (["host", "program", "pid"], ["web1", "app", "5"]),
              2: (["host", "program", "pid"], ["web2", "app", "6"])}
    minutes = [(1, "", 0, [4.0, 40.0]), (2, "", 0, [4.0, 40.0])]
    return Answer(rows, stacks, frames, labels, minutes, 0, 60, False, 0.01,
                  {"samples": 0, "cpu_ns": 1})


def _paths(profile: Profile, tree: CallTree) -> dict[tuple[str, ...], float]:
    """Samples per calling context of `tree`, by function names."""
    return {tuple(frame.function for frame in key): values[0]
            for key, values in tree_paths(profile, tree).items()}


def test_rows_become_the_tree_and_a_part_per_session() -> None:
    profile = profile_of(_answer(FRAMES), parse("clickhouse://h/db"))
    assert _paths(profile, profile.tree) == {("main", "work"): 3.0,
                                            ("main", "work", "spin"): 5.0}
    assert profile.total(0) == 8.0 and profile.total(1) == 80.0
    assert {label: _paths(profile, tree) for label, tree in profile.parts.items()} == {
        "web1 app pid 5": {("main", "work"): 3.0, ("main", "work", "spin"): 1.0},
        "web2 app pid 6": {("main", "work", "spin"): 4.0}}
    flat = {row.frame.function: (row.self_cost[1], row.total_cost[1])
            for row in flat_profile(profile)}
    assert flat == {"main": (0.0, 80.0), "work": (30.0, 80.0), "spin": (50.0, 50.0)}
    assert not any("not found" in w for w in profile.meta.warnings)


def test_by_host_merges_and_a_missing_frame_is_said() -> None:
    frames = {h: row for h, row in FRAMES.items() if h != SPIN}
    profile = profile_of(_answer(frames), parse("clickhouse://h/db?by=host"))
    assert sorted(profile.parts) == ["host=web1", "host=web2"]
    assert _paths(profile, profile.tree) == {("main", "work"): 3.0,
                                            ("main", "work", "[unknown stack]"): 5.0}
    assert ("some frames of the stacks were not found in the stacks table: they show as "
            "[unknown stack]") in profile.meta.warnings


def test_calls_go_to_the_merged_tree_and_to_each_part() -> None:
    spec = metric_spec((SAMPLES,), True)
    rows = [(spec, 200, (1, ""), [1.0], 3), (spec, 200, (2, ""), [4.0], 5),
            (spec, 100, (2, ""), [2.0], 0)]
    answer = _answer(FRAMES)
    answer = Answer(rows, answer.stacks, FRAMES, answer.labels, [], 0, 60, False, 0.01,
                    {"samples": 0})
    profile = profile_of(answer, parse("clickhouse://h/db"))

    def calls(tree: CallTree) -> dict[tuple[str, ...], int | None]:
        return {tuple(profile.frames[f].function for f in tree.path(n)): tree.calls_at(n)
                for n in tree.preorder() if n}

    assert calls(profile.tree)[("main", "work", "spin")] == 8
    assert calls(profile.parts["web1 app pid 5"])[("main", "work", "spin")] == 3
    assert calls(profile.parts["web2 app pid 6"])[("main", "work", "spin")] == 5
    assert calls(profile.parts["web2 app pid 6"])[("main", "work")] is None


def test_what_runs_lost_is_said_for_the_answers_sessions_and_hosts() -> None:
    answer = _answer(FRAMES)
    agent = (["host", "mode"], ["web2", "agent"])
    losses = [(1, *answer.labels[1], 7.0),  # a session of the answer
              (50, *agent, 40.0), (51, *agent, 2.0),  # web2's agent, two runs
              (60, ["host", "mode"], ["db9", "agent"], 99.0),  # a host the answer lacks
              (70, ["host", "program", "mode"], ["web1", "other", "sampler"], 5.0)]
    answer = Answer(answer.rows, answer.stacks, FRAMES, answer.labels, answer.minutes, 0, 60,
                    False, 0.01, answer.place, 0, losses)
    notes = profile_of(answer, parse("clickhouse://h/db")).meta.warnings
    lost = [n for n in notes if "lost" in n]
    assert lost == [
        "7 samples (or records) of these runs were lost in this window before they were "
        "counted (their buffers were full): the costs shown are short by that many",
        "the agent on web2 lost 42 samples in this window (its rings were full, or they "
        "came after their process's last push): each process of that host may be short by "
        "up to that many"]
    assert not any("lost" in n for n in profile_of(_answer(FRAMES),
                                                   parse("clickhouse://h/db")).meta.warnings)
