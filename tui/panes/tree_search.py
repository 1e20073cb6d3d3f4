"""Search in the call tree: every node of the whole tree, not only the rows shown.

Matches are listed in display order (depth first, children costliest first, as
`CallTreeView.populate` orders them); `n`/`N` move to the next or previous one,
creating and expanding the rows of its ancestors (more than `MAX_CHILDREN`
children load batch by batch until the match's row exists).  A match is a path
of call nodes, so after a live refresh (a new tree) the search runs again and
keeps its position.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

from proftui.collectors.model import core
from proftui.collectors.model.profile import CallNode
from proftui.tui.search import FrameMatcher

if TYPE_CHECKING:
    from proftui.tui.panes.tree import CallTreeView, NodeData
    from textual.widgets.tree import TreeNode

MAX_MATCHES = 100_000  # a search for "." on a huge tree stops counting here
Match = tuple["TreeNode[NodeData]", tuple[CallNode, ...]]  # a shown row, the path below it


class Matches(Sequence[Match]):
    """The matches as node ids per top row; a match's path is made when it is read, so
    a search with 100,000 matches costs one native walk, not 100,000 paths."""

    def __init__(self) -> None:
        self._parts: list[tuple[TreeNode[NodeData], array]] = []
        self._len = 0

    def add(self, top: TreeNode[NodeData], nodes: array) -> None:
        if nodes:
            self._parts.append((top, nodes))
            self._len += len(nodes)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Match: ...
    @overload
    def __getitem__(self, index: slice) -> list[Match]: ...

    def __getitem__(self, index: int | slice) -> Match | list[Match]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        for top, nodes in self._parts:
            if index < len(nodes):
                return top, _path_below(top, nodes[index])
            index -= len(nodes)
        raise IndexError(index)


def _path_below(top: TreeNode[NodeData], node: int) -> tuple[CallNode, ...]:
    """The call nodes from `top`'s child down to `node`."""
    assert top.data is not None and top.data.call is not None
    tree, stop = top.data.call.tree, top.data.call.index
    path: list[CallNode] = []
    parents = tree.parents
    while node != stop and node >= 0:
        path.append(CallNode(tree, node))
        node = parents[node]
    path.reverse()
    return tuple(path)


class TreeSearch:
    """The tree's current search: pattern, matches and position."""

    def __init__(self, view: CallTreeView) -> None:
        self.view = view
        self.pattern = ""
        self.matches: Matches | None = None  # None: to be (re)computed
        self.index = -1
        self.note = ""
        self.error = ""

    def forget(self, keep_note: bool = True) -> None:
        """The tree was rebuilt: the matches are found again on the next step."""
        self.matches = None
        if not keep_note:
            self.note = ""

    def start(self, pattern: str) -> None:
        """Search `pattern` and go to its first match."""
        self.pattern = pattern
        self.matches = None
        self.index = -1
        self.step(1)

    def step(self, step: int) -> None:
        """Go to the next (`step` 1) or previous (-1) match, wrapping around."""
        view = self.view
        if self.matches is None:
            self.matches = self._find()
        if not self.matches:
            self.index = -1
            self.note = f"/{self.pattern}: no match"
            view.notify(self.note + (f" (invalid regex: {self.error}; substring)"
                                     if self.error else ""), severity="warning")
            view.announce()
            return
        self.index = (self.index + step) % len(self.matches)
        top, path = self.matches[self.index]
        more = "+" if len(self.matches) >= MAX_MATCHES else ""
        self.note = f"/{self.pattern}: match {self.index + 1} of {len(self.matches)}{more}"
        if self.error:
            self.note += " (invalid regex: substring)"
        self._reveal(top, path)
        view.announce()

    def _find(self) -> Matches:
        """Every node whose function matches, in display order (a native walk)."""
        from proftui.tui.panes.tree import MAX_VIEW_DEPTH

        view = self.view
        profile = view.view_profile
        found = Matches()
        if profile is None:
            return found
        matcher = FrameMatcher(self.pattern, profile.frames)
        self.error = matcher.matcher.error
        mask = matcher.mask()
        root = view.root
        tops = [root] if root.data is not None and root.data.call is not None else [
            c for c in root.children if c.data is not None and c.data.call is not None]
        for top in tops:
            assert top.data is not None and top.data.call is not None
            call = top.data.call
            nodes = core.display_order(call.tree, call.tree.totals, view.metric, call.index,
                                       mask, MAX_VIEW_DEPTH)
            found.add(top, nodes[:MAX_MATCHES - len(found)])
        return found

    def _reveal(self, top: TreeNode[NodeData], path: tuple[CallNode, ...]) -> None:
        """Create, expand and select the row of `path` under `top`."""
        view = self.view
        node = top
        for call in path:
            child = None
            while True:
                child = next((c for c in node.children
                              if c.data is not None and c.data.call == call), None)
                data = node.data
                if child is not None or data is None or data.call is None \
                        or data.populated >= len(data.call.children):
                    break
                view.populate(node)  # the next batch: the match is further down
            if child is None:
                return  # not shown (too deep): the search cannot point at it
            node.expand()
            node = child
        view.move_to(node)
