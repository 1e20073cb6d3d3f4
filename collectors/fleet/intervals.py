"""What a collector added since the last interval, as rows keyed by (thread, stack hash).

Two sources, one shape:

* `TableIntervals` - collectors that keep their live profile in stack tables
  (sampler, heap, attach, --heap's two): `StackProfile.changes()` hands out the
  stacks that moved and by how much, in time proportional to them; each stack's
  path and hash are worked out once (again only after a `rebuild()`).
* `SnapshotIntervals` - collectors without one (instrument, gprof): the interval is
  the difference of two snapshots (`model.diff.subtract`), walked node by node.

Both are called with the collector's lock held, right after `collect()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from proftui.collectors.fleet.stacks import StackHasher, StackRecord
from proftui.collectors.model.diff import subtract
from proftui.collectors.model.profile import CallTree, Metric, Profile
from proftui.collectors.stacktable.builder import StackProfile

Key = tuple[str, int]  # (thread label, stack hash)


@dataclass
class Rows:
    """One interval's rows: costs per metric and call counts (None: unknown) per key."""

    costs: dict[Key, list[float]] = field(default_factory=dict)
    calls: dict[Key, int] = field(default_factory=dict)

    def add(self, key: Key, values: Sequence[float], offset: int, width: int) -> None:
        row = self.costs.get(key)
        if row is None:
            row = self.costs[key] = [0.0] * width
        for i, value in enumerate(values):
            row[offset + i] += value


class TableIntervals:
    """Intervals of live stack tables laid side by side (their metrics concatenated)."""

    def __init__(self, tables: Sequence[StackProfile], hasher: StackHasher) -> None:
        self.tables = list(tables)
        self.metrics: tuple[Metric, ...] = tuple(m for t in self.tables for m in t.metrics)
        self.has_calls = False
        self.records: dict[int, StackRecord] = {}
        self._hasher = hasher
        # per table: stack index -> key, valid for one generation; frame id -> digest
        self._keys: list[dict[int, Key]] = [{} for _ in self.tables]
        self._generations = [t.generation() for t in self.tables]
        self._digests: list[list[bytes]] = [[] for _ in self.tables]
        # per table: merged-tree node -> the hash chain of its path (StackHasher's
        # prefix), valid for one generation: stacks share their callers, so a new stack
        # hashes only the nodes no stack before it ended under
        self._prefixes: list[list[bytes | None]] = [[b""] for _ in self.tables]

    def take(self, _profile: Profile | None = None) -> Rows:
        rows = Rows()
        width = len(self.metrics)
        offset = 0
        for i, table in enumerate(self.tables):
            if table.generation() != self._generations[i]:
                self._keys[i].clear()
                self._prefixes[i] = [b""]
                self._generations[i] = table.generation()
            keys = self._keys[i]
            moved, deltas = table.changes_columns()
            self._add_keys(i, table, [index for index in moved if index not in keys])
            for index, *delta in zip(moved, *deltas, strict=True):
                rows.add(keys[index], delta, offset, width)
            offset += len(table.metrics)
        return rows

    def _add_keys(self, i: int, table: StackProfile, indices: list[int]) -> None:
        """The keys of stacks `indices` of table `i`, their paths read in one batch."""
        if not indices:
            return
        threads, flat, offsets = table.stack_paths(indices)
        digests = self._digests[i]
        frames = table.frames
        if len(digests) < len(frames):
            digest = self._hasher.frame_digest
            digests.extend(digest(frames[f]) for f in range(len(digests), len(frames)))
        keys = self._keys[i]
        tree = table.tree
        parents, tree_frames = tree.parents, tree.frames
        prefixes = self._prefixes[i]
        prefixes.extend([None] * (len(parents) - len(prefixes)))
        for j, (index, leaf) in enumerate(zip(indices, table.stack_leaves(indices),
                                              strict=True)):
            below: list[int] = []  # nodes from the leaf up to one whose prefix is known
            node = leaf
            while prefixes[node] is None:
                below.append(node)
                node = parents[node]
            prefix = prefixes[node]
            assert prefix is not None
            for node in reversed(below):
                prefix = prefixes[node] = StackHasher.extend(prefix,
                                                             digests[tree_frames[node]])
            site = table.stack_site(index)
            stack = StackHasher.finish(prefix, site)
            if stack not in self.records:
                path = flat[offsets[j]:offsets[j + 1]]
                self.records[stack] = StackRecord(frames.frames_of(path), site)
            keys[index] = threads[j], stack


class SnapshotIntervals:
    """Intervals as differences of whole snapshots (collectors without a stack table)."""

    def __init__(self, hasher: StackHasher) -> None:
        self.metrics: tuple[Metric, ...] = ()
        self.has_calls = False
        self.records: dict[int, StackRecord] = {}
        self._hasher = hasher
        self._last: Profile | None = None

    def take(self, profile: Profile | None) -> Rows:
        rows = Rows()
        if profile is None:
            return rows
        if not self.metrics:
            self.metrics = profile.metrics
            self.has_calls = any(c >= 0 for c in profile.tree.calls[1:])
        delta = profile if self._last is None else subtract(profile, self._last)
        self._last = profile
        order = {m.name: i for i, m in enumerate(delta.metrics)}
        index = [order.get(m.name) for m in self.metrics]
        parts: dict[str, CallTree] = delta.parts or {"": delta.tree}
        width = len(self.metrics)
        for thread, tree in parts.items():
            chain: dict[int, bytes] = {0: b""}
            parents, frames, calls = tree.parents, tree.frames, tree.calls
            digest, extend = self._hasher.frame_digest, self._hasher.extend
            for node in tree.preorder():
                chain[node] = extend(chain[parents[node]], digest(delta.frames[frames[node]]))
                values = [0.0 if j is None else tree.selfs[j][node] for j in index]
                count = calls[node] if self.has_calls else -1
                if not any(values) and count <= 0:
                    continue
                stack = self._hasher.finish(chain[node], None)
                if stack not in self.records:
                    self.records[stack] = StackRecord(
                        tuple(delta.frames[f] for f in tree.path(node)), None)
                key = (thread, stack)
                rows.add(key, values, 0, width)
                if count > 0:
                    rows.calls[key] = rows.calls.get(key, 0) + count
        return rows
