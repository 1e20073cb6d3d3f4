"""The part model behind the per-thread view, on hand-built profiles: listing and
naming parts, processes merged from their threads, parts missing from a snapshot,
and threads (processes) as roots."""

from __future__ import annotations

import pytest
from proftui.collectors.model.parts import describe_part, list_parts, parse_label, part_total
from proftui.collectors.model.profile import Frame
from proftui.collectors.model.views import (
    bottom_up_tree,
    flat_profile,
    group_part,
    is_group_frame,
    select_tree,
    threads_as_roots,
)

from tests.helpers.profiles import parts_profile, two_processes


def test_labels_parse() -> None:
    assert parse_label("pid 12 tid 13") == (12, 13)
    assert parse_label("pid 12") == (12, None)
    assert parse_label("thread 12") == (None, None)


def test_list_parts_orders_by_share() -> None:
    choices = list_parts(two_processes())
    assert [(c.kind, c.label) for c in choices] == [
        ("all", None), ("process", "pid 20"), ("process", "pid 10"),
        ("thread", "pid 20 tid 20"), ("thread", "pid 10 tid 11"), ("thread", "pid 10 tid 10")]
    assert [c.cost[0] for c in choices] == [100.0, 60.0, 40.0, 60.0, 30.0, 10.0]


def test_parts_are_titled_by_their_names() -> None:
    choices = list_parts(two_processes())
    assert choices[4].title() == "thread 11 worker"
    assert choices[2].title() == "process 10 prog"


def test_one_process_has_no_process_row() -> None:
    profile = parts_profile({"pid 5 tid 5": [(["main"], 1.0)], "pid 5 tid 6": [(["w"], 3.0)]},
                    {5: "p", 6: "w"})
    assert [c.kind for c in list_parts(profile)] == ["all", "thread", "thread"]


def test_process_tree_merges_its_threads() -> None:
    profile = two_processes()
    tree = select_tree(profile, "pid 10")
    assert tree.root.total_cost == [40.0]
    assert select_tree(profile, "pid 10") is tree  # cached for this snapshot
    assert {profile.frames[n.frame_id].function for n in tree.root.children.values()} == {
        "main", "start"}


def test_views_of_one_part() -> None:
    profile = two_processes()
    flat = {e.frame.function: e.self_percent for e in flat_profile(profile, "pid 10")}
    assert flat == {"b": 75.0, "a": 25.0, "main": 0.0, "start": 0.0}
    assert part_total(profile, "pid 10 tid 11") == 30.0
    assert [n.frame_id for n in bottom_up_tree(profile, "pid 10 tid 11").root.children.values()
            ] == [profile.frames.find(Frame("b", module="/bin/x", address=0x1001))]


def test_part_missing_from_a_snapshot_stays_an_empty_choice() -> None:
    profile = two_processes()
    gone = "pid 10 tid 99"  # chosen in an earlier snapshot, e.g. before a reset
    assert select_tree(profile, gone).root.total_cost == [0.0]
    assert flat_profile(profile, gone) == []
    kept = [c for c in list_parts(profile, keep=(gone,)) if c.label == gone]
    assert len(kept) == 1 and kept[0].cost == (0.0,) and kept[0].tid == 99
    assert describe_part(profile, gone).title() == "thread 99"


def test_threads_as_roots_groups_processes_then_threads() -> None:
    profile = two_processes()
    derived, tree = threads_as_roots(profile)
    tops = {derived.frames[n.frame_id].function: n for n in tree.root.children.values()}
    assert set(tops) == {"process 10 prog", "process 20 child"}
    assert tops["process 10 prog"].total_cost == [40.0]
    threads = {derived.frames[n.frame_id].function: n.total_cost[0]
               for n in tops["process 10 prog"].children.values()}
    assert threads == {"thread 10 prog": 10.0, "thread 11 worker": 30.0}
    assert tree.root.total_cost == profile.tree.root.total_cost
    frame = derived.frames[next(iter(tops["process 20 child"].children))]
    assert is_group_frame(frame) and group_part(frame) == "pid 20 tid 20"
    assert not any(is_group_frame(f) for f in profile.frames)  # the original is untouched
    # Below a thread row: that thread's own tree, parent links and all.
    worker = next(n for n in tops["process 10 prog"].children.values()
                  if group_part(derived.frames[n.frame_id]) == "pid 10 tid 11")
    leaf = next(iter(next(iter(worker.children.values())).children.values()))
    assert derived.frames[leaf.frame_id].function == "b" and leaf.parent.parent == worker


def test_threads_as_roots_of_one_process_inverted() -> None:
    profile = two_processes()
    derived, tree = threads_as_roots(profile, "pid 10", inverted=True)
    tops = {derived.frames[n.frame_id].function: n for n in tree.root.children.values()}
    assert set(tops) == {"thread 10 prog", "thread 11 worker"}
    leaves = [derived.frames[c].function for c in tops["thread 11 worker"].children]
    assert leaves == ["b"]  # bottom-up: the leaf first


def test_threads_as_roots_of_one_thread() -> None:
    profile = two_processes()
    _derived, one = threads_as_roots(profile, "pid 20 tid 20")
    assert len(one.root.children) == 1 and one.root.total_cost == [60.0]


def test_whole_process_parts_are_roots() -> None:
    """gprof and perf script imports record one part per process ("pid P")."""
    profile = parts_profile({"pid 1": [(["main", "x"], 2.0)], "pid 2": [(["main", "y"], 6.0)]},
                    {})
    choices = list_parts(profile)
    assert [(c.kind, c.label) for c in choices] == [("all", None), ("process", "pid 2"),
                                                    ("process", "pid 1")]
    derived, tree = threads_as_roots(profile)
    assert sorted(derived.frames[n.frame_id].function for n in tree.root.children.values()
                  ) == ["process 1", "process 2"]
    single = parts_profile({"pid 7": [(["main"], 1.0)]}, {7: "prog"})
    derived, tree = threads_as_roots(single)
    assert [derived.frames[n.frame_id].function for n in tree.root.children.values()
            ] == ["process 7 prog"]


def test_parts_labelled_in_no_known_form() -> None:
    """A saved file may label parts freely: they are listed and become roots too."""
    profile = parts_profile({"pid 5 tid 5": [(["main"], 1.0)], "pid 5 tid 6": [(["w"], 3.0)],
                     "gpu queue \x1b[31m": [(["kernel"], 2.0)]}, {5: "p", 6: "w"})
    choices = list_parts(profile)
    assert [c.kind for c in choices] == ["all", "thread", "thread", "other"]
    assert choices[-1].title() == "part gpu queue \x1b[31m"
    derived, tree = threads_as_roots(profile)
    names = [derived.frames[n.frame_id].function for n in tree.root.children.values()]
    assert sorted(names) == ["part gpu queue \x1b[31m", "thread 5 p", "thread 6 w"]
    derived, tree = threads_as_roots(profile, "gpu queue \x1b[31m")
    assert [derived.frames[n.frame_id].function for n in tree.root.children.values()] == [
        "part gpu queue \x1b[31m"]
    assert tree.root.total_cost == [2.0]
    assert describe_part(profile, "gpu queue \x1b[31m").kind == "other"


def test_header_share_of_part() -> None:
    profile = two_processes()
    info = describe_part(profile, "pid 10 tid 11")
    assert info.cost == (30.0,) and info.title() == "thread 11 worker"
    assert part_total(profile, None) == pytest.approx(100.0)
