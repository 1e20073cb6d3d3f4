"""A fresh top-down tree opens its single-child trunk (`_start` -> libc -> `main`) down to
the first row with several callees, on a real heap profile of tests/fixtures/heap_basic.c;
a tree whose top has several rows opens nothing, and a refresh keeps what the user closed.
"""

from __future__ import annotations

from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.tree import CallTreeView
from textual.pilot import Pilot
from textual.widgets.tree import TreeNode

from tests.conftest import build_fixture
from tests.helpers.heap import run_heap
from tests.helpers.profiles import two_processes
from tests.helpers.tui import run_app, screen_text, wait_for


def expanded_names(tree: CallTreeView) -> list[str]:
    """The functions of the expanded rows, top to bottom."""
    assert tree.view_profile is not None
    names: list[str] = []
    stack: list[TreeNode] = list(reversed(tree.root.children))
    while stack:
        node = stack.pop()
        if node.is_expanded and node.data is not None and node.data.call is not None:
            names.append(tree.view_profile.frames[node.data.call.frame_id].function)
        stack.extend(reversed(node.children))
    return names


def test_heap_tree_opens_its_trunk_to_main() -> None:
    binary = build_fixture("heap_basic.c", ["-O2", "-g", "-pthread"])
    profile, _output = run_heap(binary)
    assert profile.meta.exit_status == 3

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending and tree.view_profile is not None
                       and bool(tree.root.children), what="the call tree")
        opened = expanded_names(tree)
        # The trunk is open down to main, whose callees (the allocation sites) show;
        # nothing below main opens by itself.
        assert opened[-1] == "main" and "_start" in opened, opened
        text = screen_text(app)
        assert " peak_holder " in text and " later_holder " in text, text
        # Every opened row but main has exactly one callee.
        for node in walk(tree.root):
            if node.is_expanded and node.data is not None and node.data.call is not None:
                function = tree.view_profile.frames[node.data.call.frame_id].function
                if function != "main":
                    assert len(node.data.call.children) == 1, function
        # Bottom-up (several leaf functions at the top) opens nothing.
        await pilot.press("u")
        await wait_for(pilot, lambda: not tree.pending and tree.view == "bottom-up",
                       what="bottom-up")
        assert len(tree.root.children) > 1 and expanded_names(tree) == []

    run_app(ProfTuiApp(profile=profile), body)


def walk(node: TreeNode) -> list[TreeNode]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.children)
    return out


def test_several_roots_open_nothing() -> None:
    """Threads as roots (`T`): one row per thread at the top, so no trunk to open."""
    profile = two_processes()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("2", "T")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending and tree.thread_roots
                       and len(tree.root.children) == 2, what="process roots")
        assert expanded_names(tree) == []

    run_app(ProfTuiApp(profile=profile), body)
