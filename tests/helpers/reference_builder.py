"""The pure-Python StackProfile the native core replaced (collectors/stacktable/builder.py
before csrc/core/), over the reference CallTree: what tests/unit/test_core.py compares
the native builder's snapshots with."""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from proftui.collectors.model.lines import record_code_cost
from proftui.collectors.model.profile import (
    CodeSite,
    Frame,
    FrameTable,
    FunctionCost,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.slices import CodeKeys, SliceRecorder, index_of
from proftui.collectors.symbols.stacks import StackFrames

from tests.helpers.reference_calltree import CallTree

# A batch of count changes is folded in by walking up from each stack (a path is about
# this many nodes) unless a pass over the whole tree costs less.
BATCH_DEPTH = 16


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
        # id(space) -> (address, is the leaf) -> frame ids: each address interned once
        self._address_ids: dict[int, dict[tuple[int, bool], tuple[int, ...]]] = {}
        # stacks whose costs moved since the last `changes()`, and what it handed out
        self._moved: set[int] = set()
        self._handed = [array("d") for _ in metrics]
        self._slices: SliceRecorder | None = None  # costs over time, once timed
        self._generation = 0  # rebuild() count
        # Self costs changed without their totals (set_many): the merged tree, the
        # function totals and these parts are summed again before they are read.
        self._stale = False
        self._stale_parts: set[int] = set()

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
        path, known = self._path(space, ips)
        index = self._add_stack(key, part, path, space.leaf_site(ips[0]) if ips else None)
        if not known:
            self._unresolved[index] = _Unresolved(space, ips)
        return index

    def _path(self, space: StackFrames, ips: tuple[int, ...]) -> tuple[list[int], bool]:
        """Frame ids of `ips` (outermost first) and whether every address resolved; each
        distinct address of a space is symbolized and interned once."""
        cache = self._address_ids.setdefault(id(space), {})
        path: list[int] = []
        known = True
        last = len(ips) - 1
        for depth in range(last, -1, -1):
            key = (ips[depth], depth == 0)
            ids = cache.get(key)
            if ids is None:
                frames = space.frames_at(*key)
                ids = cache[key] = tuple(self.frames.intern(f) for f in frames)
                if not all(f.module for f in frames):
                    del cache[key]  # may resolve once new mappings arrive
                    known = False
            path.extend(ids)
        return path, known

    def stack_of_frames(self, key: Hashable, part: str, frames: Sequence[Frame],
                        site: tuple[str, int, CodeSite] | None = None) -> int:
        """`stack` for a path of frames known already (outermost first), e.g. a synthetic
        "[stack not recorded]" frame; `site` is the leaf's code location, if any."""
        found = self._keys.get(key)
        if found is not None:
            return found
        return self._add_stack(key, part, [self.frames.intern(f) for f in frames], site)

    def _add_stack(self, key: Hashable, part: str, path: list[int],
                   site: tuple[str, int, CodeSite] | None) -> int:
        index = len(self._stacks.leaf)
        self._keys[key] = index
        part_index = self._label_index.get(part)
        if part_index is None:
            part_index = self._label_index[part] = len(self.labels)
            self.labels.append(part)
            # While there is one part its tree is the whole profile's; a second part
            # gives the first its own copy (same node ids), then each grows apart.
            if part_index == 1:
                self.part_trees[0] = self.tree.copy()
            self.part_trees.append(self.tree if part_index == 0 else
                                   CallTree(len(self.metrics)))
        s = self._stacks
        leaf = self._walk(path)
        s.leaf.append(leaf)
        s.part_leaf.append(leaf if len(self.labels) == 1 else
                           self.part_trees[part_index].walk(path))
        s.part.append(part_index)
        s.site.append(site)
        for column in self.costs:
            column.append(0.0)
        return index

    def _walk(self, path: list[int]) -> int:
        """The merged tree's node at `path`; new nodes get their `_outer` flag.  The
        known prefix is followed through the tree's index alone; the functions above
        are looked at only when a node is created."""
        tree = self.tree
        index = tree.index()
        node = 0
        depth = 0
        for frame_id in path:
            found = index.get(node << 32 | frame_id)
            if found is None:
                break
            node = found
            depth += 1
        else:
            return node
        group_of, frames, parents = self.frames.group_ids(), tree.frames, tree.parents
        groups = set()
        above = node
        while above > 0:
            groups.add(group_of[frames[above]])
            above = parents[above]
        outer = self._outer
        for frame_id in path[depth:]:
            group = group_of[frame_id]
            node = tree.child(node, frame_id)
            outer.append(group not in groups)
            groups.add(group)
        groups_now = self.frames.group_count()
        for column in (*self._fn_self, *self._fn_total):
            column.extend([0.0] * (groups_now - len(column)))
        return node

    def _add_along(self, leaf: int, values: Sequence[float]) -> None:
        """`values` into the merged tree's `leaf` (self, and total up to the root) and
        into the functions: the leaf's self cost, every function on the path's total
        once (at its outermost node).  One walk up."""
        tree, outer = self.tree, self._outer
        group_of, node_frames, parents = self.frames.group_ids(), tree.frames, tree.parents
        path, groups = [], []
        node = leaf
        while node >= 0:
            path.append(node)
            if node and outer[node]:
                groups.append(group_of[node_frames[node]])
            node = parents[node]
        leaf_group = group_of[node_frames[leaf]] if leaf else None
        for m, value in enumerate(values):
            if not value:
                continue
            tree.selfs[m][leaf] += value
            total = tree.totals[m]
            for node in path:
                total[node] += value
            if leaf_group is not None:
                self._fn_self[m][leaf_group] += value
            fn_total = self._fn_total[m]
            for g in groups:
                fn_total[g] += value

    def functions(self) -> dict[int, FunctionCost]:
        """Per function (its representative frame id): self and total of the whole
        profile, as `views.function_costs` would compute them from the tree."""
        self._refresh_totals()
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
        self._add_along(s.leaf[index], values)
        part = self.part_trees[s.part[index]]
        if part is not self.tree:
            part.add_along(s.part_leaf[index], values)
        for column, value in zip(self.costs, values, strict=False):
            column[index] += value
        self._moved.add(index)
        site = s.site[index]
        if site is not None:
            self._add_code(site, values)

    def set(self, index: int, values: Sequence[float]) -> None:
        """Make stack `index`'s costs `values` (counters read whole, e.g. heap buckets)."""
        delta = [v - column[index] for v, column in zip(values, self.costs, strict=False)]
        if any(delta):
            self.add(index, delta)

    def set_many(self, updates: Sequence[tuple[int, Sequence[float]]],
                 defer_totals: bool = False) -> None:
        """`set` for a batch.  A batch that touches many stacks compared with the size of
        the tree (the end of a recording, the first look at a big table) is applied to
        the self costs alone, then every total is summed again in one pass over the
        tree: cheaper than walking up from each stack.  With `defer_totals` (a headless
        run folding every second) that pass waits for the next snapshot, however many
        batches come before it."""
        if not defer_totals and len(updates) * BATCH_DEPTH <= len(self.tree):
            for index, values in updates:
                self.set(index, values)
            return
        s = self._stacks
        shared = len(self.labels) <= 1
        touched_parts: set[int] = set()
        for index, values in updates:
            delta = [v - column[index] for v, column in zip(values, self.costs, strict=False)]
            if not any(delta):
                continue
            leaf, part = s.leaf[index], s.part[index]
            for m, value in enumerate(delta):
                self.tree.selfs[m][leaf] += value
                self.costs[m][index] += value
                if not shared:
                    self.part_trees[part].selfs[m][s.part_leaf[index]] += value
            if not shared:
                touched_parts.add(part)
            self._moved.add(index)
            site = s.site[index]
            if site is not None:
                self._add_code(site, delta)
        self._stale_parts |= touched_parts
        self._stale = True
        if not defer_totals:
            self._refresh_totals()

    def _refresh_totals(self) -> None:
        """Sum every total again where self costs changed without them (`set_many`)."""
        if not self._stale:
            return
        self.tree.finalize()
        for part in self._stale_parts:
            if self.part_trees[part] is not self.tree:
                self.part_trees[part].finalize()
        self._sum_functions()
        self._stale, self._stale_parts = False, set()

    def _sum_functions(self) -> None:
        """The per-function totals again from the merged tree's columns (one pass)."""
        tree, group_of = self.tree, self.frames.group_ids()
        groups = self.frames.group_count()
        frames, outer = tree.frames.tolist(), self._outer
        keys = [group_of[f] if f >= 0 else 0 for f in frames]
        self._fn_self, self._fn_total = tree.sums_by(keys, outer, groups)

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
        self.rebuild(changed)
        return True

    def rebuild(self, changed: dict[int, list[Frame]] | None = None) -> None:
        """Fold every stack in again, from scratch: its path (read from the tree, or
        `changed[index]`'s frames) and what was added to it.  The trees, code costs and
        function totals come out as the incremental updates left them (tests check it)."""
        changed = changed or {}
        self._generation += 1
        self._stale, self._stale_parts = False, set()  # every total is added up again
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
        self.part_trees = [self.tree] if len(self.labels) == 1 else [
            CallTree(len(self.metrics)) for _ in self.labels]
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
            part = self.part_trees[s.part[index]]
            s.part_leaf[index] = s.leaf[index] if part is self.tree else part.walk(path)
            values = [column[index] for column in totals]
            if any(values):
                self.add(index, values)

    def add_at(self, when: float, index: int, values: Sequence[float],
               origin: float | None = None) -> None:
        """Note that stack `index` cost `values` at Unix time `when` (the timeline;
        the totals come from `add`/`set`); slices are counted from `origin` (the run's
        start), given with the first call."""
        if self._slices is None:
            self._slices = SliceRecorder(when if origin is None else origin, len(self.metrics))
        self._slices.add(when, index, values)

    def close_slices(self, before: float) -> None:
        """No more costs will come for times well before `before` (Unix seconds)."""
        if self._slices is not None:
            self._slices.close_before(before)

    def changes(self) -> list[tuple[int, list[float]]]:
        """(stack index, cost change per metric) of every stack whose costs moved since
        the last call: what an interval added (the fleet push sends these), in time
        proportional to the stacks that moved."""
        out = []
        handed = self._handed
        for column in handed:
            column.extend([0.0] * (len(self.costs[0]) - len(column)))
        for index in sorted(self._moved):
            delta = [c[index] - h[index] for c, h in zip(self.costs, handed, strict=True)]
            if any(delta):
                out.append((index, delta))
                for c, h in zip(self.costs, handed, strict=True):
                    h[index] = c[index]
        self._moved.clear()
        return out

    def stack_path(self, index: int) -> tuple[str, list[int]]:
        """Stack `index`'s part label and frame ids (outermost first, ids of `frames`)."""
        s = self._stacks
        return self.labels[s.part[index]], self.tree.path(s.leaf[index])

    def stack_site(self, index: int) -> tuple[str, int, CodeSite] | None:
        """Stack `index`'s leaf code site (module, link-time address, CodeSite), if known."""
        return self._stacks.site[index]

    def generation(self) -> int:
        """Changes when `rebuild()` gave stacks new paths (cached paths are then stale)."""
        return self._generation

    def snapshot(self, meta: ProfileMeta) -> Profile:
        """An independent, finalized Profile of everything added so far, carrying `meta`.

        With one part, the part's tree is the whole profile's (the same object)."""
        self._refresh_totals()
        tree = self.tree.copy()
        if len(self.labels) == 1:
            parts = {self.labels[0]: tree}
        else:
            parts = {label: t.copy() for label, t in zip(self.labels, self.part_trees,
                                                          strict=True)}
        slices = None
        if self._slices is not None:
            st = self._stacks
            slices = self._slices.snapshot(index_of(self.labels, st.leaf, st.part,
                                                    st.part_leaf, CodeKeys.of(st.site)))
        return Profile(meta=meta, metrics=self.metrics, frames=FrameTable(list(self.frames)),
                       tree=tree, parts=parts, functions=self.functions(), slices=slices,
                       line_costs={k: list(v) for k, v in self.line_costs.items()},
                       address_costs={k: list(v) for k, v in self.address_costs.items()},
                       address_sites=dict(self.address_sites))
