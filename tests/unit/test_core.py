"""The native core (csrc/core/, collectors/model/core.py) against the pure-Python model it
replaced (tests/helpers/reference_*.py): on random trees with shared prefixes, recursion,
fractional and negative costs and known calls, every column, node id and float sum is
the same, bit for bit; bad input is an exception, never a crash."""

from __future__ import annotations

import random
import threading
import time
from array import array

import pytest
from proftui.collectors.model import core
from proftui.collectors.model.calltree import CallTree
from proftui.collectors.model.flame import ShareWalk
from proftui.collectors.model.profile import SAMPLES, CodeSite, Frame, Metric, Profile, ProfileMeta
from proftui.collectors.model.slices import CodeKeys, SliceRecorder, index_of, range_profile
from proftui.collectors.model.storage import profile_to_dict
from proftui.collectors.model.views import function_costs, function_mask
from proftui.collectors.stacktable.builder import StackProfile

from tests.helpers import reference_views as ref
from tests.helpers.reference_builder import StackProfile as RefStackProfile
from tests.helpers.reference_calltree import CallTree as RefTree

SEEDS = range(6)


def random_paths(rng: random.Random, count: int, frames: int, depth: int) -> list[list[int]]:
    """Paths of frame ids that share prefixes and recurse (a frame repeats on a path)."""
    paths: list[list[int]] = []
    for _ in range(count):
        base = list(rng.choice(paths)[:rng.randrange(depth)]) if paths and rng.random() < 0.7 \
            else []
        base += [rng.randrange(frames) for _ in range(rng.randrange(1, depth))]
        paths.append(base)
    return paths


def random_costs(rng: random.Random, metrics: int) -> list[float]:
    """Whole numbers mostly; fractions, zeros and negative values too."""
    out = []
    for _ in range(metrics):
        kind = rng.random()
        out.append(0.0 if kind < 0.2 else rng.random() * 1e3 if kind < 0.5
                   else -float(rng.randrange(50)) if kind < 0.55 else float(rng.randrange(100)))
    return out


def twin_trees(seed: int, metrics: int = 2, count: int = 300) -> tuple[RefTree, CallTree]:
    rng = random.Random(seed)
    old, new = RefTree(metrics), CallTree(metrics)
    for path in random_paths(rng, count, 12, 9):
        values = random_costs(rng, metrics)
        calls = rng.randrange(5) if rng.random() < 0.3 else None
        old.add_stack(path, values, calls)
        new.add_stack(path, values, calls)
    return old, new


def same_tree(old: RefTree, new: CallTree) -> None:
    for name in ("parents", "frames", "first_child", "last_child", "next_sibling", "calls"):
        assert list(getattr(old, name)) == list(getattr(new, name)), name
    assert new.parents.typecode == new.frames.typecode == "i"
    assert [c.tobytes() for c in old.selfs] == [c.tobytes() for c in new.selfs]
    assert [c.tobytes() for c in old.finalize().totals] == \
        [c.tobytes() for c in new.finalize().totals]


@pytest.mark.parametrize("seed", SEEDS)
def test_paths_make_the_same_nodes_and_totals(seed: int) -> None:
    old, new = twin_trees(seed)
    same_tree(old, new)
    assert list(old.preorder()) == list(new.preorder())
    assert old.max_depth() == new.max_depth()
    for node in range(len(new)):
        assert old.path(node) == new.path(node)
    assert new.index().get(0 << 32 | new.frames[1]) == 1
    assert new.find(0, 999) == -1 and new.index().get(999, -1) == -1


@pytest.mark.parametrize("seed", SEEDS)
def test_folds_merge_and_subtract_alike(seed: int) -> None:
    rng = random.Random(seed)
    old_a, new_a = twin_trees(seed)
    old_b, new_b = twin_trees(seed + 100, metrics=3)
    frame_map = [rng.randrange(6) for _ in range(12)]  # siblings merge
    metric_map: list[int | None] = [2, None]
    old_a.fold(0, old_b, sign=-1.0, frame_map=frame_map, metric_map=metric_map)
    new_a.add_tree(0, new_b, sign=-1.0, frame_map=frame_map, metric_map=metric_map)
    same_tree(old_a, new_a)
    old_a.fold(3, old_b, 2)  # into a node, from a node
    new_a.add_tree(3, new_b, 2)
    same_tree(old_a, new_a)
    assert list(old_b.node_map(old_a, frame_map)) == list(new_b.node_map(new_a, frame_map))
    new_a.add_tree(0, new_a)  # a tree added to itself: a copy of it, doubled
    old_copy = old_a.copy()
    old_a.merge(old_copy)
    same_tree(old_a, new_a)


@pytest.mark.parametrize("seed", SEEDS)
def test_function_sums_and_derived_trees_match(seed: int) -> None:
    rng = random.Random(seed)
    old, new = twin_trees(seed)
    old.finalize()
    new.finalize()
    function_ids = [f if f % 4 else f + 1 for f in range(12)]  # inlined copies: one function
    for ids in (None, function_ids):
        want = ref.function_costs(old, ids)
        got = {k: (v.self_cost, v.total_cost, v.calls)
               for k, v in function_costs(new, ids).items()}
        assert got == {k: (v.self_cost, v.total_cost, v.calls) for k, v in want.items()}
    for frame_id in range(0, 12, 3):
        nodes = ref.outermost_nodes(old, frame_id, function_ids)
        assert list(core.outermost_of(new, function_mask(frame_id, function_ids))) == nodes
        for depth in (1, 3, 64):
            caller = CallTree(new.n_metrics)
            cut = core.callers(new, new.totals, caller, nodes, function_ids[frame_id], depth)
            want_tree = ref.caller_tree(old, frame_id, function_ids, depth)
            same_tree(want_tree, caller)
            assert cut == (want_tree.cut_depth is not None)
    for depth in (2, 64):
        inverted = CallTree(new.n_metrics)
        cut = core.invert(new, inverted, depth)
        want_tree = ref.bottom_up_tree(old, depth)
        same_tree(want_tree, inverted)
        assert cut == (want_tree.cut_depth is not None)
        for callees in (False, True):
            keys, sums, calls = core.neighbours(new, new.totals,
                                                function_mask(frame_id, function_ids), callees)
            got_rows = [(k, [c[i] for c in sums], None if calls[i] < 0 else calls[i])
                        for i, k in enumerate(keys)]
            assert got_rows == ref.neighbours(old, frame_id, function_ids, callees)
        focused = CallTree(new.n_metrics)
        if nodes:
            top = focused.child(0, function_ids[frame_id])
            core.fold(focused, top, new, nodes, 1.0, None, [(0, 0), (1, 1)])
        same_tree(ref.callee_tree(old, frame_id, function_ids), focused.finalize())
    matches = [rng.random() < 0.3 for _ in range(12)]
    walk = ShareWalk(new, 0, matches)
    assert walk.run(1 << 40) and walk.total == ref.matched_share(old, 0, matches)


@pytest.mark.parametrize("seed", SEEDS)
def test_pruned_and_remapped_trees_match(seed: int) -> None:
    old, new = twin_trees(seed)
    for column in (*old.selfs, *new.selfs):  # a range with part of the costs: some zero
        for i in range(0, len(column), 3):
            column[i] = 0.0
    for column in (*old.selfs, *new.selfs):
        for i in range(len(column)):
            column[i] = abs(column[i])
    old.calls, new.calls = array("q", [-1]) * len(old), array("q", [-1]) * len(new)
    old.finalize()
    new.finalize()
    same_tree(old.pruned(), new.pruned())
    counted = new.copy()
    counted.calls[len(new) - 1] = 3  # a count under costless callers: they are kept too
    kept = counted.pruned()
    assert kept.path(len(kept) - 1) == new.path(len(new) - 1)
    for frame_map in ([f % 5 for f in range(12)], [f + 1 for f in range(12)]):
        same_tree(old.remapped(frame_map, [1, 0]), new.remapped(frame_map, [1, 0]))


def test_slices_sum_alike() -> None:
    rng = random.Random(7)
    old, new = twin_trees(7)
    leaves = array("q", (rng.randrange(1, len(new)) for _ in range(80)))
    index = index_of(["a", "b"], leaves, array("q", (rng.randrange(2) for _ in leaves)),
                     leaves, CodeKeys.of([("m", rng.randrange(9), CodeSite(None))
                                          if rng.random() < 0.8 else None for _ in leaves]))
    recorder = SliceRecorder(100.0, 2)
    for _ in range(400):
        recorder.add(100.0 + rng.random() * 5, rng.randrange(len(leaves)),
                     [rng.random() * 10, float(rng.randrange(4))])
    slices = recorder.snapshot(index)
    for first, last in ((0, len(slices)), (3, 9)):
        got = slices.stack_costs(first, last)
        want = ref.stack_costs(slices, first, last)
        assert [c.tobytes() for c in got] == [c.tobytes() for c in want]
    assert slices.part_activity(1) == ref.part_activity(slices, 1)
    per_stack = slices.stack_costs(2, 12)
    tree = CallTree.from_columns(2, array("i", new.parents), array("i", new.frames),
                                 [array("d", bytes(8 * len(new))) for _ in range(2)],
                                 array("q", [-1]) * len(new))
    core.add_stacks(tree.selfs, index.leaf, per_stack, None, 0)
    want_tree, want_costs = ref.range_tree(old, leaves, per_stack, 2, index.code,
                                           index.code_keys)
    same_tree(want_tree, tree.pruned())
    sums, keys = core.group_sums(per_stack, index.code, len(index.code_keys))
    assert {index.code_keys[k]: [c[k] for c in sums] for k in keys} == want_costs
    assert list(want_costs) == [index.code_keys[k] for k in keys]  # same order


class Space:
    """An address space: 0x10.. are functions of /bin/p (0x50.. inlined pairs), others
    unknown until `known` says."""

    def __init__(self) -> None:
        self.known = {a: f"f{a:x}" for a in range(0x10, 0x100, 0x10)}

    def frames_at(self, address: int, leaf: bool) -> list[Frame]:
        name = self.known.get(address)
        if name is None:
            return [Frame(function=f"0x{address:x}", module="", address=address)]
        frames = [Frame(function=name, module="/bin/p", address=address)]
        if address >= 0x50:
            frames.insert(0, Frame(function=f"in{address % 0x30:x}", module="/bin/p",
                                   inlined=True))
        return frames

    def stack_frames(self, ips: tuple[int, ...]) -> list[Frame]:
        return [f for depth in range(len(ips) - 1, -1, -1)
                for f in self.frames_at(ips[depth], depth == 0)]

    def leaf_site(self, address: int) -> tuple[str, int, CodeSite] | None:
        return ("/bin/p", address, CodeSite(address, "p.c", address % 7)) \
            if address in self.known else None

    def forget_unresolved(self) -> None:
        pass


def drive(built: StackProfile | RefStackProfile, seed: int, snapshots: list[dict]) -> None:
    """One random run: new stacks on several threads, counts added, set, set in batches
    (deferred or not), an unknown address learned, snapshots taken along the way."""
    rng = random.Random(seed)
    space = Space()
    stacks: list[int] = []
    ips_pool = [a for a in range(0x10, 0x100, 0x10)] + [0x777, 0x999]
    meta = ProfileMeta(mode="sampler")
    for step in range(250):
        kind = rng.random()
        if kind < 0.35 or not stacks:
            ips = tuple(rng.choice(ips_pool) for _ in range(rng.randrange(1, 9)))
            part = f"pid 1 tid {rng.randrange(1, 4) if step > 20 else 1}"
            if rng.random() < 0.05:
                index = built.stack_of_frames(("x", step), part, [Frame("[lost]")])
            else:
                index = built.stack(("s", ips, part), part, space,  # type: ignore[arg-type]
                                    ips, leaf_is_return=rng.random() < 0.2)
            stacks.append(index)
        elif kind < 0.6:
            built.add(rng.choice(stacks), [float(rng.randrange(6)), rng.random()])
        elif kind < 0.75:
            built.set(rng.choice(stacks), [float(rng.randrange(20)), float(rng.randrange(9))])
        elif kind < 0.85:
            built.set_many([(rng.choice(stacks), [float(rng.randrange(30)), 1.0 * step])
                            for _ in range(rng.randrange(1, 40))], rng.random() < 0.5)
        elif kind < 0.88:
            space.known[0x777] = "late"
            built.resymbolize()
        elif kind < 0.93:
            snapshots.append(profile_to_dict(built.snapshot(meta)))  # type: ignore[arg-type]
        else:
            built.changes()
    snapshots.append(profile_to_dict(built.snapshot(meta)))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", SEEDS)
def test_stack_profiles_match_the_python_builder(seed: int) -> None:
    metrics: tuple[Metric, ...] = (SAMPLES, Metric("cpu_ns", "ns"))
    got: list[dict] = []
    want: list[dict] = []
    drive(StackProfile(metrics), seed, got)
    drive(RefStackProfile(metrics), seed, want)
    assert len(got) == len(want)
    for mine, theirs in zip(got, want, strict=True):
        assert mine == theirs


def test_live_timelines_index_every_stacks_code_site() -> None:
    """Every snapshot's timeline index holds each stack's leaf code site, as one built
    from scratch does: the code keys kept between snapshots take in new stacks, and start
    again when an address learned late gives stacks new sites (0x777 here)."""
    space, ref_space = Space(), Space()
    built, ref = StackProfile((SAMPLES,)), RefStackProfile((SAMPLES,))
    rng = random.Random(11)
    pool = [*range(0x10, 0x100, 0x10), 0x777]
    stacks: list[int] = []
    meta = ProfileMeta(mode="sampler")
    checked = 0
    for step in range(300):
        kind = rng.random()
        if kind < 0.3 or not stacks:
            ips = tuple(rng.choice(pool) for _ in range(rng.randrange(1, 5)))
            stacks.append(built.stack(ips, "pid 1 tid 1", space, ips))  # type: ignore[arg-type]
            ref.stack(ips, "pid 1 tid 1", ref_space, ips)  # type: ignore[arg-type]
        elif kind < 0.85:
            index, when = rng.choice(stacks), 100.0 + 0.01 * step
            for one in (built, ref):
                one.add(index, (1.0,))
                one.add_at(when, index, (1.0,), origin=100.0)
        elif kind < 0.87 and 0x777 not in space.known:
            space.known[0x777] = ref_space.known[0x777] = "late"
            built.resymbolize()
            ref.resymbolize()
        else:
            mine, theirs = built.snapshot(meta).slices, ref.snapshot(meta).slices
            if mine is not None and theirs is not None:
                assert list(mine.index.code) == list(theirs.index.code)
                assert mine.index.code_keys == theirs.index.code_keys
                assert len(mine.index.code) == len(built) == len(set(stacks))
                checked += 1
    assert checked >= 10 and 0x777 in space.known


def test_a_snapshot_never_changes_after_it_is_taken() -> None:
    built = StackProfile((SAMPLES,))
    space = Space()
    a = built.stack(1, "pid 1 tid 1", space, (0x20, 0x10))  # type: ignore[arg-type]
    built.add(a, (2,))
    first = built.snapshot(ProfileMeta(mode="sampler"))
    kept = profile_to_dict(first)
    b = built.stack(2, "pid 1 tid 1", space, (0x30, 0x10))  # type: ignore[arg-type]
    built.add(b, (5,))
    built.add(a, (1,))
    built.set_many([(a, (9,))], defer_totals=True)
    second = built.snapshot(ProfileMeta(mode="sampler"))
    assert profile_to_dict(first) == kept and first.tree is not second.tree
    assert first.total() == 2 and second.total() == 14
    assert built.snapshot(ProfileMeta(mode="sampler")).tree is second.tree  # nothing moved


def test_bad_input_is_an_exception() -> None:
    tree = CallTree(1)
    tree.walk([1, 2])
    with pytest.raises(IndexError):
        tree.child(7, 1)
    with pytest.raises(OverflowError):
        tree.child(0, 2**40)
    with pytest.raises(ValueError, match="parent 5 is not an earlier node"):
        CallTree.from_columns(1, array("i", [-1, 0, 5]), array("i", [-1, 1, 2]),
                              [array("d", [0.0] * 3)])
    with pytest.raises(ValueError, match="root"):
        CallTree.from_columns(1, array("i", [0]), array("i", [-1]), [array("d", [0.0])])
    with pytest.raises(AttributeError):
        core.totals(object())
    with pytest.raises(TypeError, match="'i' items"):
        core.link(array("q", [-1, 0]))
    with pytest.raises(IndexError):
        tree.add_tree(0, tree.copy(), frame_map=[0])  # frame 1 has no mapping
    with pytest.raises(IndexError):
        core.add_stacks(tree.selfs, array("q", [9]), [array("d", [1.0])], None, 0)
    assert core.check(array("d", [1.0, float("nan")]), 0.0, 2.0, 0) == 1
    assert core.check(array("i", [-1, 3, 4]), 0, 4, 1) == -1
    tree.walk([1, 3])  # still sound after the errors
    assert [tree.path(i) for i in range(1, len(tree))] == [[1], [1, 2], [1, 3]]


def test_a_recorded_tree_holds_only_what_is_saved(tmp_path) -> None:
    """A headless run (deferred batches, one snapshot at the end) keeps parents, frames
    and self costs: no totals, children links or calls column until something reads
    them, no child index once the run is complete; what is saved is the same profile."""
    from proftui.collectors.model import storage

    space = Space()
    built = StackProfile((SAMPLES,))
    ref_built = RefStackProfile((SAMPLES,))
    for one in (built, ref_built):
        for n in range(40):
            ips = (0x10 + 0x10 * (n % 5), 0x20, 0x10 * (1 + n % 3))
            one.stack(n, "pid 1 tid 1", space, ips)  # type: ignore[arg-type]
        one.set_many([(n, (float(n),)) for n in range(40)], defer_totals=True)
    profile = built.snapshot(ProfileMeta(mode="sampler", complete=True))
    tree = profile.tree
    assert tree is not None
    assert tree._totals is None and tree._links is None and tree._calls is None
    assert tree._index is None
    saved = storage.load(storage.save(profile, tmp_path / "run.proftui"))
    want = ref_built.snapshot(ProfileMeta(mode="sampler", complete=True))
    assert profile_to_dict(saved) == profile_to_dict(want)  # type: ignore[arg-type]
    assert profile.total() == sum(range(40))  # totals summed when read


def display_order_reference(tree: CallTree, metric: int, start: int, mask: bytes,
                            max_depth: int) -> list[int]:
    """The call tree search's former Python walk: depth first, children by -total (stable)."""
    out: list[int] = []
    totals = tree.totals[metric]
    stack = [(c, 1) for c in reversed(sorted(tree.children(start), key=lambda c: -totals[c]))]
    while stack:
        node, depth = stack.pop()
        if mask[tree.frames[node]]:
            out.append(node)
        if depth < max_depth:
            ordered = sorted(tree.children(node), key=lambda c: -totals[c])
            stack.extend((c, depth + 1) for c in reversed(ordered))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_display_order_is_the_views_search_order(seed: int) -> None:
    _old, tree = twin_trees(seed, count=400)
    tree.finalize()
    rng = random.Random(seed)
    mask = bytes(rng.random() < 0.4 for _ in range(12))
    starts = [0, *rng.sample(range(1, len(tree)), 5)]
    for metric in (0, 1):
        for start in starts:
            for depth in (200, 3, 1):
                got = core.display_order(tree, tree.totals, metric, start, mask, depth)
                assert list(got) == display_order_reference(tree, metric, start, mask, depth)
    with pytest.raises(IndexError):
        core.display_order(tree, tree.totals, 0, len(tree), mask, 5)
    with pytest.raises(IndexError):
        core.display_order(tree, tree.totals, 2, 0, mask, 5)


def test_a_range_prunes_a_part_that_is_the_tree_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One thread: its part is the tree itself, so a range prunes one tree, not two."""
    rng = random.Random(3)
    _old, tree = twin_trees(3, metrics=1)
    tree.finalize()
    leaves = array("q", (rng.randrange(1, len(tree)) for _ in range(40)))
    index = index_of(["pid 1 tid 1"], leaves, array("q", [0]) * len(leaves), leaves,
                     CodeKeys.of([None] * len(leaves)))
    recorder = SliceRecorder(100.0, 1)
    for _ in range(200):
        recorder.add(100.0 + rng.random() * 4, rng.randrange(len(leaves)), [1.0])
    profile = Profile(meta=ProfileMeta(mode="sampler"), metrics=(SAMPLES,), tree=tree,
                      parts={"pid 1 tid 1": tree}, slices=recorder.snapshot(index))
    pruned = CallTree.pruned
    calls: list[int] = []

    def counted(self: CallTree) -> CallTree:
        calls.append(len(self))
        return pruned(self)

    monkeypatch.setattr(CallTree, "pruned", counted)
    shown = range_profile(profile, 1.0, 3.0)
    assert calls == [len(tree)]
    assert shown.parts["pid 1 tid 1"] is shown.tree
    assert shown.total(0) == sum(recorder.snapshot(index).stack_costs(4, 12)[0])


def test_invert_callers_and_fold_let_other_threads_run() -> None:
    """The UI thread keeps running while a worker derives a bottom-up, caller or focused
    tree (issue 33: the TUI never blocks on a big derivation)."""
    rng = random.Random(11)
    tree = CallTree(1)
    for path in random_paths(rng, 30_000, 60, 24):
        tree.add_stack(path, [1.0])
    tree.finalize()
    nodes = array("q", range(1, len(tree)))  # every path, as a caller tree of all
    for kind in ("invert", "callers", "fold"):
        window: list[float] = []  # the C call's start and end, as the worker saw them

        def work(kind: str = kind, window: list[float] = window) -> None:
            out = CallTree(1)
            window.append(time.perf_counter())
            if kind == "invert":
                core.invert(tree, out, 64)
            elif kind == "callers":
                core.callers(tree, tree.totals, out, nodes, 0, 64)
            else:
                core.fold(out, 0, tree, [0], 1.0, None, [(0, 0)])
            window.append(time.perf_counter())

        worker = threading.Thread(target=work)
        woke: list[float] = []  # when this thread ran again after each short sleep
        worker.start()
        while worker.is_alive():
            time.sleep(0.001)
            woke.append(time.perf_counter())
        worker.join()
        inside = sum(window[0] < t < window[1] for t in woke)
        # Holding the GIL, the call would let this thread run at most twice in it (at
        # the bytecodes just around it); released, once per sleep.
        assert inside >= 5, (kind, inside, window[1] - window[0])


def test_a_read_only_tree_keeps_no_last_child_until_a_node_is_added() -> None:
    """from_columns (a loaded profile) links without the last_child column (4 bytes a
    node); adding nodes later makes it, and children stay in insertion order."""
    parents, frames = array("i", [-1, 0, 0, 1, 1, 0]), array("i", [-1, 0, 1, 2, 3, 4])
    selfs = [array("d", [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])]
    fresh = CallTree.from_columns(1, array("i", parents), array("i", frames),
                                  [array("d", selfs[0])])
    tree = CallTree.from_columns(1, parents, frames, selfs, finalized=True)
    assert tree._links is not None and tree._links[1] is None
    assert tree.children(0) == [1, 2, 5] and tree.children(1) == [3, 4]
    assert tree.copy()._links[1] is None  # type: ignore[index]
    made = [tree.child(1, 7), tree.child(0, 8), tree.child(1, 9)]
    assert made == [6, 7, 8]
    assert tree._links[1] is not None
    assert tree.children(0) == [1, 2, 5, 7] and tree.children(1) == [3, 4, 6, 8]
    assert list(tree.last_child) == list(core.link(tree.parents)[1])
    assert list(fresh.last_child) == [5, 4, -1, -1, -1, -1]  # asked for: made whole


def test_row_columns_refuse_stacks_and_nodes_out_of_range() -> None:
    """add_rows and take_changes raise on an index outside their columns (a table
    never hands one: a malformed call must not write past an array)."""
    selfs = [array("d", [0.0, 0.0])]
    with pytest.raises(IndexError):
        core.add_rows(selfs, array("q", [1]), array("q", [1]), [array("d", [1.0])], None, 0)
    with pytest.raises(IndexError):
        core.add_rows(selfs, array("q", [5]), array("q", [0]), [array("d", [1.0])], None, 0)
    with pytest.raises(IndexError):
        core.add_rows(selfs, array("q", [1]), array("q", [0]), [array("d", [])], None, 0)
    assert selfs == [array("d", [0.0, 0.0])]
    with pytest.raises(IndexError):
        core.take_changes([array("d", [1.0])], [array("d", [0.0])], array("q", [0, 3]))
    with pytest.raises(ValueError):
        core.take_changes([array("d", [1.0, 2.0])], [array("d", [0.0])], array("q", [0]))
    moved, deltas = core.take_changes([array("d", [1.0, 2.0])], [array("d", [1.0, 0.5])],
                                      array("q", [0, 1]))
    assert moved == array("q", [1]) and deltas == [array("d", [1.5])]
