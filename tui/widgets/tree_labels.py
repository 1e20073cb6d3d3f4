"""Relabelling many rows of a Textual `Tree` with one repaint.

`TreeNode.set_label` schedules a repaint callback per node: a `%` or a names
mode change on ~200 shown rows posted ~200 messages (~40 ms of a 110 ms key
on a 200,000-node profile). `set_label_quietly` does the rest of what
set_label does (the label, and the node's update count, which keys its cached
lines); the caller repaints the tree once. It relies on two TreeNode
internals, which tests/unit/test_tree_labels.py watches for.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets.tree import TreeNode


def set_label_quietly(node: TreeNode[Any], label: Text) -> None:
    """`node.set_label(label)` without its repaint: call `tree.refresh()` after the batch."""
    node._label = node.tree.process_label(label)
    node._updates += 1
