"""collectors/model/diffviews.py and formats/diffreport.py: per-function and per-context
deltas, new/gone functions, both normalisations, metric choice, deep trees."""

from __future__ import annotations

import pytest
from proftui.collectors.formats.diffreport import render_diff_json, render_diff_text
from proftui.collectors.model.diffviews import (
    MetricError,
    common_metric,
    diff_profiles,
    path_names,
)
from proftui.collectors.model.profile import (
    ALLOC_BYTES,
    CPU_NS,
    SAMPLES,
    Frame,
    FunctionCost,
    Profile,
)

from tests.helpers.profiles import stacks_profile


def _pair() -> tuple[Profile, Profile]:
    """BASE: main>{a 10, b 20, gone 10}, main>b>leaf 10.  NEW (another build, other paths
    and addresses): main>{a 10, b 60, fresh 20}, main>b>leaf 10.  Totals 50 and 100."""
    old = [Frame("main", "/v1/prog", address=0x10), Frame("a", "/v1/prog", address=0x20),
           Frame("b", "/v1/prog", address=0x30), Frame("gone", "/v1/prog", address=0x40),
           Frame("leaf", "/usr/lib/libm.so.6", address=0x50)]
    new = [Frame("b", "/v2/prog", address=0x99), Frame("main", "/v2/prog", address=0x88),
           Frame("fresh", "/v2/prog", address=0x77), Frame("a", "/v2/prog", address=0x66),
           Frame("leaf", "/lib/x86_64-linux-gnu/libm.so.6", address=0x55)]
    base = stacks_profile(old, [([0, 1], 10.0), ([0, 2], 20.0), ([0, 3], 10.0), ([0, 2, 4], 10.0)])
    now = stacks_profile(new, [([1, 3], 10.0), ([1, 0], 60.0), ([1, 2], 20.0), ([1, 0, 4], 10.0)])
    return base, now


def test_function_deltas_in_shares_and_absolute_units() -> None:
    base, new = _pair()
    diff = diff_profiles(base, new)
    assert (diff.metric_name, diff.unit, diff.base_total, diff.new_total) == \
        ("samples", "count", 50.0, 100.0)
    rows = {d.frame.function: d for d in diff.functions}
    assert set(rows) == {"main", "a", "b", "gone", "fresh", "leaf"}
    b = rows["b"]
    assert (b.self_cost.base, b.self_cost.new, b.self_cost.delta) == (20.0, 60.0, 40.0)
    assert (b.total_cost.base, b.total_cost.new) == (30.0, 70.0)
    assert b.self_cost.base_share == 40.0 and b.self_cost.new_share == 60.0
    assert b.self_cost.points == pytest.approx(20.0) and b.self_cost.ratio == 3.0
    a = rows["a"]  # same cost, smaller share of a longer run
    assert a.self_cost.delta == 0.0 and a.self_cost.points == pytest.approx(-10.0)
    assert rows["gone"].status == "gone" and rows["gone"].self_cost.new == 0.0
    assert rows["gone"].frame.module == "/v1/prog"  # BASE's frame: NEW has none
    assert rows["fresh"].status == "new" and rows["fresh"].self_cost.ratio is None
    assert rows["leaf"].status == "both" and rows["leaf"].self_cost.delta == 0.0
    assert rows["main"].total_cost.delta == 50.0 and rows["main"].total_cost.points == 0.0
    by_share = [d.frame.function for d in diff.sorted_functions("shares")]
    # +-20 self points each; ties go to the larger total change (b's: +10), then the name
    assert by_share[:3] == ["fresh", "gone", "b"]
    by_units = [d.frame.function for d in diff.sorted_functions("absolute")]
    assert by_units[:3] == ["b", "fresh", "gone"]
    by_total = [d.frame.function for d in diff.sorted_functions("absolute", by="total")]
    assert by_total[:2] == ["main", "b"]


def test_path_deltas_list_the_contexts_that_changed() -> None:
    base, new = _pair()
    diff = diff_profiles(base, new)
    absolute = {tuple(path_names(p)): p for p in diff.sorted_paths("absolute")}
    # main changed +50 but no callee carries 90% of it, so it stays; main>a and main>b>leaf
    # did not change in samples
    assert set(absolute) == {("main",), ("main", "b"), ("main", "fresh"), ("main", "gone")}
    assert absolute[("main", "gone")].status == "gone"
    assert absolute[("main", "gone")].total_cost.delta == -10.0
    assert absolute[("main", "fresh")].status == "new"
    assert absolute[("main", "b")].total_cost.delta == 40.0
    assert path_names(diff.sorted_paths("absolute")[0]) == ["main"]
    share = [path_names(p) for p in diff.sorted_paths("shares")]
    assert share[:2] == [["main", "fresh"], ["main", "gone"]]  # +-20 points, then by name
    assert ["main"] not in share  # 100% on both sides
    assert ["main", "a"] in share  # a's share fell 10 points


def test_one_child_explains_its_ancestors() -> None:
    frames = [Frame("main", "p"), Frame("mid", "p"), Frame("hot", "p"), Frame("cold", "p")]
    base = stacks_profile(frames, [([0, 1, 2], 10.0), ([0, 3], 10.0)])
    new = stacks_profile(frames, [([0, 1, 2], 30.0), ([0, 3], 10.0), ([0, 1], 1.0)])
    paths = [path_names(p) for p in diff_profiles(base, new).sorted_paths("absolute")]
    assert paths == [["main", "mid", "hot"]]  # main and mid: hot carries 20 of 21


def _cpu_pair() -> tuple[Profile, Profile]:
    """BASE (samples, cpu_ns) and NEW (cpu_ns, samples) of one function f: 2 then 3."""
    frames = [Frame("f", "a.out")]
    return (stacks_profile(frames, [([0], 2.0)], metrics=(SAMPLES, CPU_NS)),
            stacks_profile(frames, [([0], 3.0)], metrics=(CPU_NS, SAMPLES)))


def test_metric_is_news_first_that_base_has_or_the_one_asked() -> None:
    base, new = _cpu_pair()
    assert common_metric(base, new) == "cpu_ns"
    assert diff_profiles(base, new, "samples").functions[0].self_cost.delta == 1.0


def test_a_metric_missing_from_a_side_is_an_error() -> None:
    base, new = _cpu_pair()
    with pytest.raises(MetricError, match="'bytes' is not in BASE"):
        common_metric(base, new, "bytes")
    heap = stacks_profile([Frame("f", "a.out")], [([0], 64.0)], metrics=(ALLOC_BYTES,))
    with pytest.raises(MetricError, match="share no metric"):
        diff_profiles(base, heap)


def test_collector_function_totals_are_used(tmp_path) -> None:
    """gprof-like profiles carry their own per-function totals (Profile.functions)."""
    frames = [Frame("main", "p"), Frame("f", "p")]
    base = stacks_profile(frames, [([0, 1], 4.0)])
    new = stacks_profile(frames, [([0, 1], 6.0)])
    new.functions = {0: FunctionCost([0.0], [9.0]), 1: FunctionCost([9.0], [9.0], calls=3)}
    rows = {d.frame.function: d for d in diff_profiles(base, new).functions}
    assert rows["f"].self_cost.delta == 5.0 and rows["f"].new_calls == 3


def test_deep_tree_is_iterative() -> None:
    depth = 30_000
    frames = [Frame(f"f{i}", "p") for i in range(depth)]
    base = stacks_profile(frames, [(list(range(depth)), 1.0)])
    new = stacks_profile(frames, [(list(range(depth)), 3.0)])
    diff = diff_profiles(base, new)
    paths = diff.sorted_paths("absolute")
    assert len(paths) == 1 and len(paths[0].frames) == depth
    text = render_diff_text(diff, base, new, ("b", "n"), "absolute")
    assert f"... {depth - 8} callers > f{depth - 8}" in text


def test_reports_render_both_normalisations() -> None:
    base, new = _pair()
    diff = diff_profiles(base, new)
    text = render_diff_text(diff, base, new, ("old.proftui", "new.proftui"), limit=3)
    assert "BASE: old.proftui" in text and "NEW:  new.proftui" in text
    assert "Functions (3 of 6" in text and "fresh (prog)  [new]" in text
    assert "+20.00" in text
    doc = render_diff_json(diff, base, new, ("o", "n"), "absolute", limit=None, paths=50)
    assert doc["functions_count"] == 6 and len(doc["functions"]) == 6
    gone = next(f for f in doc["functions"] if f["function"] == "gone")
    assert gone["status"] == "gone" and gone["self"]["ratio"] == 0.0
    assert gone["self"]["delta"] == -10.0 and gone["module"] == "prog"
    fresh = next(f for f in doc["functions"] if f["function"] == "fresh")
    assert fresh["self"]["ratio"] is None
    assert {tuple(p["path"]) for p in doc["paths"]} >= {("main", "gone"), ("main", "fresh")}


def test_programs_named_differently_still_match() -> None:
    """prog-v1 and prog-v2: two builds of one program; libraries still match by name."""
    old = [Frame("main", "/b/prog-v1"), Frame("work", "/b/prog-v1"),
           Frame("memcpy", "/l/libc.so.6")]
    new = [Frame("main", "/n/prog-v2"), Frame("work", "/n/prog-v2"),
           Frame("memcpy", "/x/libc.so.6")]
    base = stacks_profile(old, [([0, 1], 4.0), ([0, 1, 2], 1.0)])
    now = stacks_profile(new, [([0, 1], 8.0), ([0, 1, 2], 1.0)])
    base.meta.argv, now.meta.argv = ["./prog-v1"], ["/n/prog-v2", "-x"]
    rows = {d.frame.function: d for d in diff_profiles(base, now).functions}
    assert all(d.status == "both" for d in rows.values()) and len(rows) == 3
    assert rows["work"].self_cost.delta == 4.0 and rows["memcpy"].self_cost.delta == 0.0
    base.meta.argv = ["other"]  # not the program's name: no renaming, nothing matches
    statuses = {d.status for d in diff_profiles(base, now).functions
                if d.frame.function != "memcpy"}
    assert statuses == {"new", "gone"}


def test_header_says_when_a_side_is_not_whole() -> None:
    base, new = _pair()
    new.meta.complete, new.meta.dropped = False, 1234
    text = render_diff_text(diff_profiles(base, new), base, new, ("b", "n"))
    assert "NEW:  n (sampler profile of prog; incomplete; 1,234 records dropped)" in text
    assert "BASE: b (sampler profile of prog)\n" in text
