"""Flame graph layout: a finalized `CallTree` and a metric to rows of frames.

Pure geometry, no Textual.  Row 0 is the tree's root ("all", or its first level
with `show_root=False`); row k+1 holds the children of row k's frames.  A frame's
`start` and `width` are in cost units of the shown span: the zoomed node's total
(the root's when not zoomed).  Zoomed, the path from the root to the zoomed node
stays as full-width rows above it, as speedscope and pprof keep it.

Rows are computed lazily, one at a time, on demand (`Layout.row`): drawing the
visible depth range only costs the rows above it.  Children narrower than one
cell (`span / cells`) are merged into one sliver per parent and not expanded, so
a row never holds more than about `cells` items whatever the tree's size.

Search (`matched_share`) sums each path once: a matching node under a matching
ancestor is inside the ancestor's total already (pprof's and speedscope's
"share of matched frames").
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from proftui.collectors.model import core
from proftui.collectors.model.profile import CallNode, CallTree


@dataclass(frozen=True, slots=True)
class FlameItem:
    """One frame of a row (or a sliver of merged narrow children: `node` is None)."""

    node: CallNode | None
    start: float  # cost units from the left edge of the span
    width: float  # cost units (never negative)
    parent: int  # index of the parent item in the row above; -1 on row 0
    base: CallNode | None = None  # the same path in the baseline tree, when one is given
    merged: int = 0  # a sliver: how many children it stands for


def cost_of(node: CallNode, metric: int) -> float:
    """`node`'s total for `metric`, clamped at zero (a subtracted mark may go negative)."""
    value = node.total_cost[metric] if metric < len(node.total_cost) else 0.0
    return value if value > 0 else 0.0


def ancestors(node: CallNode) -> list[CallNode]:
    """The root, ..., `node`'s parent, `node` (outermost first)."""
    path: list[CallNode] = []
    current: CallNode | None = node
    while current is not None:
        path.append(current)
        current = current.parent
    path.reverse()
    return path


def node_at(tree: CallTree, path: tuple[int, ...]) -> tuple[CallNode, int]:
    """The node at `path` (frame ids, root excluded) and how many steps of it exist:
    a path whose tail vanished resolves to its deepest existing ancestor."""
    node = tree.root
    for depth, frame_id in enumerate(path):
        child = node.children.get(frame_id)
        if child is None:
            return node, depth
        node = child
    return node, len(path)


class Layout:
    """The rows of one flame graph: tree, metric, zoomed node and width in cells."""

    def __init__(self, tree: CallTree, metric: int, cells: int, zoom: CallNode | None = None,
                 show_root: bool = True, base: CallTree | None = None) -> None:
        self.tree = tree
        self.metric = metric
        self.cells = max(1, cells)
        self.zoom = zoom if zoom is not None else tree.root
        self.show_root = show_root
        self.base = base
        self.span = cost_of(self.zoom, metric)
        self.min_width = self.span / self.cells  # narrower children merge into a sliver
        self.rows: list[list[FlameItem]] = []
        self.done = False  # every row is computed (the next one would be empty)
        self._first_rows()

    def _first_rows(self) -> None:
        """The path to the zoomed node, each full width; rows grow below the last one."""
        path = ancestors(self.zoom)
        bases: list[CallNode | None] = []
        base = self.base.root if self.base is not None else None
        for depth, node in enumerate(path):
            if depth and base is not None:
                base = base.children.get(node.frame_id)
            bases.append(base)
        if not self.show_root:
            path, bases = path[1:], bases[1:]
        if self.span <= 0:
            self.done = True
            return
        if not path:  # not zoomed, no root row: the first row is the root's children
            first = self._children_row([FlameItem(self.tree.root, 0.0, self.span, -1,
                                                  self.base.root if self.base else None)])
            for index, item in enumerate(first):
                first[index] = FlameItem(item.node, item.start, item.width, -1, item.base,
                                         item.merged)
            self.rows.append(first)
            self.done = not first
            return
        for depth, (node, base) in enumerate(zip(path, bases, strict=True)):
            self.rows.append([FlameItem(node, 0.0, self.span, 0 if depth else -1, base)])

    def _children_row(self, parents: list[FlameItem]) -> list[FlameItem]:
        row: list[FlameItem] = []
        metric, floor = self.metric, self.min_width
        for index, item in enumerate(parents):
            node = item.node
            if node is None or not node.children:
                continue
            kids = [(cost_of(c, metric), c) for c in node.children.values()]
            kids.sort(key=lambda pair: -pair[0])  # left-heavy, as speedscope's view
            x = item.start
            rest, merged = 0.0, 0
            for width, child in kids:
                if width <= 0:
                    break
                if width < floor:
                    rest += width
                    merged += 1
                    continue
                base = item.base.children.get(child.frame_id) if item.base is not None else None
                row.append(FlameItem(child, x, width, index, base))
                x += width
            if merged:
                row.append(FlameItem(None, x, rest, index, None, merged))
        return row

    def row(self, k: int) -> list[FlameItem]:
        """Row `k` (computed with the rows above it if need be; [] past the deepest)."""
        while len(self.rows) <= k and not self.done:
            nxt = self._children_row(self.rows[-1]) if self.rows else []
            if not nxt:
                self.done = True
                break
            self.rows.append(nxt)
        return self.rows[k] if 0 <= k < len(self.rows) else []

    def zoom_row(self) -> int:
        """The row of the zoomed node (0 when not zoomed and the root is shown)."""
        return max(0, self.zoom.depth() - (0 if self.show_root else 1))

    def find(self, path: tuple[int, ...]) -> tuple[int, int] | None:
        """(row, index) of the node at `path` (frame ids from the root), if laid out."""
        node, found = node_at(self.tree, path)
        if found != len(path):
            return None
        return self.locate(node)

    def locate(self, node: CallNode) -> tuple[int, int] | None:
        """(row, index) of `node`, if it is laid out (not culled, not outside the zoom)."""
        k = node.depth() - (0 if self.show_root else 1)
        for index, item in enumerate(self.row(k)):
            if item.node == node:
                return k, index
        return None

    def cells_of(self, item: FlameItem) -> tuple[int, int]:
        """The columns [x0, x1) an item covers (x1 == x0: narrower than half a cell)."""
        if self.span <= 0:
            return 0, 0
        scale = self.cells / self.span
        x0 = int(item.start * scale + 0.5)
        x1 = int((item.start + item.width) * scale + 0.5)
        if item.node is None and x1 == x0 and x0 < self.cells:
            x1 = x0 + 1  # a sliver stays visible
        return x0, min(x1, self.cells)

    def row_cells(self, k: int) -> list[tuple[int, int, int]]:
        """(index, x0, x1) of row `k`'s items as drawn: left to right, never overlapping
        (a sliver's forced cell gives way to the frame after it); invisible ones left out."""
        out: list[tuple[int, int, int]] = []
        x = 0
        for index, item in enumerate(self.row(k)):
            x0, x1 = self.cells_of(item)
            x0 = max(x0, x)
            if x1 > x0:
                out.append((index, x0, x1))
                x = x1
        return out

    def items(self) -> Iterator[tuple[int, int, FlameItem]]:
        """Every laid-out item, row by row (computes every row)."""
        k = 0
        while True:
            row = self.row(k)
            if not row:
                return
            for index, item in enumerate(row):
                yield k, index, item
            k += 1


class ShareWalk:
    """`matched_share` in steps: `run(n)` visits at most `n` more nodes, so a caller can
    walk a 200,000-node tree in slices between other work (a UI's key presses).  The
    walk itself is native (core.share_walk): a stack of node ids, the last child first."""

    def __init__(self, tree: CallTree, metric: int, matches: Sequence[bool],
                 under: CallNode | None = None) -> None:
        self.tree = tree
        self.metric = metric
        self.matches = bytes(matches)
        self.total = 0.0
        top = under if under is not None else tree.root
        self.stack = array("i")
        if any(matches[n.frame_id] for n in ancestors(top)[1:]):
            self.total = cost_of(top, metric)  # a match above covers the whole subtree
        else:
            self.stack.extend(tree.children(top.index))

    def run(self, budget: int) -> bool:
        """Visit up to `budget` nodes; True once the walk is over (`total` is final)."""
        if self.stack:
            found, self.stack = core.share_walk(self.tree, self.tree.totals, self.metric,
                                                self.matches, self.stack, budget)
            self.total += found
        return not self.stack


def matched_share(tree: CallTree, metric: int, matches: Callable[[int], bool] | Sequence[bool],
                  under: CallNode | None = None) -> float:
    """The cost of the paths through a matching frame, each path counted once.

    `matches` says whether a frame id matches: a test, or a list indexed by frame id.
    The walk stops at the first match on each path (its total already holds every
    match below it).  `under`: only that subtree (a match above it covers the whole
    subtree).
    """
    if not isinstance(matches, Sequence):
        test = matches
        wanted = {n.frame_id for n in ancestors(under or tree.root)[1:]}
        stack = list((under or tree.root).children.values())
        while stack:  # the frame ids of the subtree, each tested once
            node = stack.pop()
            wanted.add(node.frame_id)
            stack.extend(node.children.values())
        size = max(wanted, default=-1) + 1
        matches = [i in wanted and test(i) for i in range(size)]
    walk = ShareWalk(tree, metric, matches, under)
    walk.run(1 << 62)
    return walk.total


def path_of(node: CallNode) -> tuple[int, ...]:
    """Frame ids from the root's child down to `node` (empty for the root)."""
    return tuple(node.path())
