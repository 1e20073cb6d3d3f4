"""The calling-context tree, held in arrays (docs/architecture.md section 4).

A node is an integer: node 0 is the synthetic root, every other node a
function frame under its parent path.  Columns, one entry per node:

* `parents[i]` - the parent node (-1 for the root); always `< i`, so a reverse
  walk over ids visits children before parents and totals need no recursion;
* `frames[i]` - the frame id (`ROOT_FRAME` for the root);
* `selfs[m][i]`, `totals[m][i]` - self and total cost of metric `m`;
* `calls[i]` - exact call count, or -1 when the collector cannot know it;
* `first_child`, `last_child`, `next_sibling` - children in insertion order.

Structure columns are array('i') (node and frame ids are int32, as on disk),
`calls` array('q'), costs array('d'): one Python object per tree, not per
node; a 500,000-node tree is a few arrays (about 60 bytes a node with two
metrics), copies are memcpy.  Three kinds of columns are held only once read:
the children links (made from `parents`), `calls` (all unknown until a count
is added) and the totals (summed again when read after `invalidate_totals`).
A tree built and saved by a headless `record` is then `parents`, `frames` and
`selfs` alone: 24 bytes a node with two metrics.

The per-node work (finding and making children, adding trees, totals,
per-function sums, the pre-order) runs in the native core, `core.py`
(csrc/core/), over these same columns; `CallNode` is a light view
`(tree, index)` for code that walks a few nodes at a time (the TUI's rows, the
flame graph's visible frames).  Everything is iterative: trees can be 100,000
levels deep.
"""

from __future__ import annotations

import contextlib
import gc
from array import array
from collections.abc import Iterable, Iterator, Sequence

from proftui.collectors.model import core
from proftui.collectors.model.costrows import CostRow
from proftui.collectors.model.costrows import Costs as Costs

ROOT_FRAME = -1  # frame id of the synthetic root node of every CallTree
NO_CALLS = -1  # `calls` column value: the call count is unknown
# Node ids, parent ids, frame ids and child links: 32-bit (a tree of 2^31 nodes would be
# hundreds of GB of columns); call counts and costs stay 64-bit.
IDS = "i"


@contextlib.contextmanager
def gc_paused(freeze: bool = False) -> Iterator[None]:
    """No cyclic GC while a tree or profile is built: its many new objects would
    otherwise trigger collections that walk everything built so far (4x the build
    time for 100,000 instrument nodes; a third of a fleet query's 66,000 rows).
    Reference counting still frees.  `freeze`: what was made lives on (a fleet
    answer and its profile, no cycles in them): it leaves the collector's scans
    (gc.freeze) instead of being scanned by the first collection after (0.1-0.2 s
    for 96,000 fleet rows)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


def _column(n: int, value: float = 0.0) -> array:
    return array("d", [value]) * n


def _ids(values: Iterable[int]) -> array:
    """An int32 id column (node or frame ids)."""
    return values if isinstance(values, array) and values.typecode == IDS else array(IDS, values)


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

    self_cost = CostRow("selfs")
    total_cost = CostRow("totals")

    @property
    def calls(self) -> int | None:
        return self.tree.calls_at(self.index)

    @calls.setter
    def calls(self, value: int | None) -> None:
        self.tree.set_calls(self.index, NO_CALLS if value is None else value)

    def add_calls(self, count: int) -> None:
        self.tree.add_calls(self.index, count)

    def child(self, frame_id: int) -> CallNode:
        """The child for `frame_id`, created empty if absent."""
        return CallNode(self.tree, self.tree.child(self.index, frame_id))

    def add_tree(self, other: CallNode) -> None:
        """Add `other`'s self costs, calls and subtree into this node."""
        self.tree.add_tree(self.index, other.tree, other.index)

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
    """Calling-context tree in columns; totals come from `finalize` (or `add_along`), or
    are summed when first read after `invalidate_totals`."""

    __slots__ = ("_calls", "_index", "_links", "_totals", "cut_depth", "frames", "n_metrics",
                 "parents", "selfs")

    def __init__(self, n_metrics: int) -> None:
        self.n_metrics = n_metrics
        self.parents = array("i", [-1])
        self.frames = array("i", [ROOT_FRAME])
        self.selfs = [_column(1) for _ in range(n_metrics)]
        self._totals: list[array] | None = [_column(1) for _ in range(n_metrics)]
        # Held once read (see the module docstring): None until then.
        self._calls: array | None = None
        self._links: tuple[array, array | None, array] | None = None
        # The (parent, frame) -> child index of the native core (core.Index), made on
        # first use: copies and loaded trees never need it unless something adds to them.
        self._index: core.Index | None = None
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

    def _links_now(self) -> tuple[array, array | None, array]:
        """(first_child, last_child, next_sibling), made from `parents` if not held;
        last_child is None in a tree made read-only (`from_columns`) until a node is
        added (the core makes it then)."""
        links = self._links
        if links is None:
            links = self._links = core.link(self.parents)
        return links

    @property
    def first_child(self) -> array:
        return self._links_now()[0]

    @property
    def last_child(self) -> array:
        last = self._links_now()[1]
        if last is None:
            self._links = core.link(self.parents)
            last = self._links[1]
        assert last is not None
        return last

    @property
    def next_sibling(self) -> array:
        return self._links_now()[2]

    @property
    def calls(self) -> array:
        """Each node's call count (-1: unknown); held from the first read."""
        calls = self._calls
        if calls is None:
            calls = self._calls = array("q", [NO_CALLS]) * len(self.parents)
        return calls

    @calls.setter
    def calls(self, column: array) -> None:
        self._calls = column

    def calls_at(self, node: int) -> int | None:
        """`node`'s call count, or None when unknown."""
        calls = self._calls
        if calls is None:
            return None
        value = calls[node]
        return None if value < 0 else value

    def has_known_calls(self) -> bool:
        """Whether any node's call count is known."""
        return self._calls is not None and core.check(self._calls, -(2**63), -1, 0) >= 0

    def known_calls(self) -> array | None:
        """The call count column when any count is known, else None (no column of
        unknowns is made: 8 bytes a node)."""
        return self._calls if self.has_known_calls() else None

    def index(self) -> core.Index:
        """The `parent << 32 | frame` -> child lookup (`.get(key, default)`), as `child`
        and `walk` use it (read-only for callers)."""
        core.find(self, 0, ROOT_FRAME)  # makes it, indexed up to date
        assert self._index is not None
        return self._index

    def drop_index(self) -> None:
        """Free the child index (made again, from the columns, when next needed)."""
        self._index = None

    def find(self, node: int, frame_id: int) -> int:
        """The child of `node` for `frame_id`, or -1."""
        return core.find(self, node, frame_id)

    def child(self, node: int, frame_id: int) -> int:
        """The child of `node` for `frame_id`, created (zero cost) if absent."""
        return core.child(self, node, frame_id)

    def node_map(self, into: CallTree, frame_map: Sequence[int] | None = None) -> array:
        """For each node of this tree, the node of `into` at the same path (frame ids
        mapped through `frame_map`), -1 where `into` has none: where `add_tree` put it."""
        return core.node_map(self, into, frame_map)

    def children(self, node: int) -> list[int]:
        """Child nodes of `node`, in insertion order."""
        out = []
        first, _last, sibling = self._links_now()
        child = first[node]
        while child >= 0:
            out.append(child)
            child = sibling[child]
        return out

    def walk(self, frame_path: Iterable[int], at: int = 0) -> int:
        """The node at `frame_path` (outermost first) below `at`, created as needed."""
        return core.walk(self, frame_path if isinstance(frame_path, (array, list, tuple))
                         else list(frame_path), at)

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

    @property
    def totals(self) -> list[array]:
        """Per metric, each node's total cost (summed now if not known)."""
        totals = self._totals
        if totals is None:
            totals = self._totals = core.totals(self)
        return totals

    @totals.setter
    def totals(self, columns: list[array]) -> None:
        self._totals = columns

    def has_totals(self) -> bool:
        """Whether the totals are held (else they are summed when first read)."""
        return self._totals is not None

    def invalidate_totals(self) -> None:
        """Self costs changed without the totals: sum them again when next read."""
        self._totals = None

    def add_self(self, node: int, values: Sequence[float]) -> None:
        for column, value in zip(self.selfs, values, strict=False):
            column[node] += value

    def add_calls(self, node: int, count: int) -> None:
        current = self.calls[node]
        self.calls[node] = count if current < 0 else current + count

    def set_calls(self, node: int, value: int) -> None:
        """Set `node`'s call count (NO_CALLS: unknown); a tree of unknowns holds no
        calls column until a count is set."""
        if value != NO_CALLS or self._calls is not None:
            self.calls[node] = value

    def add_along(self, node: int, values: Sequence[float]) -> None:
        """Add `values` to `node`'s self cost and to its and every ancestor's total
        (keeps a finalized tree finalized: the incremental path of live profiles)."""
        core.add_along(self, node, values, None, None, None, None)

    def add_stack(self, stack: Sequence[int], values: Sequence[float],
                  calls: int | None = None) -> CallNode:
        """Add `values` to the self cost of the node at `stack` (outermost first)."""
        node = self.walk(stack)
        self.add_self(node, values)
        if calls is not None:
            self.add_calls(node, calls)
        return CallNode(self, node)

    def add_tree(self, node: int, other: CallTree, other_node: int = 0, *,
                 sign: float = 1.0, frame_map: Sequence[int] | None = None,
                 metric_map: Sequence[int | None] | None = None) -> None:
        """Add `sign` times `other`'s subtree at `other_node` into this tree at `node`:
        the one tree arithmetic of the model (merging, remapping, subtracting).

        Walks `other` in lockstep (a stack of node pairs: the last child first),
        creating the nodes this tree lacks.  `frame_map` maps `other`'s frame ids to
        this tree's (siblings that map to one id fold into one node); `metric_map[i]` is
        the metric of `other` that is this tree's metric `i` (None: none, nothing
        added).  Calls: a count of `other` is added where this node's is known or, when
        adding, unknown; the roots' counts are left alone.  Totals are left to
        `finalize`.
        """
        pairs = [(i, j) for i, j in enumerate(
            metric_map if metric_map is not None else range(len(self.selfs)))
            if j is not None and i < len(self.selfs) and j < len(other.selfs)]
        core.fold(self, node, other.copy() if other is self else other, (other_node,),
                  float(sign), frame_map, pairs)

    # -- whole tree ------------------------------------------------------------------

    def nodes(self) -> Iterator[CallNode]:
        """Every node except the root, parents before children (as views)."""
        for i in self.preorder():
            yield CallNode(self, i)

    def function_sums(self, keymap: Sequence[int] | None = None, width: int = -1,
                      outer: bytearray | None = None) -> FunctionSums:
        """Per-function sums in one pass over the columns: each node's key is
        `keymap[frame]` (the frame id itself when None or past its end); per metric, self
        costs summed by key over every node but the root, totals only over the nodes
        whose key no ancestor has (`outer`, computed when None), so recursion counts
        once; which keys occur; and the known call counts per key.  `width`: how many
        keys (< 0: the largest + 1)."""
        return FunctionSums(*core.function_sums(self, keymap, width, outer))

    def preorder(self) -> array:
        """Every node id except the root, parents before children, children in order."""
        return core.preorder(self)

    def max_depth(self) -> int:
        """Depth of the deepest node (0 for an empty tree)."""
        return core.max_depth(self)

    def finalize(self) -> CallTree:
        """Compute every node's total cost as self plus the children's totals."""
        self._totals = core.totals(self)
        return self

    def copy(self, take_index: bool = False) -> CallTree:
        """An independent copy (snapshots handed to views must not change under them).
        `take_index`: the copy takes this tree's child index over (this tree is not added
        to any more: a snapshot handed out), so it need not be built again."""
        out = CallTree.__new__(CallTree)
        out.n_metrics = self.n_metrics
        out.parents = array("i", self.parents)
        out.frames = array("i", self.frames)
        out.selfs = [array("d", c) for c in self.selfs]
        out._totals = None if self._totals is None else [array("d", c) for c in self._totals]
        out._calls = None if self._calls is None else array("q", self._calls)
        out._links = None if self._links is None else (
            array("i", self._links[0]),
            None if self._links[1] is None else array("i", self._links[1]),
            array("i", self._links[2]))
        out._index = None
        if take_index and self._index is not None:
            out._index, self._index = self._index, None
            out._index.rebind(out.parents, out.frames)
        out.cut_depth = self.cut_depth
        return out

    def remapped(self, frame_map: Sequence[int],
                 metric_map: Sequence[int | None]) -> CallTree:
        """This tree with frame ids mapped through `frame_map` and metrics through
        `metric_map` (as `add_tree` takes them), not finalized.  When no two siblings map
        to one frame the shape is kept as it is (columns mapped, no walk); else the
        siblings merge, as `add_tree` into an empty tree does."""
        frames, merges = core.remap_frames(self, frame_map)
        if merges:
            out = CallTree(len(metric_map))
            out.add_tree(0, self, frame_map=frame_map, metric_map=metric_map)
            return out
        n = len(self.parents)
        selfs = [array("d", bytes(8 * n)) if j is None or j >= len(self.selfs)
                 else array("d", self.selfs[j]) for j in metric_map]
        calls = None
        if self._calls is not None:
            calls = array("q", self._calls)
            calls[0] = NO_CALLS
        return CallTree.from_columns(len(metric_map), array("i", self.parents), frames, selfs,
                                     calls)

    def pruned(self) -> CallTree:
        """A finalized copy without the nodes whose totals are all zero and whose calls
        are unknown or zero (a time range's tree keeps only what ran in it); a kept
        node's ancestors are kept."""
        parents, frames, selfs, calls = core.pruned(self, self.totals)
        out = CallTree.from_columns(self.n_metrics, parents, frames, selfs, calls)
        out.cut_depth = self.cut_depth
        return out.finalize()

    @classmethod
    def from_columns(cls, n_metrics: int, parents: array, frames: array,
                     selfs: list[array], calls: array | None = None, *,
                     finalized: bool = False) -> CallTree:
        """A tree from node columns (node 0 the root, each parent before its children);
        its totals are summed when first read (now, with `finalized`).  `calls` None:
        every count unknown.  ValueError when the columns are not a tree."""
        n = len(parents)
        if n == 0 or parents[0] != -1:
            raise ValueError("node 0 must be the root")
        parents, frames = _ids(parents), _ids(frames)
        if len(frames) != n or len(selfs) != n_metrics or any(len(c) != n for c in selfs) \
                or (calls is not None and len(calls) != n):
            raise ValueError("columns of different lengths")
        tree = cls.__new__(cls)
        tree.n_metrics = n_metrics
        tree.parents = parents
        tree.frames = frames
        tree.selfs = selfs
        tree._totals = None
        tree._calls = calls
        # Checks that the columns are a tree; last_child is made when a node is added
        # (a loaded profile is mostly only read: 4 bytes a node saved).
        tree._links = core.link(parents, False)
        tree._index = None
        tree.cut_depth = None
        return tree.finalize() if finalized else tree


class FunctionSums:
    """What `CallTree.function_sums` gives: per metric, self and total cost by key
    (array('d') each), which keys occur, the known call counts by key (None when no node
    knows its calls), and the outermost flags it used (one per node)."""

    __slots__ = ("calls", "outer", "present", "selfs", "totals")

    def __init__(self, selfs: list[array], totals: list[array], present: bytearray,
                 calls: array | None, outer: bytearray) -> None:
        self.selfs = selfs
        self.totals = totals
        self.present = present
        self.calls = calls
        self.outer = outer

    def calls_of(self, key: int) -> int | None:
        """The summed known call count of `key`, or None."""
        if self.calls is None:
            return None
        value = self.calls[key]
        return None if value < 0 else value
