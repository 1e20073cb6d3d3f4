"""Distinct stacks and their counts, folded into a live Profile incrementally.

The data path of DESIGN.md section 7 for every collector whose runtime keeps
a table of stacks (sampler, heap) or streams them (attach): each distinct
stack is symbolized and inserted into the calling-context trees once; after
that a change of its counts adds the difference along its path (self cost of
its leaf, totals of the leaf and every ancestor) and to its leaf's line and
address costs.  So the work follows the stacks that changed, not the samples
or the size of the profile; `snapshot()` copies the trees' columns (memcpy).

A stack whose frames include an address no mapping knew yet ("0x7f..." before
a dlopen was logged) is kept with its addresses; when new mappings arrive,
`resymbolize()` looks at those again and, if any now resolves, rebuilds the
trees from every stack's path (rare: the tree path of a resolved stack is
read back from the old tree, nothing is symbolized twice).

Not thread-safe: collectors call it under their symbol lock.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from proftui.collectors.model.lines import record_code_cost
from proftui.collectors.model.profile import (
    CallTree,
    CodeSite,
    Frame,
    FrameTable,
    FunctionCost,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.symbols.stacks import StackFrames


@dataclass
class _Unresolved:
    """A stack with an unknown address: what to symbolize again later."""

    space: StackFrames
    ips: tuple[int, ...]  # as symbolized (a return address at the leaf already moved back)


@dataclass
class _Stacks:
    """Per-stack columns, index-aligned by stack index."""

    leaf: array = field(default_factory=lambda: array("q"))  # node in the merged tree
    part_leaf: array = field(default_factory=lambda: array("q"))  # node in its part's tree
    part: array = field(default_factory=lambda: array("q"))  # index into StackProfile.labels
    site: list[tuple[str, int, CodeSite] | None] = field(default_factory=list)


class StackProfile:
    """Stacks (added once each) and their costs, as an always-finalized Profile."""

    def __init__(self, metrics: tuple[Metric, ...]) -> None:
        self.metrics = metrics
        self.frames = FrameTable()
        self.tree = CallTree(len(metrics))
        self.labels: list[str] = []  # part labels, by part index
        self.part_trees: list[CallTree] = []
        self._label_index: dict[str, int] = {}
        self._keys: dict[Hashable, int] = {}
        self._stacks = _Stacks()
        self.costs = [array("d") for _ in metrics]  # per stack, what was added so far
        self._unresolved: dict[int, _Unresolved] = {}
        self.line_costs: dict[tuple[str, int], list[float]] = {}
        self.address_costs: dict[tuple[str, int], list[float]] = {}
        self.address_sites: dict[tuple[str, int], CodeSite] = {}
        # Per function group (FrameTable.group_of): self and total (recursion once) of
        # the whole profile, kept as costs change, so the flat profile of a snapshot
        # costs the number of functions, not of nodes.  `_outer[node]`: no ancestor of
        # the merged tree's `node` is the same function.
        self._fn_self: list[list[float]] = [[] for _ in metrics]
        self._fn_total: list[list[float]] = [[] for _ in metrics]
        self._outer = bytearray(1)

    def __len__(self) -> int:
        """Distinct stacks."""
        return len(self._stacks.leaf)

    def find(self, key: Hashable) -> int | None:
        """The index of the stack added under `key`, or None."""
        return self._keys.get(key)

    def stack(self, key: Hashable, part: str, space: StackFrames, ips: Sequence[int],
              leaf_is_return: bool = False) -> int:
        """The index of stack `key` (addresses `ips` innermost first, in `space`), added
        to the trees of the whole profile and of `part` on first sight.
        `leaf_is_return`: the innermost address is a return address (a heap stack's
        allocating call), whose call is one byte before it."""
        found = self._keys.get(key)
        if found is not None:
            return found
        ips = tuple(ips)
        if leaf_is_return and ips:
            ips = (ips[0] - 1, *ips[1:])
        frames = space.stack_frames(ips)
        index = self.stack_of_frames(key, part, frames,
                                     space.leaf_site(ips[0]) if ips else None)
        if any(not f.module for f in frames):
            self._unresolved[index] = _Unresolved(space, ips)
        return index

    def stack_of_frames(self, key: Hashable, part: str, frames: Sequence[Frame],
                        site: tuple[str, int, CodeSite] | None = None) -> int:
        """`stack` for a path of frames known already (outermost first), e.g. a synthetic
        "[stack not recorded]" frame; `site` is the leaf's code location, if any."""
        found = self._keys.get(key)
        if found is not None:
            return found
        index = len(self._stacks.leaf)
        self._keys[key] = index
        part_index = self._label_index.get(part)
        if part_index is None:
            part_index = self._label_index[part] = len(self.labels)
            self.labels.append(part)
            self.part_trees.append(CallTree(len(self.metrics)))
        path = [self.frames.intern(f) for f in frames]
        s = self._stacks
        s.leaf.append(self._walk(path))
        s.part_leaf.append(self.part_trees[part_index].walk(path))
        s.part.append(part_index)
        s.site.append(site)
        for column in self.costs:
            column.append(0.0)
        return index

    def _walk(self, path: list[int]) -> int:
        """The merged tree's node at `path`; new nodes get their `_outer` flag."""
        tree, frames, outer = self.tree, self.frames, self._outer
        node, groups = 0, set()
        for frame_id in path:
            found = tree.find_child(node, frame_id)
            group = frames.group_of(frame_id)
            if found is None:
                found = tree.child(node, frame_id)
                outer.append(group not in groups)
            groups.add(group)
            node = found
        groups_now = frames.group_count()
        for column in (*self._fn_self, *self._fn_total):
            column.extend([0.0] * (groups_now - len(column)))
        return node

    def _add_functions(self, leaf: int, values: Sequence[float]) -> None:
        """`values` into the leaf's function's self cost, and into the total of every
        function on the path, once each (at its outermost node)."""
        tree, frames, outer = self.tree, self.frames, self._outer
        group = frames.group_of(tree.frames[leaf])
        nodes = []
        node, parents = leaf, tree.parents
        while node > 0:
            if outer[node]:
                nodes.append(frames.group_of(tree.frames[node]))
            node = parents[node]
        for m, value in enumerate(values):
            if value:
                self._fn_self[m][group] += value
                total = self._fn_total[m]
                for g in nodes:
                    total[g] += value

    def functions(self) -> dict[int, FunctionCost]:
        """Per function (its representative frame id): self and total of the whole
        profile, as `views.function_costs` would compute them from the tree."""
        out: dict[int, FunctionCost] = {}
        frames, selfs, totals = self.frames, self._fn_self, self._fn_total
        for group in range(frames.group_count()):
            own = [column[group] for column in selfs]
            total = [column[group] for column in totals]
            if any(total) or any(own):
                out[frames.representative(group)] = FunctionCost(own, total)
        return out

    def add(self, index: int, values: Sequence[float]) -> None:
        """Add `values` (per metric; may be negative) to stack `index`'s costs."""
        s = self._stacks
        leaf = s.leaf[index]
        self.tree.add_along(leaf, values)
        self._add_functions(leaf, values)
        self.part_trees[s.part[index]].add_along(s.part_leaf[index], values)
        for column, value in zip(self.costs, values, strict=False):
            column[index] += value
        site = s.site[index]
        if site is not None:
            self._add_code(site, values)

    def set(self, index: int, values: Sequence[float]) -> None:
        """Make stack `index`'s costs `values` (counters read whole, e.g. heap buckets)."""
        delta = [v - column[index] for v, column in zip(values, self.costs, strict=False)]
        if any(delta):
            self.add(index, delta)

    def _add_code(self, site: tuple[str, int, CodeSite], values: Sequence[float]) -> None:
        module, address, code = site
        record_code_cost(self.address_costs, self.address_sites, self.line_costs, module,
                         address, code, values)

    def resymbolize(self) -> bool:
        """Look at the stacks with unknown addresses again (new mappings arrived); when
        one now resolves, rebuild the trees.  True if anything changed."""
        if not self._unresolved:
            return False
        for space in {id(item.space): item.space for item in self._unresolved.values()}.values():
            space.forget_unresolved()
        changed: dict[int, list[Frame]] = {}
        for index, item in self._unresolved.items():
            frames = item.space.stack_frames(item.ips)
            old = self.tree.path(self._stacks.leaf[index])
            if [self.frames.intern(f) for f in frames] != old:
                changed[index] = frames
        if not changed:
            return False
        self._rebuild(changed)
        return True

    def _rebuild(self, changed: dict[int, list[Frame]]) -> None:
        old_tree, s = self.tree, self._stacks
        paths: list[list[int]] = []
        for index in range(len(s.leaf)):
            frames = changed.get(index)
            if frames is None:
                paths.append(old_tree.path(s.leaf[index]))
                continue
            paths.append([self.frames.intern(f) for f in frames])
            item = self._unresolved[index]
            if item.ips:
                s.site[index] = item.space.leaf_site(item.ips[0])
            if all(f.module for f in frames):
                del self._unresolved[index]
        self.tree = CallTree(len(self.metrics))
        self.part_trees = [CallTree(len(self.metrics)) for _ in self.labels]
        self.line_costs, self.address_costs, self.address_sites = {}, {}, {}
        self._outer = bytearray(1)
        self._fn_self = [[] for _ in self.metrics]
        self._fn_total = [[] for _ in self.metrics]
        totals = [array("d", column) for column in self.costs]
        for column in self.costs:
            for i in range(len(column)):
                column[i] = 0.0
        for index, path in enumerate(paths):
            s.leaf[index] = self._walk(path)
            s.part_leaf[index] = self.part_trees[s.part[index]].walk(path)
            values = [column[index] for column in totals]
            if any(values):
                self.add(index, values)

    def snapshot(self, meta: ProfileMeta) -> Profile:
        """An independent, finalized Profile of everything added so far, carrying `meta`.

        With one part, the part's tree is the whole profile's (the same object)."""
        tree = self.tree.copy()
        if len(self.labels) == 1:
            parts = {self.labels[0]: tree}
        else:
            parts = {label: t.copy() for label, t in zip(self.labels, self.part_trees,
                                                          strict=True)}
        return Profile(meta=meta, metrics=self.metrics, frames=FrameTable(list(self.frames)),
                       tree=tree, parts=parts, functions=self.functions(),
                       line_costs={k: list(v) for k, v in self.line_costs.items()},
                       address_costs={k: list(v) for k, v in self.address_costs.items()},
                       address_sites=dict(self.address_sites))
