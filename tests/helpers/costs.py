"""A profile's call tree read by function name: self costs, inclusive totals, call paths."""

from __future__ import annotations

from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import FlatEntry, flat_profile


def self_costs(profile: Profile, metric: int = 0) -> dict[str, float]:
    """Self cost of metric `metric` per function name, summed over its nodes."""
    totals: dict[str, float] = {}
    for node in profile.tree.nodes():
        name = profile.frames[node.frame_id].function
        totals[name] = totals.get(name, 0.0) + node.self_cost[metric]
    return totals


def total_of(profile: Profile, function: str, metric: int = 0) -> float:
    """Inclusive cost of `function` in `metric` (its nodes' totals, recursion not
    counted twice)."""
    total = 0.0
    for node in profile.tree.nodes():
        if profile.frames[node.frame_id].function == function:
            above = node.parent
            while above is not None and (above.frame_id < 0 or
                                         profile.frames[above.frame_id].function != function):
                above = above.parent
            if above is None:
                total += node.total_cost[metric]
    return total


def paths_to(profile: Profile, function: str) -> list[list[str]]:
    """Call chains (outermost first) of every tree node of `function`."""
    out = []
    for node in profile.tree.nodes():
        if profile.frames[node.frame_id].function == function:
            out.append([profile.frames[f].function for f in node.path()])
    return out


def names_on_paths(profile: Profile) -> list[list[str]]:
    """Every root-to-leaf path of function names (outermost first)."""
    paths = []
    for node in profile.tree.nodes():
        if not node.children:
            paths.append([profile.frames[i].function for i in node.path()])
    return paths


def flat_rows(profile: Profile) -> dict[str, FlatEntry]:
    """The flat profile's rows by function name."""
    return {e.frame.function: e for e in flat_profile(profile)}


def self_of(profile: Profile, function: str, metric: int = 0) -> float:
    """The flat profile's self cost of `function` in metric `metric` (0 without a row)."""
    entry = flat_rows(profile).get(function)
    return entry.self_cost[metric] if entry is not None else 0.0
