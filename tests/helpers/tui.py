"""Driving the TUI in tests: run an app under Textual's pilot, wait for it, read its screen."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Awaitable, Callable

from proftui.collectors.base import Collector
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

SIZE = (150, 45)


def screen_text(app: App) -> str:
    """The whole screen as plain text (what a person would read)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


async def wait_for(pilot: Pilot, predicate: Callable[[], object], timeout: float = 15.0,
                   what: str = "condition") -> None:
    """Let the app run until `predicate()` is true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)


def screen_ready(app: App, screen_class: type) -> bool:
    """The top screen is a `screen_class`, mounted, and its focus is set. A screen is
    on the stack before its widgets mount; under load keys sent in between are lost
    (Pilot's idle check reads a starved process as idle)."""
    screen = app.screen
    return (isinstance(screen, screen_class) and screen.is_mounted
            and (screen.focused is not None or not screen.focus_chain))


def run(coro_fn: Callable[[], object]) -> None:
    """Run an async test body (no pytest-asyncio needed)."""
    asyncio.run(coro_fn())  # type: ignore[arg-type]


async def flat_ready(pilot: Pilot, app: App) -> None:
    """Wait until the app's flat pane shows its first rows (a worker computes them)."""
    from proftui.tui.panes.flat import FlatPane

    flat = app.query_one(FlatPane)
    await wait_for(pilot, lambda: bool(flat.shown), what="flat profile")


def run_live(collector: Collector, body: Callable[[Pilot, App], Awaitable[None]],
             size: tuple[int, int] = SIZE) -> None:
    """`body(pilot, app)` on the live TUI of `collector` (started here, stopped at the end)."""
    from proftui.tui.app import ProfTuiApp

    with contextlib.ExitStack() as cleanup:
        collector.start()
        cleanup.callback(collector.stop)
        app = ProfTuiApp(collector=collector)

        async def session() -> None:
            async with app.run_test(size=size) as pilot:
                await body(pilot, app)

        run(session)
