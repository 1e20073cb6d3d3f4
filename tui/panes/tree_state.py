"""What a call tree view keeps across a live refresh: the rows expanded and the cursor,
each as the path of row keys from the root (frames, or a thread row's group frame)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proftui.tui.panes.tree import CallTreeView, NodeData
    from textual.widgets.tree import TreeNode

Path = tuple[object, ...]


def path_key(view: CallTreeView, node: TreeNode[NodeData]) -> Path:
    """`node`'s row keys from the root down."""
    keys: list[object] = []
    current: TreeNode[NodeData] | None = node
    while current is not None and current is not view.root:
        keys.append(current.data.key if current.data is not None else None)
        current = current.parent
    return tuple(reversed(keys))


def save_state(view: CallTreeView) -> tuple[list[Path], Path | None]:
    """The expanded rows and the cursor's row of `view`, by path."""
    expanded: list[Path] = []
    stack = list(view.root.children)
    while stack:
        node = stack.pop()
        if node.is_expanded:
            expanded.append(path_key(view, node))
            stack.extend(node.children)
    cursor = view.cursor_node
    return expanded, (path_key(view, cursor) if cursor is not None else None)


def find(view: CallTreeView, path: Path, populate: bool = False) -> TreeNode[NodeData] | None:
    """The row at `path`, its ancestors' children made first with `populate`."""
    node: TreeNode[NodeData] | None = view.root
    for key in path:
        assert node is not None
        if populate and node.data is not None and node.data.populated == 0:
            view.populate(node)
        node = next((c for c in node.children if c.data is not None and c.data.key == key),
                    None)
        if node is None:
            return None
    return node


def restore_state(view: CallTreeView, expanded: list[Path], cursor: Path | None) -> None:
    """Expand the rows of `expanded` that still exist and put the cursor back."""
    for path in sorted(expanded, key=len):
        node = find(view, path, populate=True)
        if node is not None:
            view.populate(node)
            node.expand()
    target = find(view, cursor) if cursor is not None else None
    view.move_to(target or (view.root.children[0] if view.root.children else None))
