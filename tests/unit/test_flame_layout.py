"""Flame graph layout (collectors/model/flame.py): rows, culling, zoom, search share."""

from __future__ import annotations

import itertools
import random

from proftui.collectors.model.diff import align, counterpart
from proftui.collectors.model.flame import Layout, matched_share, node_at
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta

from tests.helpers.profiles import frame_id, sample_profile


def rows(layout: Layout, profile: Profile) -> list[list[tuple[str, float, float]]]:
    """(name, start, width) per row; slivers are "~N"."""
    out = []
    for row in layout.rows:
        out.append([(f"~{i.merged}" if i.node is None else
                     "all" if i.node.parent is None else profile.frames[i.node.frame_id].function,
                     i.start, i.width) for i in row])
    return out


def test_rows_are_children_left_heavy_within_their_parent() -> None:
    profile = sample_profile()
    layout = Layout(profile.tree, 0, cells=1000)
    list(layout.items())
    assert rows(layout, profile) == [
        [("all", 0, 105)], [("main", 0, 105)],
        [("a", 0, 60), ("b", 60, 30), ("rec", 90, 5)],
        [("leaf", 0, 60), ("leaf", 60, 30), ("rec", 90, 5)],
        [("rec", 90, 5)],
    ]
    assert [i.parent for i in layout.rows[3]] == [0, 1, 2]
    assert layout.done and layout.row(9) == []


def test_narrow_children_merge_into_one_sliver_per_parent() -> None:
    profile = sample_profile()
    layout = Layout(profile.tree, 0, cells=20)  # a cell is 5.25 samples: rec (5) is narrower
    list(layout.items())
    assert rows(layout, profile)[2] == [("a", 0, 60), ("b", 60, 30), ("~1", 90, 5)]
    assert rows(layout, profile)[3] == [("leaf", 0, 60), ("leaf", 60, 30)]  # not expanded
    assert layout.cells_of(layout.rows[2][2]) == (17, 18)  # the sliver keeps a cell


def test_zoom_keeps_the_path_as_full_width_rows() -> None:
    profile = sample_profile()
    b, _ = node_at(profile.tree, (frame_id(profile, "main"), frame_id(profile, "b")))
    layout = Layout(profile.tree, 0, cells=100, zoom=b)
    list(layout.items())
    assert rows(layout, profile) == [[("all", 0, 30)], [("main", 0, 30)], [("b", 0, 30)],
                                     [("leaf", 0, 30)]]
    assert layout.zoom_row() == 2
    assert layout.cells_of(layout.rows[3][0]) == (0, 100)
    hidden = Layout(profile.tree, 0, cells=100, zoom=b, show_root=False)
    assert hidden.zoom_row() == 1 and hidden.row(0)[0].node == b.parent


def test_without_the_root_row_the_first_row_is_the_top_functions() -> None:
    profile = sample_profile()
    layout = Layout(profile.tree, 0, cells=100, show_root=False)
    assert [(profile.frames[i.node.frame_id].function, i.parent) for i in layout.row(0)
            if i.node is not None] == [("main", -1)]
    assert len(layout.row(1)) == 3


def random_profile(seed: int, names: int = 12, stacks: int = 400
                   ) -> tuple[Profile, list[tuple[list[str], float]]]:
    rng = random.Random(seed)
    profile = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    pool = [f"f{i}" for i in range(names)]
    added = []
    for _ in range(stacks):
        stack = [rng.choice(pool[:3])] + [rng.choice(pool) for _ in range(rng.randint(0, 7))]
        cost = float(rng.randint(1, 9))
        profile.tree.add_stack([profile.frames.intern(Frame(n, "/bin/p")) for n in stack],
                               [cost])
        added.append((stack, cost))
    return profile.finalize(), added


def test_search_share_counts_each_path_once() -> None:
    profile = sample_profile()
    rec = frame_id(profile, "rec")
    assert matched_share(profile.tree, 0, lambda f: f == rec) == 5  # rec > rec > rec: once
    leafy = {frame_id(profile, "leaf"), rec, frame_id(profile, "main")}
    assert matched_share(profile.tree, 0, leafy.__contains__) == 105  # main holds them all
    for seed in range(20):
        profile, added = random_profile(seed)
        wanted = {f"f{seed % 12}", f"f{(seed * 7 + 3) % 12}"}
        truth = sum(cost for stack, cost in added if wanted & set(stack))
        ids = {i for i, f in enumerate(profile.frames) if f.function in wanted}
        assert matched_share(profile.tree, 0, ids.__contains__) == truth, seed


def test_search_share_under_a_zoom() -> None:
    profile = sample_profile()
    main, a = frame_id(profile, "main"), frame_id(profile, "a")
    node, _ = node_at(profile.tree, (main, a))
    leaf = frame_id(profile, "leaf")
    assert matched_share(profile.tree, 0, lambda f: f == leaf, under=node) == 60
    assert matched_share(profile.tree, 0, lambda f: f == main, under=node) == 60


def test_random_layouts_nest_without_overlap() -> None:
    for seed in range(10):
        profile, _ = random_profile(seed, stacks=300)
        for cells in (7, 40, 200):
            layout = Layout(profile.tree, 0, cells=cells)
            items = list(layout.items())
            floor = layout.span / cells
            for k, _index, item in items:
                assert item.width > 0
                if k == 0:
                    continue
                parent = layout.rows[k - 1][item.parent]
                assert parent.node is not None  # slivers are never expanded
                assert parent.start - 1e-9 <= item.start
                assert item.start + item.width <= parent.start + parent.width + 1e-6
                if item.node is not None:
                    assert item.width >= floor and item.node.parent == parent.node
            for k, row in enumerate(layout.rows):
                for left, right in itertools.pairwise(row):
                    assert left.start + left.width <= right.start + 1e-6
                drawn = layout.row_cells(k)
                assert all(x0 < x1 <= cells for _i, x0, x1 in drawn)
                assert all(a[2] <= b[1] for a, b in itertools.pairwise(drawn))
                wide = [i for i, item in enumerate(row) if item.width >= 1.5 * floor]
                assert set(wide) <= {i for i, _x0, _x1 in drawn}  # a frame of 1.5 cells shows


def test_base_nodes_are_the_aligned_counterparts() -> None:
    new, _ = random_profile(1)
    old, _ = random_profile(2)
    base = align(old, new)
    assert new.tree is not None and base.tree is not None
    layout = Layout(new.tree, 0, cells=300, base=base.tree)
    checked = 0
    for _k, _i, item in layout.items():
        if item.node is not None:
            assert item.base == counterpart(item.node, base.tree)
            checked += item.base is not None
    assert checked > 10
