"""Distinct stacks and their counts, folded into a live Profile incrementally.

The data path of docs/architecture.md section 4 for every collector whose runtime keeps
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

The per-frame work is native (collectors/model/core.py): a stack's addresses become
frame ids in one call (`AddressCache`: each distinct address symbolized once), new
stacks wait as paths until something reads the trees and are then inserted in one
call, and a count change is added along its path in one call.  A snapshot shares
the trees it hands out (copy on write: the next change copies them first), so a
headless run that ends with one snapshot never copies its tree, and its totals are
summed only if something reads them (storage saves self costs alone).

Not thread-safe: collectors call it under their symbol lock.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from proftui.collectors.model import core
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
from proftui.collectors.model.slices import CodeKeys, SliceRecorder, index_of
from proftui.collectors.symbols.stacks import StackFrames

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

    def __init__(self, metrics: tuple[Metric, ...], code_costs: bool = True,
                 merge_equal: bool = False) -> None:
        """`code_costs`: also keep costs per source line and instruction (annotated
        source); a table only ever read stack by stack (a pusher's) goes without.
        `merge_equal`: stacks whose addresses differ but whose part, frames and leaf
        site are equal (return addresses within one call line) are one stack: no view
        can tell them apart, and the agent's per-process tables hold ~40% fewer."""
        self.metrics = metrics
        self.code_costs = code_costs
        # (part, frame ids, leaf site) -> index of a resolved stack (merge_equal)
        self._equal: dict[tuple[str, bytes, object], int] | None = {} if merge_equal else None
        self.frames = FrameTable()
        self._tree = CallTree(len(metrics))
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
        self._fn_self: list[array] = [array("d") for _ in metrics]
        self._fn_total: list[array] = [array("d") for _ in metrics]
        self._outer = bytearray(1)
        self._groups = array("i")  # FrameTable.group_ids(), as _group_ids() keeps it
        # id(space) -> its (address, is the leaf) -> frame ids: each address interned once
        self._address_ids: dict[int, core.AddressCache] = {}
        # Stacks added since the trees last took them: their paths, waiting to be
        # inserted together (`_flush`); stack `_pending_from + i` is path i.
        self._pending = array("i")
        self._pending_offsets = array("q", [0])
        self._pending_from = 0
        # Trees handed out by the last snapshot: copied before they change again.
        self._shared_tree = False
        self._shared_parts: set[int] = set()
        # stacks whose costs moved since the last `changes()`, and what it handed out
        self._moved: set[int] = set()
        self._handed = [array("d") for _ in metrics]
        self._slices: SliceRecorder | None = None  # costs over time, once timed
        self._generation = 0  # rebuild() count
        self._code_keys = CodeKeys()  # stacks' leaf code keys for the slices' index
        # Self costs changed without their totals (set_many): the merged tree, the
        # function totals and these parts are summed again before they are read.
        self._stale = False
        self._stale_parts: set[int] = set()

    def __len__(self) -> int:
        """Distinct stacks."""
        return len(self._stacks.leaf)

    @property
    def tree(self) -> CallTree:
        """The whole profile's tree, every stack added so far inserted."""
        self._flush()
        return self._tree

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
        if leaf_is_return and ips:
            ips = (ips[0] - 1, *ips[1:])
        path, known = self._path(space, ips)
        site = space.leaf_site(ips[0]) if ips else None
        if known and self._equal is not None:
            # Only resolved stacks: an unresolved one's frames may still change
            # (resymbolize), and merged stacks could not be told apart then.
            equal = (part, path.tobytes(), site)
            found = self._equal.get(equal)
            if found is not None:
                self._keys[key] = found
                return found
            index = self._equal[equal] = self._add_stack(key, part, path, site)
            return index
        index = self._add_stack(key, part, path, site)
        if not known:
            self._unresolved[index] = _Unresolved(space, tuple(ips))
        return index

    def _path(self, space: StackFrames, ips: Sequence[int]) -> tuple[array, bool]:
        """Frame ids of `ips` (outermost first) and whether every address resolved; each
        distinct address of a space is symbolized and interned once (one that found no
        module is asked again each time: mappings may have arrived since)."""
        cache = self._address_ids.get(id(space))
        if cache is None:
            cache = self._address_ids[id(space)] = core.AddressCache()
        path, missing = cache.path(ips)
        if path is not None:
            return path, True
        known = True
        extra: dict[tuple[int, bool], list[int]] = {}
        for address, leaf in missing:
            frames = space.frames_at(address, leaf)
            ids = [self.frames.intern(f) for f in frames]
            if all(f.module for f in frames):
                cache.put(address, leaf, ids)
            else:
                extra[(address, leaf)] = ids
                known = False
        path, missing = cache.path(ips, extra)
        assert path is not None and not missing
        return path, known

    def stack_of_frames(self, key: Hashable, part: str, frames: Sequence[Frame],
                        site: tuple[str, int, CodeSite] | None = None) -> int:
        """`stack` for a path of frames known already (outermost first), e.g. a synthetic
        "[stack not recorded]" frame; `site` is the leaf's code location, if any."""
        found = self._keys.get(key)
        if found is not None:
            return found
        return self._add_stack(key, part, array("i", [self.frames.intern(f) for f in frames]),
                               site)

    def stack_of_ids(self, key: Hashable, part: str, path: array,
                     site: tuple[str, int, CodeSite] | None = None,
                     source: tuple[StackProfile, int] | None = None) -> int:
        """`stack_of_frames` for a path of this table's own frame ids (`frames.intern`),
        outermost first: another table's stacks copied without hashing each frame again.
        `source`: the table and index it is copied from, whose unknown addresses this
        table then looks at again too (`resymbolize`)."""
        found = self._keys.get(key)
        if found is not None:
            return found
        index = self._add_stack(key, part, path, site)
        unresolved = source[0]._unresolved.get(source[1]) if source is not None else None
        if unresolved is not None:
            self._unresolved[index] = unresolved
        return index

    def _add_stack(self, key: Hashable, part: str, path: array,
                   site: tuple[str, int, CodeSite] | None) -> int:
        index = len(self._stacks.leaf)
        part_index = self._label_index.get(part)
        if part_index is None:
            # While there is one part its tree is the whole profile's; a second part
            # gives the first its own copy (same node ids), then each grows apart.
            if len(self.labels) == 1:
                self._flush()
                self._own_tree()
                self.part_trees[0] = self._tree.copy()
            part_index = self._label_index[part] = len(self.labels)
            self.labels.append(part)
            self.part_trees.append(self._tree if part_index == 0 else
                                   CallTree(len(self.metrics)))
        self._keys[key] = index
        s = self._stacks
        s.leaf.append(-1)  # set when the trees take the stack (_flush)
        s.part_leaf.append(-1)
        s.part.append(part_index)
        s.site.append(site)
        for column in self.costs:
            column.append(0.0)
        self._pending.extend(path)
        self._pending_offsets.append(len(self._pending))
        return index

    def _own_tree(self) -> None:
        """The merged tree is about to change: copy it first if a snapshot holds it."""
        if self._shared_tree:
            shared = self._tree
            self._tree = shared.copy(take_index=True)
            if self.part_trees and self.part_trees[0] is shared:
                self.part_trees[0] = self._tree
            self._shared_tree = False

    def _own_part(self, part: int) -> CallTree:
        """Part `part`'s tree, copied first if a snapshot holds it."""
        tree = self.part_trees[part]
        if tree is self._tree:
            self._own_tree()
            return self._tree
        if part in self._shared_parts:
            tree = self.part_trees[part] = tree.copy(take_index=True)
            self._shared_parts.discard(part)
        return tree

    def _flush(self) -> None:
        """Insert the stacks added since the last call into the trees, in order (each
        tree's nodes are made in the order its stacks came)."""
        first = self._pending_from
        count = len(self._stacks.leaf) - first
        if count == 0:
            return
        self._own_tree()
        paths, offsets = self._pending, self._pending_offsets
        leaves = core.insert_paths(self._tree, paths, offsets, self._outer,
                                   self._group_ids(), self.frames.group_count())
        groups_now = self.frames.group_count()
        for column in (*self._fn_self, *self._fn_total):
            column.frombytes(bytes(8 * (groups_now - len(column))))
        s = self._stacks
        s.leaf[first:] = array("q", leaves)
        if len(self.labels) == 1:
            s.part_leaf[first:] = array("q", leaves)
        else:
            by_part: dict[int, list[int]] = {}
            for i in range(count):
                by_part.setdefault(s.part[first + i], []).append(i)
            for part, members in by_part.items():
                tree = self._own_part(part)
                sub, sub_offsets = array("i"), array("q", [0])
                for i in members:
                    sub.extend(paths[offsets[i]:offsets[i + 1]])
                    sub_offsets.append(len(sub))
                part_leaves = core.insert_paths(tree, sub, sub_offsets, None, None, 0)
                for i, leaf in zip(members, part_leaves, strict=True):
                    s.part_leaf[first + i] = leaf
        self._pending = array("i")
        self._pending_offsets = array("q", [0])
        self._pending_from = len(s.leaf)

    def _add_along(self, leaf: int, values: Sequence[float]) -> None:
        """`values` into the merged tree's `leaf` (self, and total up to the root) and
        into the functions: the leaf's self cost, every function on the path's total
        once (at its outermost node).  One walk up, in the native core."""
        core.add_along(self._tree, leaf, values, self._outer, self._group_ids(),
                       self._fn_self, self._fn_total)

    def _group_ids(self) -> array:
        """FrameTable.group_ids as an int32 column, extended as frames are interned."""
        groups, have = self.frames.group_ids(), self._groups
        if len(have) < len(groups):
            have.extend(groups[len(have):])
        return have

    def functions(self) -> dict[int, FunctionCost]:
        """Per function (its representative frame id): self and total of the whole
        profile, as `views.function_costs` would compute them from the tree."""
        self._flush()
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
        self._flush()
        self._own_tree()
        s = self._stacks
        self._add_along(s.leaf[index], values)
        part_index = s.part[index]
        if self.part_trees[part_index] is not self._tree:
            self._own_part(part_index).add_along(s.part_leaf[index], values)
        for column, value in zip(self.costs, values, strict=False):
            column[index] += value
        self._moved.add(index)
        site = s.site[index]
        if site is not None and self.code_costs:
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
        the self costs alone, and every total is summed again when next read: cheaper
        than walking up from each stack.  With `defer_totals` (a headless run applying
        what it drained every second) that holds for any batch."""
        self._set_each(updates, defer_totals)

    def add_columns(self, index: array, values: list[array], defer_totals: bool = False) -> None:
        """`add` for a batch as columns (an index may come more than once), as
        `set_many` applies its batch: stack `index[e]` (array('q')) gains `values[m][e]`
        (one array('d') per metric); summed in C, in entry order (a sampled program's
        batch is about one entry per sample).  An entry of zeros adds nothing
        (`changes()` leaves it out)."""
        self._flush()
        n = len(index)
        if not defer_totals and n * BATCH_DEPTH <= len(self._tree):
            for e, stack in enumerate(index):
                row = [column[e] for column in values]
                if any(row):
                    self.add(stack, row)
            return
        if not n:
            return
        s = self._stacks
        self._own_tree()
        core.add_rows(self._tree.selfs, s.leaf, index, values, None, 0)
        for column, added in zip(self.costs, values, strict=True):
            core.scatter_add(column, index, added, 0, n)
        touched_parts: set[int] = set()
        if len(self.labels) > 1:
            parts = s.part
            touched_parts = {parts[stack] for stack in index}
            for part in touched_parts:
                core.add_rows(self._own_part(part).selfs, s.part_leaf, index, values, parts,
                              part)
        self._moved.update(index)
        if self.code_costs:
            sites = s.site
            for e, stack in enumerate(index):
                site = sites[stack]
                row = [column[e] for column in values]
                if site is not None and any(row):
                    self._add_code(site, row)
        self._totals_moved(touched_parts, defer_totals)

    def _set_each(self, updates: Sequence[tuple[int, Sequence[float]]],
                  defer_totals: bool) -> None:
        """`set_many`: each entry's change is worked out after the ones before it (an
        index may come twice)."""
        self._flush()
        if not defer_totals and len(updates) * BATCH_DEPTH <= len(self._tree):
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
            self._own_tree()
            leaf, part = s.leaf[index], s.part[index]
            part_tree = None if shared else self._own_part(part)
            for m, value in enumerate(delta):
                self._tree.selfs[m][leaf] += value
                self.costs[m][index] += value
                if part_tree is not None:
                    part_tree.selfs[m][s.part_leaf[index]] += value
            if not shared:
                touched_parts.add(part)
            self._moved.add(index)
            site = s.site[index]
            if site is not None and self.code_costs:
                self._add_code(site, delta)
        if updates:
            self._totals_moved(touched_parts, defer_totals)

    def _totals_moved(self, touched_parts: AbstractSet[int], defer_totals: bool) -> None:
        """Self costs changed without their totals: the trees' are summed again when
        read (none kept meanwhile); the function totals now unless `defer_totals`."""
        self._tree.invalidate_totals()
        for part in touched_parts:
            self.part_trees[part].invalidate_totals()
        self._stale = True
        self._stale_parts |= touched_parts
        if not defer_totals:
            self._refresh_totals()

    def _refresh_totals(self) -> None:
        """Where self costs changed without their totals (`set_many`): the trees' totals
        are summed again when read, the function totals now."""
        if not self._stale:
            return
        self._own_tree()
        self._tree.invalidate_totals()
        for part in self._stale_parts:
            if self.part_trees[part] is not self._tree:
                self._own_part(part).invalidate_totals()
        self._sum_functions()
        self._stale, self._stale_parts = False, set()

    def _sum_functions(self) -> None:
        """The per-function totals again from the merged tree's columns (one pass)."""
        sums = self._tree.function_sums(self._group_ids(), self.frames.group_count(),
                                        self._outer)
        self._fn_self, self._fn_total = sums.selfs, sums.totals

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
        self._flush()
        self._generation += 1
        self._code_keys = CodeKeys()  # sites may change below
        self._stale, self._stale_parts = False, set()  # every total is added up again
        s = self._stacks
        flat, offsets = core.paths_of(self._tree, s.leaf)
        paths, path_offsets = array("i"), array("q", [0])
        for index in range(len(s.leaf)):
            frames = changed.get(index)
            if frames is None:
                paths.extend(flat[offsets[index]:offsets[index + 1]])
            else:
                paths.extend([self.frames.intern(f) for f in frames])
                item = self._unresolved[index]
                if item.ips:
                    s.site[index] = item.space.leaf_site(item.ips[0])
                if all(f.module for f in frames):
                    del self._unresolved[index]
            path_offsets.append(len(paths))
        self._tree = CallTree(len(self.metrics))
        self.part_trees = [self._tree] if len(self.labels) == 1 else [
            CallTree(len(self.metrics)) for _ in self.labels]
        self._shared_tree, self._shared_parts = False, set()
        self.line_costs, self.address_costs, self.address_sites = {}, {}, {}
        self._outer = bytearray(1)
        self._fn_self = [array("d") for _ in self.metrics]
        self._fn_total = [array("d") for _ in self.metrics]
        totals = [array("d", column) for column in self.costs]
        for column in self.costs:
            column[:] = array("d", bytes(8 * len(column)))
        self._pending, self._pending_offsets, self._pending_from = paths, path_offsets, 0
        self._flush()
        for index in range(len(s.leaf)):
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
        moved, deltas = self.changes_columns()
        return [(index, list(row)) for index, *row in zip(moved, *deltas, strict=True)]

    def changes_columns(self) -> tuple[array, list[array]]:
        """`changes()` as columns: the stacks that moved, in index order (array('q')), and
        each one's change per metric (one array('d') each)."""
        handed = self._handed
        for column in handed:
            column.extend([0.0] * (len(self.costs[0]) - len(column)))
        moved = array("q", sorted(self._moved))
        self._moved.clear()
        return core.take_changes(self.costs, handed, moved)

    def has_changes(self) -> bool:
        """Whether `changes()` would hand out anything (costs moved since it last did)."""
        return bool(self._moved)

    def stack_path(self, index: int) -> tuple[str, list[int]]:
        """Stack `index`'s part label and frame ids (outermost first, ids of `frames`)."""
        s = self._stacks
        tree = self.tree  # every stack inserted
        return self.labels[s.part[index]], tree.path(s.leaf[index])

    def stack_paths(self, indices: Sequence[int]) -> tuple[list[str], array, array]:
        """`stack_path` of many stacks at once (one walk in C, not one per frame in
        Python): their part labels, and their frame ids end to end, stack j's being
        `flat[offsets[j]:offsets[j + 1]]`."""
        s = self._stacks
        tree = self.tree  # every stack inserted
        flat, offsets = core.paths_of(tree, [s.leaf[i] for i in indices])
        return [self.labels[s.part[i]] for i in indices], flat, offsets

    def stack_leaves(self, indices: Sequence[int]) -> list[int]:
        """The node of the merged tree (`tree`) where each of stacks `indices` ends: the
        same node until `rebuild()` (`generation()` tells)."""
        s = self._stacks
        self.tree  # noqa: B018 - every stack inserted
        return [s.leaf[i] for i in indices]

    def stack_site(self, index: int) -> tuple[str, int, CodeSite] | None:
        """Stack `index`'s leaf code site (module, link-time address, CodeSite), if known."""
        return self._stacks.site[index]

    def generation(self) -> int:
        """Changes when `rebuild()` gave stacks new paths (cached paths are then stale)."""
        return self._generation

    def snapshot(self, meta: ProfileMeta) -> Profile:
        """An independent, finalized Profile of everything added so far, carrying `meta`.
        Its trees are this builder's own, which copies them before it changes them again.

        With one part, the part's tree is the whole profile's (the same object)."""
        self._flush()
        if meta.complete:  # nothing more comes: the child indexes are not needed now
            for done in (self._tree, *self.part_trees):
                done.drop_index()
        self._refresh_totals()
        tree = self._tree
        self._shared_tree = True
        if len(self.labels) == 1:
            parts = {self.labels[0]: tree}
        else:
            parts = dict(zip(self.labels, self.part_trees, strict=True))
            self._shared_parts = set(range(len(self.labels)))
        slices = None
        if self._slices is not None:
            st = self._stacks
            self._code_keys.update(st.site)
            slices = self._slices.snapshot(index_of(self.labels, st.leaf, st.part,
                                                    st.part_leaf, self._code_keys))
        return Profile(meta=meta, metrics=self.metrics, frames=FrameTable(list(self.frames)),
                       tree=tree, parts=parts, functions=self.functions(), slices=slices,
                       line_costs={k: list(v) for k, v in self.line_costs.items()},
                       address_costs={k: list(v) for k, v in self.address_costs.items()},
                       address_sites=dict(self.address_sites))
