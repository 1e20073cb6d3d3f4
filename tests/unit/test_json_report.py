"""The JSON report's format (README, "The JSON report"): one tree node a line, no
indentation, closing brackets at the end of a subtree's last line; what the depth cut
left out said in `meta`; `--by process` rows and roots; the text report's names."""

from __future__ import annotations

import io
import json

from proftui.collectors.formats.export import export_bytes
from proftui.collectors.formats.export.json_report import (
    JSON_TREE_MAX_DEPTH,
    render_json,
    write_json,
)
from proftui.collectors.formats.export.text import render_text
from proftui.collectors.model.profile import SAMPLES, CallTree, Frame, Profile, ProfileMeta

from tests.helpers.profiles import distinct_deep_stacks, sample_profile, two_processes


def tree_lines(profile: Profile, by: str = "all") -> list[str]:
    out = io.StringIO()
    write_json(profile, out, by)
    text = out.getvalue()
    return text[text.index('"tree": [') + len('"tree": ['):].splitlines()[1:-2]


def test_tree_is_one_node_a_line_without_indentation() -> None:
    """The format, pinned: children costliest first, a subtree's closing brackets on its
    last line, a comma opening each later sibling."""
    node = ('{{"function": "{}", "module": "/bin/prog", "self": {{"samples": {}}}, '
            '"total": {{"samples": {}}}, "calls": null, "children": [')
    leaf = node + "]}}"
    assert tree_lines(sample_profile()) == [
        node.format("main", 10.0, 105.0),
        node.format("a", 0.0, 60.0),
        leaf.format("leaf", 60.0, 60.0) + "]}",
        "," + node.format("b", 0.0, 30.0),
        leaf.format("leaf", 30.0, 30.0) + "]}",
        "," + node.format("rec", 0.0, 5.0),
        node.format("rec", 0.0, 5.0),
        leaf.format("rec", 5.0, 5.0) + "]}]}]}",
    ]
    doc = render_json(sample_profile())
    assert set(doc) == {"meta", "flat", "tree"}
    assert doc["meta"]["by"] == "all" and doc["meta"]["tree_nodes_left_out"] == 0
    assert doc["meta"]["tree_max_depth"] == JSON_TREE_MAX_DEPTH


def _depths(tree: CallTree) -> list[int]:
    depths = [0] * len(tree)
    for i in range(1, len(tree)):
        depths[i] = depths[tree.parents[i]] + 1
    return depths


def test_deep_tree_cut_is_said_and_counted() -> None:
    """Stacks 260 deep: the nodes below level 200 are left out, counted in `meta`, named
    in a warning; each node at level 200 with calls below is marked "truncated" and its
    total keeps their cost."""
    profile = distinct_deep_stacks(count=60, depth=260)
    depths = _depths(profile.tree)
    deeper = sum(1 for d in depths if d > JSON_TREE_MAX_DEPTH)
    doc = render_json(profile)
    meta = doc["meta"]
    assert meta["tree_nodes_left_out"] == deeper > 0
    assert any(f"{deeper:,} nodes deeper than {JSON_TREE_MAX_DEPTH} levels" in w
               for w in meta["warnings"])
    kept, truncated, stack = 0, 0, [(n, 1) for n in doc["tree"]]
    while stack:
        node, depth = stack.pop()
        kept += 1
        assert depth <= JSON_TREE_MAX_DEPTH
        if node.get("truncated"):
            truncated += 1
            assert depth == JSON_TREE_MAX_DEPTH and node["children"] == []
            assert node["total"]["samples"] > node["self"]["samples"]
        stack.extend((c, depth + 1) for c in node["children"])
    assert kept + deeper == len(profile.tree) - 1
    assert truncated == sum(1 for i, d in enumerate(depths)
                            if d == JSON_TREE_MAX_DEPTH and profile.tree.first_child[i] >= 0)


def test_json_of_deep_distinct_stacks_grows_with_the_nodes() -> None:
    """500 distinct 128-frame stacks: the text is a bounded number of bytes per node (with
    indentation it was about 2 KB a node at this depth) and every node is there."""
    profile = distinct_deep_stacks(count=500, depth=128)
    nodes = len(profile.tree) - 1
    out = io.StringIO()
    write_json(profile, out)
    text = out.getvalue()
    assert len(text) < 250 * nodes, f"{len(text) / nodes:.0f} bytes a node"
    doc = json.loads(text)
    count, stack = 0, list(doc["tree"])
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(node["children"])
    assert count == nodes and doc["meta"]["tree_nodes_left_out"] == 0


def test_by_process_rows_and_roots() -> None:
    """--by process: a pid on each flat row, one root per process (costliest first) with
    its threads merged below, the processes listed in meta; text and folded alike."""
    profile = two_processes()  # pid 10: threads 10 (main/a 10) and 11 (start/b 30); pid 20
    doc = render_json(profile, by="process")
    assert [(r["pid"], r["function"], r["self"]["samples"]) for r in doc["flat"]
            if r["self"]["samples"]] == [(20, "c", 60.0), (10, "b", 30.0), (10, "a", 10.0)]
    assert [(n["function"], n["pid"], n["total"]["samples"]) for n in doc["tree"]] == [
        ("process 20 child", 20, 60.0), ("process 10 prog", 10, 40.0)]
    assert {c["function"] for c in doc["tree"][1]["children"]} == {"main", "start"}
    assert [(p["pid"], p["total"]["samples"]) for p in doc["meta"]["processes"]] == [
        (20, 60.0), (10, 40.0)]
    assert "pid" not in render_json(profile)["flat"][0]  # merged: as before
    folded = export_bytes(profile, "folded", by="process").decode().splitlines()
    assert sorted(folded) == ["process 10 prog;main;a 10", "process 10 prog;start;b 30",
                              "process 20 child;main;c 60"]
    text = render_text(profile, by="process")
    assert "by process: 2 processes" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["60.00", "60", "60", "20", "c"] in rows and ["30.00", "30", "30", "10", "b"] in rows
    assert "2 processes merged; `--by process` keeps them apart" in render_text(profile)


def test_same_name_in_two_modules_is_told_apart() -> None:
    """Two programs' `main` (a --follow run, merged): the text report names their modules."""
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    for program, cost in (("/bin/alpha", 3.0), ("/usr/bin/beta", 1.0)):
        main = profile.frames.intern(Frame("main", program, address=0x1000))
        work = profile.frames.intern(Frame(f"{program[-4:]}_work", program, address=0x1100))
        profile.tree.add_stack([main, work], [cost])
    text = render_text(profile.finalize())
    assert "main (in alpha)" in text and "main (in beta)" in text
    assert "pha_work" in text and "(in" not in text.split("pha_work")[1].split("\n")[0]


def test_a_tree_without_counts_gets_no_count_column() -> None:
    """Writing a profile that counts no calls makes no column of unknown counts (one
    8-byte entry per node: 12 MiB of the report's peak on 1.6 million nodes)."""
    profile = distinct_deep_stacks(200, 40)
    assert not profile.tree.has_known_calls()
    write_json(profile, io.StringIO())
    assert profile.tree._calls is None  # the column itself, not its values
