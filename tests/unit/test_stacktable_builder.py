"""collectors/stacktable/builder.py on hand-made stacks: each stack added once, count
changes applied along the path, parts split when a second thread appears, unknown
addresses resolved later, and the changes of an interval handed out once."""

from __future__ import annotations

from array import array

from proftui.collectors.model.profile import CPU_NS, SAMPLES, CodeSite, Frame
from proftui.collectors.model.views import flat_profile
from proftui.collectors.stacktable.builder import StackProfile

MODULE = "/bin/prog"
NAMES = {0x10: "main", 0x20: "work", 0x30: "leaf", 0x40: "work"}


class FakeSpace:
    """An address space where 0x10..0x40 are functions; others unknown until `learn`."""

    def __init__(self) -> None:
        self.known = dict(NAMES)
        self.lookups = 0

    def frames_at(self, address: int, leaf: bool) -> list[Frame]:
        self.lookups += 1
        name = self.known.get(address)
        if name is None:
            return [Frame(function=f"0x{address:x}", module="", address=address)]
        return [Frame(function=name, module=MODULE, address=address)]

    def stack_frames(self, ips: tuple[int, ...]) -> list[Frame]:
        out: list[Frame] = []
        for depth in range(len(ips) - 1, -1, -1):
            out.extend(self.frames_at(ips[depth], depth == 0))
        return out

    def leaf_site(self, address: int) -> tuple[str, int, CodeSite] | None:
        return (MODULE, address, CodeSite(address, "prog.c", address)) \
            if address in self.known else None

    def forget_unresolved(self) -> None:
        pass


def paths(profile_tree, frames) -> dict[tuple[str, ...], tuple[float, float]]:
    return {tuple(frames[f].function for f in profile_tree.path(i)):
            (profile_tree.selfs[0][i], profile_tree.totals[0][i])
            for i in range(1, len(profile_tree))}


def test_builder_symbolizes_each_stack_once() -> None:
    space = FakeSpace()
    built = StackProfile((SAMPLES, CPU_NS))
    a = built.stack(("f", 1), "pid 1 tid 1", space, (0x30, 0x20, 0x10))  # type: ignore[arg-type]
    b = built.stack(("f", 2), "pid 1 tid 1", space, (0x20, 0x10))  # type: ignore[arg-type]
    assert built.stack(("f", 1), "pid 1 tid 1", space, (0x30, 0x20, 0x10)) == a  # type: ignore[arg-type]
    assert space.lookups == 4  # each distinct (address, is the leaf) symbolized once
    built.add(a, (3, 3000))
    built.set(b, (2, 2000))
    built.set(b, (5, 5000))  # counters read whole: only the difference is added
    profile = built.snapshot(built_meta())
    got = paths(profile.tree, profile.frames)
    assert got[("main", "work", "leaf")] == (3, 3)
    assert got[("main", "work")] == (5, 8) and got[("main",)] == (0, 8)
    assert profile.parts["pid 1 tid 1"] is profile.tree  # one thread: one tree
    flat = {e.frame.function: (e.self_cost[0], e.total_cost[0]) for e in flat_profile(profile)}
    assert flat == {"main": (0, 8), "work": (5, 8), "leaf": (3, 3)}
    assert profile.line_costs[("prog.c", 0x30)] == [3, 3000]


def test_a_table_without_code_costs_keeps_the_same_stacks_and_costs() -> None:
    """A pusher's table (code_costs=False): the stacks, their sites and costs and the
    changes handed out are those of a full table; no costs per line or address."""
    tables = [StackProfile((SAMPLES, CPU_NS)), StackProfile((SAMPLES, CPU_NS), code_costs=False)]
    for built in tables:
        space = FakeSpace()
        a = built.stack(("f", 1), "pid 1 tid 1", space, (0x30, 0x20, 0x10))  # type: ignore[arg-type]
        b = built.stack(("f", 2), "pid 1 tid 2", space, (0x20, 0x10))  # type: ignore[arg-type]
        built.add(a, (3, 3000))
        built.add_columns(array("q", [b, a]), [array("d", [2, 1]), array("d", [2000, 1000])],
                          defer_totals=True)
    full, lean = tables
    assert lean.changes() == full.changes() == [(0, [4.0, 4000.0]), (1, [2.0, 2000.0])]
    assert [lean.stack_site(i) for i in (0, 1)] == [full.stack_site(i) for i in (0, 1)]
    assert full.snapshot(built_meta()).line_costs[("prog.c", 0x30)] == [4, 4000]
    snapshot = lean.snapshot(built_meta())
    assert snapshot.line_costs == {} and snapshot.address_costs == {}
    assert paths(snapshot.tree, snapshot.frames) == paths(full.snapshot(built_meta()).tree,
                                                          snapshot.frames)


def test_costs_added_as_columns_equal_costs_added_one_by_one() -> None:
    """`add_columns` (the agent's batches, summed in C) leaves every tree, part, line
    cost and change bit-identical to `add` entry by entry, an index twice included."""
    stacks = [((0x30, 0x20, 0x10), "pid 1 tid 1"), ((0x20, 0x10), "pid 1 tid 2"),
              ((0x30, 0x40, 0x10), "pid 1 tid 1"), ((0x10,), "pid 1 tid 3")]
    batches = [[(0, 0.1, 7.0), (1, 2.0, 3.3), (0, 0.2, 1e-9)],
               [(3, 1.0, 1.0), (2, 0.0, 0.0), (1, 1e16, 1.0)], [(2, 5.0, 0.7)]]
    tables = [StackProfile((SAMPLES, CPU_NS)) for _ in range(2)]
    handed = []
    for columns, built in enumerate(tables):
        space = FakeSpace()
        ids = [built.stack(("k", n), part, space, ips)  # type: ignore[arg-type]
               for n, (ips, part) in enumerate(stacks)]
        for batch in batches:
            if columns:
                built.add_columns(array("q", [ids[i] for i, _s, _c in batch]),
                                  [array("d", [s for _i, s, _c in batch]),
                                   array("d", [c for _i, _s, c in batch])], defer_totals=True)
            else:
                for i, samples, cpu in batch:
                    if samples or cpu:
                        built.add(ids[i], (samples, cpu))
            handed.append(built.changes())
    one, columns = (t.snapshot(built_meta()) for t in tables)
    assert handed[:3] == handed[3:] and handed[0][0] == (0, [0.30000000000000004, 7.000000001])
    assert paths(one.tree, one.frames) == paths(columns.tree, columns.frames)
    assert set(one.parts) == set(columns.parts) == {"pid 1 tid 1", "pid 1 tid 2", "pid 1 tid 3"}
    for part, tree in one.parts.items():
        assert paths(tree, one.frames) == paths(columns.parts[part], columns.frames)
    assert one.line_costs == columns.line_costs and one.address_costs == columns.address_costs
    assert [e.self_cost for e in flat_profile(one)] == [e.self_cost for e in
                                                         flat_profile(columns)]


class OneLineSpace(FakeSpace):
    """0x21 is a second return address within 0x20's call line: the same frame."""

    def frames_at(self, address: int, leaf: bool) -> list[Frame]:
        return super().frames_at(0x20 if address == 0x21 else address, leaf)


def test_a_merging_table_keeps_stacks_no_view_can_tell_apart_as_one() -> None:
    """merge_equal (the agent's per-process tables): stacks that differ only in a
    return address of one frame are one stack, their costs together; another thread
    or another leaf keeps its own (as do unresolved stacks, never merged)."""
    space = OneLineSpace()
    merged, apart = StackProfile((SAMPLES,), merge_equal=True), StackProfile((SAMPLES,))
    for built in (merged, apart):
        for n, (ips, part) in enumerate([((0x30, 0x20, 0x10), "t1"), ((0x30, 0x21, 0x10), "t1"),
                                         ((0x30, 0x21, 0x10), "t2"), ((0x40, 0x21, 0x10), "t1"),
                                         ((0x30, 0x99, 0x10), "t1"), ((0x30, 0x98, 0x10), "t1")]):
            built.add(built.stack(("k", n), part, space, ips), (float(n + 1),))  # type: ignore[arg-type]
    assert len(apart) == 6 and len(merged) == 5
    assert merged.find(("k", 0)) == merged.find(("k", 1)) == 0
    assert len({merged.find(("k", n)) for n in range(2, 6)}) == 4
    assert merged.changes()[0] == (0, [3.0])
    a, b = (t.snapshot(built_meta()) for t in (merged, apart))
    assert paths(a.tree, a.frames) == paths(b.tree, b.frames)
    for part in ("t1", "t2"):
        assert paths(a.parts[part], a.frames) == paths(b.parts[part], b.frames)
    assert a.line_costs == b.line_costs and a.address_costs == b.address_costs


def test_recursion_counts_once_in_function_totals() -> None:
    space = FakeSpace()
    built = StackProfile((SAMPLES,))
    # main -> work -> work(0x40, same name) -> leaf: work's total counts the sample once
    s = built.stack("r", "pid 1 tid 1", space, (0x30, 0x40, 0x20, 0x10))  # type: ignore[arg-type]
    built.add(s, (4,))
    flat = {e.frame.function: e.total_cost[0] for e in flat_profile(built.snapshot(built_meta()))}
    assert flat == {"main": 4, "work": 4, "leaf": 4}


def test_a_second_thread_gets_its_own_tree() -> None:
    space = FakeSpace()
    built = StackProfile((SAMPLES,))
    one = built.stack(1, "pid 1 tid 1", space, (0x20, 0x10))  # type: ignore[arg-type]
    built.add(one, (2,))
    two = built.stack(2, "pid 1 tid 2", space, (0x30, 0x10))  # type: ignore[arg-type]
    built.add(two, (5,))
    built.add(one, (1,))
    profile = built.snapshot(built_meta())
    assert profile.total(0) == 8
    assert {label: tree.totals[0][0] for label, tree in profile.parts.items()} == {
        "pid 1 tid 1": 3, "pid 1 tid 2": 5}


def test_unknown_addresses_resolve_when_mappings_arrive() -> None:
    space = FakeSpace()
    built = StackProfile((SAMPLES,))
    s = built.stack(1, "pid 1 tid 1", space, (0x99, 0x10))  # type: ignore[arg-type]
    built.add(s, (6,))
    assert ("main", "0x99") in paths(built.tree, built.frames)
    space.known[0x99] = "late"  # a dlopen'd library's map log entry arrived
    assert built.resymbolize()
    profile = built.snapshot(built_meta())
    got = paths(profile.tree, profile.frames)
    assert got[("main", "late")] == (6, 6) and ("main", "0x99") not in got
    assert {e.frame.function: e.self_cost[0] for e in flat_profile(profile)}["late"] == 6


def test_a_copy_of_an_unresolved_stack_resolves_with_its_source() -> None:
    """A stack copied into another table (the agent's host profile takes each process's
    stacks by frame ids) keeps its unknown addresses to look at again: when they resolve
    later (a perf map grew), the copy is named too."""
    space = FakeSpace()
    own = StackProfile((SAMPLES,))
    s = own.stack(1, "pid 1 tid 1", space, (0x99, 0x10))  # type: ignore[arg-type]
    own.add(s, (6,))
    host = StackProfile((SAMPLES,))
    _labels, flat, _offsets = own.stack_paths([s])
    ids = array("i", [host.frames.intern(own.frames[f]) for f in flat])
    copy = host.stack_of_ids(("p", s), "pid 1 tid 1", ids, None, (own, s))
    host.add(copy, (6,))
    plain = host.stack_of_ids(("p", "plain"), "pid 1 tid 1", ids)  # no source: left as is
    host.add(plain, (1,))
    space.known[0x99] = "jitted"
    assert own.resymbolize() and host.resymbolize()
    got = paths(host.snapshot(built_meta()).tree, host.frames)
    assert got[("main", "jitted")] == (6, 6) and got[("main", "0x99")] == (1, 1)


def test_changes_of_an_interval_are_handed_out_once() -> None:
    space = FakeSpace()
    built = StackProfile((SAMPLES,))
    a = built.stack(1, "pid 1 tid 1", space, (0x20, 0x10))  # type: ignore[arg-type]
    b = built.stack(2, "pid 1 tid 1", space, (0x30, 0x10))  # type: ignore[arg-type]
    built.add(a, (2,))
    built.add(b, (1,))
    assert built.changes() == [(a, [2.0]), (b, [1.0])]
    built.add(a, (3,))
    assert built.changes() == [(a, [3.0])]
    assert built.changes() == []
    label, path = built.stack_path(b)
    assert label == "pid 1 tid 1" and [built.frames[f].function for f in path] == ["main", "leaf"]


def test_deferred_totals_are_summed_before_a_snapshot() -> None:
    """Batches folded with deferred totals, then one added along its path, give the
    same trees, parts and function totals as the same counts applied one by one."""
    def fill(defer: bool) -> StackProfile:
        space = FakeSpace()
        built = StackProfile((SAMPLES,))
        a = built.stack(1, "pid 1 tid 1", space, (0x30, 0x40, 0x20, 0x10))  # type: ignore[arg-type]
        b = built.stack(2, "pid 1 tid 2", space, (0x20, 0x10))  # type: ignore[arg-type]
        c = built.stack(3, "pid 1 tid 1", space, (0x30, 0x10))  # type: ignore[arg-type]
        if defer:
            built.set_many([(a, (4,)), (b, (2,))], defer_totals=True)
            built.set_many([(b, (5,)), (c, (1,))], defer_totals=True)
            built.add(a, (1,))  # incremental on stale totals: summed again anyway
        else:
            for index, values in ((a, (5,)), (b, (5,)), (c, (1,))):
                built.set(index, values)
        return built

    deferred, direct = fill(True).snapshot(built_meta()), fill(False).snapshot(built_meta())
    assert paths(deferred.tree, deferred.frames) == paths(direct.tree, direct.frames)
    for label, tree in direct.parts.items():
        assert paths(deferred.parts[label], deferred.frames) == paths(tree, direct.frames)
    flat = [{e.frame.function: (e.self_cost[0], e.total_cost[0]) for e in flat_profile(p)}
            for p in (deferred, direct)]
    assert flat[0] == flat[1] == {"main": (0, 11), "work": (5, 10), "leaf": (6, 6)}


def built_meta():
    from proftui.collectors.model.profile import ProfileMeta

    return ProfileMeta(mode="sampler")
