"""The calling-context tree gprof mode estimates from arcs, on hand-made gmon data:
cycles count once, the root's total is the histogram's, the walk stays bounded."""

from __future__ import annotations

import pytest
from proftui.collectors.gprof.analysis import GprofSymbol, GprofSymbolTable, analyze
from proftui.collectors.gprof.collector import display_name
from proftui.collectors.gprof.gmon import GmonData, Histogram
from proftui.collectors.gprof.tree import MAX_NODES, estimated_tree
from proftui.collectors.model.profile import CallTree

SIZE = 0x100  # bytes per function in the made-up text


def make(names: list[str], arcs: dict[tuple[str, str], int], ticks: dict[str, int],
         stray: int = 0) -> tuple[GmonData, GprofSymbolTable]:
    """Functions laid out SIZE bytes apart from 0x1000, one 4-byte bin per 2 units."""
    base = 0x1000
    symbols = [GprofSymbol(base + i * SIZE, base + (i + 1) * SIZE - 1, n, False)
               for i, n in enumerate(names)]
    at = {n: base + i * SIZE for i, n in enumerate(names)}
    low, high = base - SIZE, base + len(names) * SIZE  # one function's worth before
    counts = [0] * ((high - low) // 4)
    for name, count in ticks.items():
        counts[(at[name] + 0x40 - low) // 4] = count
    counts[0] = stray  # samples outside every symbol
    data = GmonData(histograms=[Histogram(low, high, 100, "seconds", "s", tuple(counts))])
    for (caller, callee), count in arcs.items():
        data.arcs[(at[caller] + 0x20, at[callee] + 0x8)] = count
    return data, GprofSymbolTable(symbols)


def tree_of(data: GmonData, table: GprofSymbolTable) -> tuple[CallTree, list[str], float]:
    result = analyze(data, table)
    names = [s.name for s in table.symbols]
    tree = estimated_tree(result, lambda i: i, 1.0, lambda: len(names)).finalize()
    return tree, names, result.total_ticks


def test_three_function_cycle_counts_its_time_once() -> None:
    data, table = make(["main", "a", "b", "c"],
                       {("main", "a"): 300, ("a", "b"): 782, ("a", "c"): 560,
                        ("b", "c"): 782, ("c", "a"): 1042}, {"c": 28})
    tree, names, total = tree_of(data, table)
    assert tree.root.total_cost[0] == pytest.approx(total)
    c_nodes = [n for n in tree.nodes() if names[n.frame_id] == "c"]
    assert len(c_nodes) == 1 and c_nodes[0].self_cost[0] == pytest.approx(28)
    # One entry from main: a with b and c below it, each member once.
    (main,) = tree.root.children.values()
    assert [names[f] for f in main.children] == ["a"]


def test_dense_cycle_entered_from_two_places_splits_by_calls() -> None:
    members = [f"m{i}" for i in range(12)]
    arcs = {(x, y): 10 + i + j for i, x in enumerate(members) for j, y in enumerate(members)
            if x != y}
    arcs[("main", "m0")] = 30
    arcs[("main", "other")] = 1
    arcs[("other", "m5")] = 10
    data, table = make(["main", "other", *members], arcs, {m: 5 for m in members})
    tree, names, total = tree_of(data, table)
    assert tree.root.total_cost[0] == pytest.approx(total)
    for m in members:  # once per entry, and 3/4 of the time under main's own entry
        nodes = [n for n in tree.nodes() if names[n.frame_id] == m]
        assert len(nodes) == 2
        assert sum(n.self_cost[0] for n in nodes) == pytest.approx(5)
    (main,) = tree.root.children.values()
    m0 = main.children[names.index("m0")]
    assert m0.total_cost[0] == pytest.approx(0.75 * 60)


def test_exponential_paths_fit_a_bounded_tree_with_every_sample() -> None:
    # 40 diamonds in a row: 2**40 paths from main to the last function.
    names = ["main"]
    arcs: dict[tuple[str, str], int] = {}
    for i in range(40):
        top, left, right, bottom = names[-1], f"l{i}", f"r{i}", f"d{i}"
        names += [left, right, bottom]
        arcs.update({(top, left): 1, (top, right): 1, (left, bottom): 1, (right, bottom): 1})
    ticks = {n: 3 for n in names}
    data, table = make(names, arcs, ticks, stray=7)
    tree, names, total = tree_of(data, table)
    assert sum(1 for _ in tree.nodes()) <= MAX_NODES + 1
    assert tree.root.total_cost[0] == pytest.approx(total)
    outside = [n for n in tree.root.children.values() if n.frame_id == len(names)]
    assert len(outside) == 1 and outside[0].self_cost[0] == 7


@pytest.mark.parametrize("raw,shown", [
    ("hot.constprop.0", "hot [clone .constprop.0]"),
    ("f.isra.0.cold", "f [clone .isra.0] [clone .cold]"),
    ("check.part.0", "check [clone .part.0]"),
    ("main", "main"),
    ("_Z3fooi.isra.0", "foo(int) [clone .isra.0]"),
    ("odd.Name", "odd.Name"),
])
def test_clone_names_read_like_cxxfilt(raw: str, shown: str) -> None:
    assert display_name(raw) == shown
