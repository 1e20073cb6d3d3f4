"""Helpers of the heap-mode tests: run a fixture under the heap profiler, read costs by path."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.heap.collector import HeapCollector
from proftui.collectors.model.profile import Profile

from tests.helpers.collect import run_to_end


def run_heap(binary: Path, *args: str, **options: object) -> tuple[Profile, str]:
    """Profile `binary args` to the end; (profile, the target's stdout+stderr)."""
    return run_to_end(HeapCollector, binary, *args, **options)


def by_site(profile: Profile, metric: str, part: str | None = None) -> dict[str, float]:
    """Self cost of `metric` per allocating function (the leaf of each stack)."""
    index = profile.metric_index(metric)
    tree = profile.tree if part is None else profile.parts[part]
    assert tree is not None
    out: dict[str, float] = {}
    for node in tree.nodes():
        if node.frame_id < 0 or not node.self_cost[index]:
            continue
        name = profile.frames[node.frame_id].function
        out[name] = out.get(name, 0.0) + node.self_cost[index]
    return out


def stack_of(profile: Profile, leaf: str) -> list[str]:
    """Function names from the root to the first node of `leaf` with self cost."""
    for node in profile.tree.nodes():
        if node.frame_id >= 0 and profile.frames[node.frame_id].function == leaf \
                and any(node.self_cost):
            names = []
            while node is not None and node.frame_id >= 0:
                names.append(profile.frames[node.frame_id].function)
                node = node.parent
            return names[::-1]
    return []
