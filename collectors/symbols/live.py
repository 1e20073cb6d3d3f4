"""A live profile of sampled stacks built incrementally (sampler and attach modes).

Rebuilding the whole Profile from every distinct stack on each snapshot costs
time in proportion to the stacks seen so far (tens of thousands on an
interpreter after a few seconds, ~100 ms each time), which made the live TUI
spend a third of a CPU on itself.  `LiveStacks` keeps one accumulating Profile
and folds in only the stacks whose counts moved since the last build; each
build hands out an independent copy (views must never see it change), which
costs in proportion to the tree's nodes, not to the stacks.

When symbols may resolve differently (new mappings: a cached "0x..." frame of
an address may now have a name) the collector asks for `rebuild()`, and the
next build starts from every stack again.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

from proftui.collectors.model.profile import FrameTable, Metric, Profile, ProfileMeta
from proftui.collectors.symbols.stacks import StackFrames, add_stack

# One stack to fold in: (part name, its address space, addresses innermost first, costs).
StackItem = tuple[str, StackFrames, Sequence[int], Sequence[float]]
Key = TypeVar("Key", bound=Hashable)  # a collector's stack key, e.g. (tid, addresses)


class LiveStacks(Generic[Key]):
    """Accumulated costs per stack key folded into a Profile on demand (not thread-safe:
    callers hold their symbolizer lock around `build`, their data lock around `add`)."""

    def __init__(self, metrics: tuple[Metric, ...]) -> None:
        self.metrics = metrics
        self._profile: Profile | None = None  # accumulating, never handed out
        # key -> costs added since the last build (the collector's aggregate holds the sums)
        self._fresh: dict[Key, list[float]] = {}

    def add(self, key: Key, costs: Sequence[float]) -> None:
        """Note that stack `key` gained `costs` (what the collector also adds to its sums)."""
        fresh = self._fresh.get(key)
        if fresh is None:
            self._fresh[key] = list(costs)
        else:
            for i, value in enumerate(costs):
                fresh[i] += value

    def rebuild(self) -> None:
        """Start over from every stack at the next build (symbols may have changed)."""
        self._profile = None
        self._fresh.clear()

    def take(self) -> tuple[bool, dict[Key, list[float]]]:
        """(whole: the next build needs every stack, the fresh costs per key); resets them.
        Call under the collector's data lock, then `build` outside it."""
        fresh, self._fresh = self._fresh, {}
        return self._profile is None, fresh

    def build(self, meta: ProfileMeta, stacks: Iterable[StackItem], whole: bool) -> Profile:
        """Fold `stacks` (every stack if `whole`, else the fresh costs of `take`) in and
        return a finalized copy carrying `meta`."""
        if whole or self._profile is None:
            self._profile = Profile(meta=ProfileMeta(mode=meta.mode), metrics=self.metrics)
        profile = self._profile
        for part, frames, ips, costs in stacks:
            add_stack(profile, part, frames, ips, list(costs))
        return copy_profile(profile, meta)


def copy_profile(profile: Profile, meta: ProfileMeta) -> Profile:
    """A finalized deep copy of `profile`'s trees and code costs with `meta` (same frame ids)."""
    assert profile.tree is not None
    out = Profile(meta=meta, metrics=profile.metrics, frames=FrameTable(list(profile.frames)),
                  tree=profile.tree.copy())
    out.parts = {name: tree.copy() for name, tree in profile.parts.items()}
    out.line_costs = {k: list(v) for k, v in profile.line_costs.items()}
    out.address_costs = {k: list(v) for k, v in profile.address_costs.items()}
    out.address_sites = dict(profile.address_sites)
    return out

