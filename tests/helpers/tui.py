"""Driving the TUI in tests: run an app under Textual's pilot, wait for it, read its
screen; a collector that replays a recorded profile for the live plumbing."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from proftui.collectors.base import Collector
from proftui.collectors.model import storage
from proftui.collectors.model.parts import PartInfo
from proftui.collectors.model.profile import Profile
from proftui.collectors.runtime.launch import ExitInfo
from proftui.tui.screens.threads import ThreadsScreen
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

if TYPE_CHECKING:
    from proftui.tui.app import ProfTuiApp
    from proftui.tui.panes.flat import FlatPane

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


async def flat_ready(pilot: Pilot, app: App) -> FlatPane:
    """The app's flat pane, once it shows its first rows (a worker computes them)."""
    from proftui.tui.panes.flat import FlatPane

    flat = app.query_one(FlatPane)
    await wait_for(pilot, lambda: bool(flat.shown), what="flat profile")
    return flat


def run_app(app: App, body: Callable[[Pilot, App], Awaitable[None]],
            size: tuple[int, int] = SIZE) -> None:
    """`body(pilot, app)` on `app` run headless under Textual's pilot at `size`."""

    async def session() -> None:
        async with app.run_test(size=size) as pilot:
            await body(pilot, app)

    run(session)


def run_live(collector: Collector, body: Callable[[Pilot, App], Awaitable[None]],
             size: tuple[int, int] = SIZE) -> ProfTuiApp:
    """`body(pilot, app)` on the live TUI of `collector` (started here, stopped at the
    end); the app, for what it kept."""
    from proftui.tui.app import ProfTuiApp

    collector.start()
    try:
        app = ProfTuiApp(collector=collector)
        run_app(app, body, size)
    finally:
        collector.stop()
    return app


async def quit_live(pilot: Pilot) -> None:
    """Quit while the target runs: `q`, then `y` to the question whether to end it."""
    await pilot.press("q")
    await pilot.pause()
    await pilot.press("y")


class ReplayCollector(Collector):
    """Replays a real recorded profile, growing with each snapshot (plumbing tests only)."""

    mode = "sampler"
    can_pause = True

    def __init__(self, profile: Profile) -> None:
        super().__init__([])
        self.recorded = storage.profile_to_dict(profile)
        self.ticks = 0
        self.paused = False
        self.calls: list[str] = []
        self.ended = threading.Event()

    def start(self) -> None:
        self.calls.append("start")

    def collect(self) -> Profile:
        if not self.paused:
            self.ticks += 1
        profile = storage.profile_from_dict(self.recorded)
        for node in profile.tree.nodes():
            node.self_cost = [v * self.ticks for v in node.self_cost]
        profile.meta.complete = False
        return profile.finalize()

    def pause(self) -> None:
        self.calls.append("pause")
        self.paused = True

    def resume(self) -> None:
        self.calls.append("resume")
        self.paused = False

    def exit_info(self) -> ExitInfo | None:
        return ExitInfo(0) if self.ended.is_set() else None

    def is_running(self) -> bool:
        return not self.ended.is_set()

    async def end_and_quit(self, pilot: Pilot, app: App) -> None:
        """The replayed target ends; once the app says so, quit."""
        self.ended.set()
        await wait_for(pilot, lambda: bool(app.ended), what="end")  # type: ignore[attr-defined]
        await pilot.press("q")

    @property
    def pid(self) -> int | None:
        return None


def status_text(app: App) -> str:
    """The status line's text: the screen's line above the key bar."""
    return screen_text(app).splitlines()[-2]


async def choose_thread(pilot: Pilot, app: App, name: str | None) -> PartInfo:
    """Open the picker with `t` and choose the thread called `name` (None: all)."""
    await pilot.press("t")
    await wait_for(pilot, lambda: screen_ready(app, ThreadsScreen), what="picker")
    screen = app.screen
    assert isinstance(screen, ThreadsScreen)
    index = next(i for i, c in enumerate(screen.choices)
                 if (c.name == name if name is not None else c.kind == "all"))
    start = next((i for i, c in enumerate(screen.choices) if c.label == app.part), 0)
    for _ in range(abs(index - start)):
        await pilot.press("down" if index > start else "up")
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, ThreadsScreen), what="picked")
    return screen.choices[index]
