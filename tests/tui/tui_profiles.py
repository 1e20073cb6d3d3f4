"""Real profiles for the TUI tests: compiled fixtures profiled by real collectors."""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import time
from collections.abc import Awaitable, Callable

import pytest
from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import Collector, CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Profile
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from tests.conftest import build_fixture

ATT_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-pthread"]
ATT_DONE = "att_spin done sink=nonzero usr1=0\n"
SIZE = (150, 45)


class SpinTarget:
    """tests/fixtures/att_spin.c running outside proftui (main -> att_outer -> att_middle
    -> att_hot, and att_thread_main -> att_cold in a second thread), exit status 7."""

    def __init__(self, seconds: float) -> None:
        binary = build_fixture("att_spin.c", ATT_FLAGS)
        self.proc = subprocess.Popen([str(binary), str(seconds)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == f"ready {self.proc.pid}\n"
        self.pid = self.proc.pid

    def finish(self) -> tuple[str, int]:
        out, _ = self.proc.communicate(timeout=30)
        return out, self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def attach(pid: int, **options: object) -> AttachCollector:
    """A started AttachCollector on `pid`; skips when the machine forbids sampling."""
    collector = AttachCollector([], CollectorOptions(pid=pid, **options))  # type: ignore[arg-type]
    try:
        collector.start()
    except ProftuiError as exc:
        collector.stop()
        if any(w in str(exc) for w in ("denied", "refused", "ptrace_scope", "paranoid",
                                       "disabled", "not allowed")):
            pytest.skip(f"attach sampling is not allowed here: {exc}")
        raise
    return collector


def attach_profile(seconds: float = 2.0) -> Profile:
    """att_spin (running `seconds`) sampled by attach mode until it exits."""
    target = SpinTarget(seconds)
    try:
        collector = attach(target.pid, frequency_hz=500)
        profile = collector.wait()
        collector.stop()
        assert target.finish() == (ATT_DONE, 7)
    finally:
        target.kill()
    assert profile.total(0) > 50, "too few samples to test with"
    return profile


def gprof_collector(units: str = "150", status: str = "3"):
    """A GprofCollector (not started) on gp_split: heavy/medium/light = 60/30/10 of step."""
    from proftui.collectors.gprof.collector import GprofCollector

    binary = build_fixture("gp_split.c", ["-pg", "-g", "-O1", "-fno-inline"])
    return GprofCollector([str(binary), units, status], CollectorOptions(output="log"))


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


def sampled(argv: list[str]) -> Profile:
    """The sampler's profile of `argv`, run to its exit (output kept in memory)."""
    from proftui.collectors.sampler.collector import SamplerCollector

    collector = SamplerCollector(argv, CollectorOptions(output="log"))
    collector.start()
    try:
        return collector.wait()
    finally:
        collector.stop()


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
