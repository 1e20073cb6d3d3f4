"""The pure-Python CallTree the native core replaced (collectors/model/calltree.py before
csrc/core/), kept as the reference its results must equal bit for bit
(tests/unit/test_core.py): same node ids, same columns, same float sums.  Its
structure columns are array('q') where the model's are array('i'); values compare equal.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import overload

ROOT_FRAME = -1  # frame id of the synthetic root node of every CallTree
NO_CALLS = -1  # `calls` column value: the call count is unknown
SLICE_NODES = 65536  # whole-tree passes copy columns to lists this many nodes at a time


def _column(n: int, value: float = 0.0) -> array:
    return array("d", [value]) * n


class Costs(Sequence[float]):
    """One node's costs across metrics, read and written through the tree's columns."""

    __slots__ = ("_columns", "_index")

    def __init__(self, columns: list[array], index: int) -> None:
        self._columns = columns
        self._index = index

    def __len__(self) -> int:
        return len(self._columns)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> list[float]: ...

    def __getitem__(self, i: int | slice) -> float | list[float]:
        if isinstance(i, slice):
            return [c[self._index] for c in self._columns[i]]
        return self._columns[i][self._index]

    def __setitem__(self, i: int, value: float) -> None:
        self._columns[i][self._index] = value

    def __iter__(self) -> Iterator[float]:
        index = self._index
        return (c[index] for c in self._columns)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(list(self))


class _CostRow:
    """A `CallNode` attribute: the node's row of the tree's `selfs` or `totals` columns,
    read as `Costs` and assigned one value per metric."""

    __slots__ = ("_columns",)

    def __init__(self, columns: str) -> None:
        self._columns = attrgetter(columns)

    def __get__(self, node: CallNode, owner: type | None = None) -> Costs:
        return Costs(self._columns(node.tree), node.index)

    def __set__(self, node: CallNode, values: Sequence[float]) -> None:
        for column, value in zip(self._columns(node.tree), values, strict=True):
            column[node.index] = value


class CallNode:
    """A view of node `index` of `tree`: cheap to make, equal when it names the same node."""

    __slots__ = ("index", "tree")

    def __init__(self, tree: CallTree, index: int) -> None:
        self.tree = tree
        self.index = index

    @property
    def frame_id(self) -> int:
        return self.tree.frames[self.index]

    @property
    def parent(self) -> CallNode | None:
        up = self.tree.parents[self.index]
        return None if up < 0 else CallNode(self.tree, up)

    @property
    def children(self) -> dict[int, CallNode]:
        """Frame id -> child view, in insertion order."""
        tree = self.tree
        return {tree.frames[c]: CallNode(tree, c) for c in tree.children(self.index)}

    self_cost = _CostRow("selfs")
    total_cost = _CostRow("totals")

    @property
    def calls(self) -> int | None:
        value = self.tree.calls[self.index]
        return None if value < 0 else value

    @calls.setter
    def calls(self, value: int | None) -> None:
        self.tree.calls[self.index] = NO_CALLS if value is None else value

    def add_calls(self, count: int) -> None:
        self.tree.add_calls(self.index, count)

    def child(self, frame_id: int) -> CallNode:
        """The child for `frame_id`, created empty if absent."""
        return CallNode(self.tree, self.tree.child(self.index, frame_id))

    def absorb(self, other: CallNode) -> None:
        """Add `other`'s self costs, calls and subtree into this node."""
        self.tree.absorb(self.index, other.tree, other.index)

    def path(self) -> list[int]:
        """Frame ids from the outermost caller down to this node (root excluded)."""
        return self.tree.path(self.index)

    def callers_up(self, limit: int | None) -> list[int]:
        """Frame ids from this node up towards the root (root excluded), at most `limit`."""
        return self.tree.callers_up(self.index, limit)

    def depth(self) -> int:
        """How many nodes from the root down to this one (the root's children are 1)."""
        return self.tree.depth(self.index)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CallNode) and other.index == self.index
                and other.tree is self.tree)

    def __hash__(self) -> int:
        return hash((id(self.tree), self.index))

    def __repr__(self) -> str:
        return (f"CallNode(frame={self.frame_id}, self={list(self.self_cost)}, "
                f"calls={self.calls})")


class CallTree:
    """Calling-context tree in columns; totals come from `finalize` (or `add_along`)."""

    __slots__ = ("_index", "calls", "cut_depth", "first_child", "frames", "last_child",
                 "n_metrics", "next_sibling", "parents", "selfs", "totals")

    def __init__(self, n_metrics: int) -> None:
        self.n_metrics = n_metrics
        self.parents = array("q", [-1])
        self.frames = array("q", [ROOT_FRAME])
        self.selfs = [_column(1) for _ in range(n_metrics)]
        self.totals = [_column(1) for _ in range(n_metrics)]
        self.calls = array("q", [NO_CALLS])
        self.first_child = array("q", [-1])
        self.last_child = array("q", [-1])
        self.next_sibling = array("q", [-1])
        # (parent << 32 | frame) -> child; built on first use (copies and loaded trees
        # never need it unless something adds to them).
        self._index: dict[int, int] | None = {}
        # Set by views that build the tree from paths cut at this depth (bottom-up,
        # callers): deeper callers are left out and views say so.  None: nothing cut.
        self.cut_depth: int | None = None

    # -- structure -------------------------------------------------------------------

    @property
    def root(self) -> CallNode:
        return CallNode(self, 0)

    def node(self, index: int) -> CallNode:
        return CallNode(self, index)

    def __len__(self) -> int:
        """Nodes, the root included."""
        return len(self.parents)

    def index(self) -> dict[int, int]:
        """`parent << 32 | frame` -> child node: the lookup `child` and `walk` use
        (read-only for callers; made on first use)."""
        return self._lookup()

    def _lookup(self) -> dict[int, int]:
        index = self._index
        if index is None:
            frames, parents = self.frames, self.parents
            index = {parents[i] << 32 | frames[i]: i for i in range(1, len(parents))}
            self._index = index
        return index

    def child(self, node: int, frame_id: int) -> int:
        """The child of `node` for `frame_id`, created (zero cost) if absent."""
        index = self._lookup()
        key = node << 32 | frame_id
        found = index.get(key)
        if found is not None:
            return found
        new = len(self.parents)
        index[key] = new
        self.parents.append(node)
        self.frames.append(frame_id)
        for column in self.selfs:
            column.append(0.0)
        for column in self.totals:
            column.append(0.0)
        self.calls.append(NO_CALLS)
        self.first_child.append(-1)
        self.last_child.append(-1)
        self.next_sibling.append(-1)
        last = self.last_child[node]
        if last < 0:
            self.first_child[node] = new
        else:
            self.next_sibling[last] = new
        self.last_child[node] = new
        return new

    def node_map(self, into: CallTree, frame_map: Sequence[int] | None = None) -> array:
        """For each node of this tree, the node of `into` at the same path (frame ids
        mapped through `frame_map`), -1 where `into` has none: where `fold` put it."""
        out = array("q", [0]) * len(self)
        lookup, parents, frames = into._lookup(), self.parents, self.frames
        for i in range(1, len(parents)):
            up = out[parents[i]]
            frame = frames[i] if frame_map is None else frame_map[frames[i]]
            found = lookup.get(up << 32 | frame) if up >= 0 else None
            out[i] = -1 if found is None else found
        return out

    def children(self, node: int) -> list[int]:
        """Child nodes of `node`, in insertion order."""
        out = []
        child, sibling = self.first_child[node], self.next_sibling
        while child >= 0:
            out.append(child)
            child = sibling[child]
        return out

    def walk(self, frame_path: Iterable[int], at: int = 0) -> int:
        """The node at `frame_path` (outermost first) below `at`, created as needed."""
        node = at
        index = self._lookup()
        for frame_id in frame_path:
            found = index.get(node << 32 | frame_id)
            node = self.child(node, frame_id) if found is None else found
        return node

    def path(self, node: int) -> list[int]:
        """Frame ids from the outermost caller down to `node` (root excluded)."""
        ids = self.callers_up(node, None)
        ids.reverse()
        return ids

    def callers_up(self, node: int, limit: int | None) -> list[int]:
        """Frame ids from `node` up towards the root (root excluded), at most `limit`."""
        ids: list[int] = []
        parents, frames = self.parents, self.frames
        while node > 0:
            if limit is not None and len(ids) >= limit:
                break
            ids.append(frames[node])
            node = parents[node]
        return ids

    def depth(self, node: int) -> int:
        depth, parents = 0, self.parents
        while node > 0:
            depth, node = depth + 1, parents[node]
        return depth

    # -- costs -----------------------------------------------------------------------

    def add_self(self, node: int, values: Sequence[float]) -> None:
        for column, value in zip(self.selfs, values, strict=False):
            column[node] += value

    def add_calls(self, node: int, count: int) -> None:
        current = self.calls[node]
        self.calls[node] = count if current < 0 else current + count

    def add_along(self, node: int, values: Sequence[float]) -> None:
        """Add `values` to `node`'s self cost and to its and every ancestor's total
        (keeps a finalized tree finalized: the incremental path of live profiles)."""
        parents = self.parents
        for m, value in enumerate(values):
            if not value:
                continue
            self.selfs[m][node] += value
            total = self.totals[m]
            at = node
            while at >= 0:
                total[at] += value
                at = parents[at]

    def add_stack(self, stack: Sequence[int], values: Sequence[float],
                  calls: int | None = None) -> CallNode:
        """Add `values` to the self cost of the node at `stack` (outermost first)."""
        node = self.walk(stack)
        self.add_self(node, values)
        if calls is not None:
            self.add_calls(node, calls)
        return CallNode(self, node)

    def absorb(self, node: int, other: CallTree, other_node: int) -> None:
        """Add `other`'s subtree at `other_node` (self costs, calls) into `node`."""
        self.fold(node, other, other_node)

    def fold(self, node: int, other: CallTree, other_node: int = 0, *, sign: float = 1.0,
             frame_map: Sequence[int] | None = None,
             metric_map: Sequence[int | None] | None = None) -> None:
        """Add `sign` times `other`'s subtree at `other_node` into this tree at `node`:
        the one tree arithmetic of the model (merging, remapping, subtracting).

        Walks `other` in lockstep, creating the nodes this tree lacks.  `frame_map`
        maps `other`'s frame ids to this tree's (siblings that map to one id fold into
        one node); `metric_map[i]` is the metric of `other` that is this tree's metric
        `i` (None: none, nothing added).  Calls: a count of `other` is added where
        this node's is known or, when adding, unknown; the roots' counts are left
        alone.  Totals are left to `finalize`.
        """
        columns = [(self.selfs[i], other.selfs[j]) for i, j in enumerate(
            metric_map if metric_map is not None else range(len(self.selfs)))
            if j is not None and i < len(self.selfs) and j < len(other.selfs)]
        ocalls, oframes = other.calls, other.frames
        pairs = [(node, other_node)]
        while pairs:
            mine, theirs = pairs.pop()
            for column, ocolumn in columns:
                value = ocolumn[theirs]
                if value:
                    column[mine] += sign * value
            count = ocalls[theirs]
            if count >= 0 and theirs and (sign > 0 or self.calls[mine] >= 0):
                self.add_calls(mine, int(sign * count))
            for c in other.children(theirs):
                fid = oframes[c]
                pairs.append((self.child(mine, fid if frame_map is None else frame_map[fid]),
                              c))

    # -- whole tree ------------------------------------------------------------------

    def nodes(self) -> Iterator[CallNode]:
        """Every node except the root, parents before children (as views)."""
        for i in self.preorder():
            yield CallNode(self, i)

    def outermost(self, keys: Sequence[int]) -> bytearray:
        """For each node, 1 when no ancestor has its key (`keys[node]`, e.g. its function):
        summing totals over those nodes counts recursion once.  One pre-order pass
        (first child, then next sibling, climbing back through a stack of ancestors)
        counting the keys on the current path."""
        outer = bytearray(len(self.parents))
        first, sibling = self.first_child.tolist(), self.next_sibling.tolist()
        on_path: dict[int, int] = {}
        ancestors: list[int] = []
        node = first[0]
        while node >= 0:
            key = keys[node]
            seen = on_path.get(key, 0)
            if not seen:
                outer[node] = 1
            on_path[key] = seen + 1
            child = first[node]
            if child >= 0:
                ancestors.append(node)
                node = child
                continue
            while True:  # leave `node`; go to its next sibling, or climb
                on_path[keys[node]] -= 1
                following = sibling[node]
                if following >= 0:
                    node = following
                    break
                if not ancestors:
                    node = -1
                    break
                node = ancestors.pop()
        return outer

    def sums_by(self, keys: Sequence[int], outer: Sequence[int], width: int
                ) -> tuple[list[list[float]], list[list[float]]]:
        """Per metric, self and total cost summed by key (`keys[node]`, below `width`):
        every node but the root counts its self cost; only the nodes `outer` marks
        (`outermost(keys)`) count their totals, so recursion counts once."""
        selfs, totals = [], []
        for m in range(self.n_metrics):
            own, total = [0.0] * width, [0.0] * width
            # In slices: lists are fast to index, and a slice's lists stay small beside
            # a tree of millions of nodes.
            for start in range(1, len(keys), SLICE_NODES):
                end = min(len(keys), start + SLICE_NODES)
                self_column = self.selfs[m][start:end].tolist()
                total_column = self.totals[m][start:end].tolist()
                for key, is_outer, own_cost, total_cost in zip(
                        keys[start:end], outer[start:end], self_column, total_column,
                        strict=True):
                    own[key] += own_cost
                    if is_outer:
                        total[key] += total_cost
            selfs.append(own)
            totals.append(total)
        return selfs, totals

    def preorder(self) -> list[int]:
        """Every node id except the root, parents before children, children in order."""
        out: list[int] = []
        first, sibling = self.first_child.tolist(), self.next_sibling.tolist()
        ancestors: list[int] = []
        node = first[0]
        while node >= 0:
            out.append(node)
            child = first[node]
            if child >= 0:
                ancestors.append(node)
                node = child
                continue
            while True:
                following = sibling[node]
                if following >= 0:
                    node = following
                    break
                if not ancestors:
                    node = -1
                    break
                node = ancestors.pop()
        return out

    def node_count(self) -> int:
        """Nodes except the root."""
        return len(self.parents) - 1

    def max_depth(self) -> int:
        """Depth of the deepest node (0 for an empty tree)."""
        depths = [0] * len(self.parents)
        parents = self.parents
        deepest = 0
        for i in range(1, len(parents)):
            d = depths[i] = depths[parents[i]] + 1
            if d > deepest:
                deepest = d
        return deepest

    def finalize(self) -> CallTree:
        """Compute every node's total cost as self plus the children's totals."""
        parents = self.parents
        n = len(parents)
        for m in range(self.n_metrics):
            total = array("d", self.selfs[m])
            for i in range(n - 1, 0, -1):
                value = total[i]
                if value:
                    total[parents[i]] += value
            self.totals[m] = total
        return self

    def merge(self, other: CallTree) -> CallTree:
        """Add `other`'s costs and calls into this tree (same frame table)."""
        self.absorb(0, other, 0)
        return self

    def copy(self) -> CallTree:
        """An independent copy (snapshots handed to views must not change under them)."""
        out = CallTree.__new__(CallTree)
        out.n_metrics = self.n_metrics
        out.parents = array("q", self.parents)
        out.frames = array("q", self.frames)
        out.selfs = [array("d", c) for c in self.selfs]
        out.totals = [array("d", c) for c in self.totals]
        out.calls = array("q", self.calls)
        out.first_child = array("q", self.first_child)
        out.last_child = array("q", self.last_child)
        out.next_sibling = array("q", self.next_sibling)
        out._index = None
        out.cut_depth = self.cut_depth
        return out

    def remapped(self, frame_map: Sequence[int],
                 metric_map: Sequence[int | None]) -> CallTree:
        """This tree with frame ids mapped through `frame_map` and metrics through
        `metric_map` (as `fold` takes them), not finalized.  When no two siblings map
        to one frame the shape is kept as it is (columns mapped, no walk); else the
        siblings merge, as `fold` into an empty tree does."""
        frames = array("q", [ROOT_FRAME]) + array("q", (frame_map[f] for f in self.frames[1:]))
        parents = self.parents
        seen: set[int] = set()
        for i in range(1, len(parents)):
            key = parents[i] << 32 | frames[i]
            if key in seen:
                out = CallTree(len(metric_map))
                out.fold(0, self, frame_map=frame_map, metric_map=metric_map)
                return out
            seen.add(key)
        n = len(parents)
        selfs = [array("d", [0.0]) * n if j is None or j >= len(self.selfs)
                 else array("d", self.selfs[j]) for j in metric_map]
        calls = array("q", self.calls)
        calls[0] = NO_CALLS
        out = CallTree.from_columns(len(metric_map), array("q", parents), frames, selfs, calls)
        index: dict[int, int] = {}
        for i in range(1, n):
            index[parents[i] << 32 | frames[i]] = i
        out._index = index
        return out

    def pruned(self) -> CallTree:
        """A finalized copy without the nodes whose totals are all zero and whose calls
        are unknown or zero (a time range's tree keeps only what ran in it).  Costs are
        taken as non-negative: a kept node's parent is kept."""
        self.finalize()
        keep = [0]
        totals, calls = self.totals, self.calls
        for i in range(1, len(self.parents)):
            if calls[i] > 0 or any(column[i] for column in totals):
                keep.append(i)
        new_of = {old: new for new, old in enumerate(keep)}
        parents = array("q", [-1] + [new_of[self.parents[i]] for i in keep[1:]])
        out = CallTree.from_columns(
            self.n_metrics, parents, array("q", (self.frames[i] for i in keep)),
            [array("d", (column[i] for i in keep)) for column in self.selfs],
            array("q", (calls[i] for i in keep)))
        out.cut_depth = self.cut_depth
        return out.finalize()

    @classmethod
    def from_columns(cls, n_metrics: int, parents: array, frames: array,
                     selfs: list[array], calls: array | None = None) -> CallTree:
        """A tree from node columns (node 0 the root, each parent before its children);
        not finalized."""
        n = len(parents)
        if n == 0 or parents[0] != -1:
            raise ValueError("node 0 must be the root")
        tree = cls.__new__(cls)
        tree.n_metrics = n_metrics
        tree.parents = parents
        tree.frames = frames
        tree.selfs = selfs
        tree.totals = [_column(n) for _ in range(n_metrics)]
        tree.calls = calls if calls is not None else array("q", [NO_CALLS]) * n
        first = array("q", [-1]) * n
        last = array("q", [-1]) * n
        sibling = array("q", [-1]) * n
        for i in range(1, n):
            p = parents[i]
            if not 0 <= p < i:
                raise ValueError(f"node {i}: parent {p} is not an earlier node")
            tail = last[p]
            if tail < 0:
                first[p] = i
            else:
                sibling[tail] = i
            last[p] = i
        tree.first_child, tree.last_child, tree.next_sibling = first, last, sibling
        tree._index = None
        tree.cut_depth = None
        return tree
