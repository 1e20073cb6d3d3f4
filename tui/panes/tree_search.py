"""Search in the call tree: every node of the whole tree, not only the rows shown.

Matches are listed in display order (depth first, children costliest first, as
`CallTreeView.populate` orders them); `n`/`N` move to the next or previous one,
creating and expanding the rows of its ancestors (more than `MAX_CHILDREN`
children load batch by batch until the match's row exists).  A match is a path
of call nodes, so after a live refresh (a new tree) the search runs again and
keeps its position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proftui.collectors.model.profile import CallNode
from proftui.tui.search import NameMatcher

if TYPE_CHECKING:
    from proftui.tui.panes.tree import CallTreeView, NodeData
    from textual.widgets.tree import TreeNode

MAX_MATCHES = 100_000  # a search for "." on a huge tree stops counting here
Match = tuple["TreeNode[NodeData]", tuple[CallNode, ...]]  # a shown row, the path below it


class TreeSearch:
    """The tree's current search: pattern, matches and position."""

    def __init__(self, view: CallTreeView) -> None:
        self.view = view
        self.pattern = ""
        self.matches: list[Match] | None = None  # None: to be (re)computed
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

    def _find(self) -> list[Match]:
        """Every node whose function matches, in display order."""
        from proftui.tui.panes.tree import MAX_VIEW_DEPTH

        view = self.view
        profile = view.view_profile
        if profile is None:
            return []
        matcher = NameMatcher(self.pattern)
        self.error = matcher.error
        m = view.metric
        verdict: dict[int, bool] = {}  # frame id -> matches (names repeat across the tree)
        frames = profile.frames
        root = view.root
        tops = [root] if root.data is not None and root.data.call is not None else [
            c for c in root.children if c.data is not None and c.data.call is not None]
        found: list[Match] = []
        for top in tops:
            assert top.data is not None and top.data.call is not None
            # Depth-first, children costliest first; a stack of (node, path to it).
            firsts = sorted(top.data.call.children.values(), key=lambda c: -c.total_cost[m])
            stack: list[tuple[CallNode, tuple[CallNode, ...]]] = []
            stack.extend((c, (c,)) for c in reversed(firsts))
            while stack and len(found) < MAX_MATCHES:
                call, path = stack.pop()
                hit = verdict.get(call.frame_id)
                if hit is None:
                    hit = verdict[call.frame_id] = matcher.matches(frames[call.frame_id].function)
                if hit:
                    found.append((top, path))
                if call.children and len(path) < MAX_VIEW_DEPTH:
                    ordered = sorted(call.children.values(), key=lambda c: -c.total_cost[m])
                    stack.extend((c, (*path, c)) for c in reversed(ordered))
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
