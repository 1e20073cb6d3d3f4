from __future__ import annotations

from proftui.collectors.model.profile import SAMPLES, CallTree, Frame, Profile, ProfileMeta
from proftui.collectors.model.views import (
    bottom_up_tree,
    callee_tree,
    callees,
    caller_tree,
    callers,
    flat_profile,
)

from tests.helpers.profiles import frame_id, sample_profile


def names(profile: Profile, ids: list[int]) -> list[str]:
    return [profile.frames[i].function for i in ids]


def test_totals_are_self_plus_children() -> None:
    profile = sample_profile()
    assert profile.total() == 105
    main = next(iter(profile.tree.root.children.values()))
    assert main.total_cost == [105] and main.self_cost == [10]


def test_flat_profile_counts_recursion_once() -> None:
    profile = sample_profile()
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["leaf"].self_cost == (90,) and flat["leaf"].total_cost == (90,)
    assert flat["rec"].self_cost == (5,) and flat["rec"].total_cost == (5,)
    assert flat["main"].total_percent == 100.0
    assert round(flat["leaf"].self_percent, 3) == round(100 * 90 / 105, 3)
    assert next(e.frame.function for e in flat_profile(profile)) == "leaf"


def test_callers_with_their_costs() -> None:
    profile = sample_profile()
    leaf = frame_id(profile, "leaf")
    assert [(profile.frames[n.frame_id].function, n.cost) for n in callers(profile, leaf)] == [
        ("a", (60,)), ("b", (30,))]


def test_callees() -> None:
    profile = sample_profile()
    main = frame_id(profile, "main")
    assert names(profile, [n.frame_id for n in callees(profile, main)]) == ["a", "b", "rec"]


def test_focus_trees() -> None:
    profile = sample_profile()
    leaf = frame_id(profile, "leaf")
    up = caller_tree(profile, leaf)
    top = next(iter(up.root.children.values()))
    assert profile.frames[top.frame_id].function == "leaf" and top.total_cost == [90]
    assert sorted(names(profile, list(top.children))) == ["a", "b"]
    rec = frame_id(profile, "rec")
    down = callee_tree(profile, rec)
    assert down.root.total_cost == [5]  # recursion merged once, not three times


def test_bottom_up_tree_keeps_the_total() -> None:
    profile = sample_profile()
    inverted = bottom_up_tree(profile)
    assert inverted.root.total_cost == [105]


def test_deep_tree_is_iterative() -> None:
    profile = Profile(ProfileMeta(mode="instrument"), (SAMPLES,))
    f = profile.frames.intern(Frame("deep"))
    profile.tree.add_stack([f] * 100_000, [1])
    profile.finalize()
    assert profile.total() == 1
    assert flat_profile(profile)[0].total_cost == (1,)
    assert callee_tree(profile, f).root.total_cost == [1]


def test_merging_into_a_copy_leaves_the_original() -> None:
    profile = sample_profile()
    doubled = profile.tree.copy()
    doubled.add_tree(0, profile.tree)
    doubled.finalize()
    assert doubled.root.total_cost == [210]
    assert isinstance(doubled, CallTree) and profile.total() == 105


def test_inlined_and_out_of_line_copies_are_one_function() -> None:
    """`mid` runs out of line under main and inlined into `other`: one flat row, two tree nodes."""
    profile = Profile(ProfileMeta(mode="test"), (SAMPLES,))
    main = profile.frames.intern(Frame("main", "/bin/p", address=0x10))
    other = profile.frames.intern(Frame("other", "/bin/p", address=0x40))
    mid_inlined = profile.frames.intern(Frame("mid", "/bin/p", inlined=True))
    mid = profile.frames.intern(Frame("mid", "/bin/p", address=0x80))
    profile.tree.add_stack([main, other, mid_inlined], [3.0])
    profile.tree.add_stack([main, mid], [5.0])
    profile.tree.add_stack([main, mid, other, mid_inlined], [2.0])  # recursion through other
    profile.finalize()
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert rows["mid"].frame_id == mid and not rows["mid"].frame.inlined
    assert rows["mid"].self_cost == (10.0,)
    assert rows["mid"].total_cost == (10.0,)  # the recursive copy counted once
    assert len([e for e in flat_profile(profile) if e.frame.function == "mid"]) == 1
    assert {n.frame_id for n in profile.tree.nodes() if profile.frames[n.frame_id].function
            == "mid"} == {mid, mid_inlined}
    focused = caller_tree(profile, mid_inlined)
    assert sorted(profile.frames[c.frame_id].function for c in focused.root.children.values()
                  ) == ["mid"]
    assert sum(c.total_cost[0] for c in focused.root.children.values()) == 10.0
    assert {r.frame_id for r in callers(profile, mid)} == {main, other}
