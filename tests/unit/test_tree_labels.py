"""tui/widgets/tree_labels.py: a batch of Tree labels set with one repaint shows the same
rows as TreeNode.set_label would (it relies on two TreeNode internals)."""

from __future__ import annotations

import asyncio
import inspect

from proftui.tui.widgets.tree_labels import set_label_quietly
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Tree
from textual.widgets.tree import TreeNode


def test_set_label_still_does_what_the_quiet_one_copies() -> None:
    # set_label sets the processed label and counts an update (its lines' cache key); a
    # Textual that did more there would need the same in set_label_quietly.
    source = inspect.getsource(TreeNode.set_label)
    assert "self._label = " in source and "self._updates += 1" in source
    assert "process_label" in source


def test_quiet_labels_show_after_one_refresh() -> None:
    class Shown(App[None]):
        def compose(self) -> ComposeResult:
            tree: Tree[None] = Tree("root")
            tree.root.expand()
            for k in range(5):
                tree.root.add_leaf(f"row {k} old")
            yield tree

    async def body() -> None:
        app = Shown()
        async with app.run_test(size=(40, 10)) as pilot:
            await pilot.pause()
            tree = app.query_one(Tree)
            before = [line.text for line in tree.render_lines(tree.region.reset_offset)]
            assert any("row 3 old" in text for text in before)
            for k, node in enumerate(tree.root.children):
                set_label_quietly(node, Text(f"row {k} new"))
            tree.refresh()
            await pilot.pause()
            after = [line.text for line in tree.render_lines(tree.region.reset_offset)]
            assert any("row 3 new" in text for text in after), after
            assert not any("old" in text for text in after), after
            assert [str(n.label) for n in tree.root.children] == [f"row {k} new"
                                                                  for k in range(5)]

    asyncio.run(body())
