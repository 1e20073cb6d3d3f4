"""Loadable but odd profiles in the TUI (header, panes), and a 100,000-deep tree.

Each profile goes through save and load (what `proftui open` does) and then the
app, headless, through every pane and the bottom-up view: the app must not fail
and the header must show escaped text, never raw escape sequences.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import (
    SAMPLES,
    Frame,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import INVERTED_MAX_DEPTH
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.tree import MAX_VIEW_DEPTH, CallTreeView
from textual.pilot import Pilot

from tests.helpers.hostile import MUTATION, PATHS, write_mutated
from tests.helpers.profiles import deep_chain
from tests.helpers.tui import run, run_app, screen_text, wait_for

SIZE = (120, 36)


def _profile(meta: ProfileMeta, metrics: tuple[Metric, ...] = (SAMPLES,),
             name: str = "main", cost: float = 5.0, module: str = "/bin/x") -> Profile:
    profile = Profile(meta, metrics)
    frame = profile.frames.intern(Frame(name, module, "/src/x.c", 3))
    profile.tree.add_stack([frame, frame], [cost] * len(metrics))
    return profile.finalize()


ODD: dict[str, tuple[Callable[[], Profile], str]] = {
    # name: (profile, text the header must show)
    "empty argv, no exit status": (lambda: _profile(ProfileMeta(mode="sampler")), "5 samples"),
    "zero totals": (lambda: _profile(ProfileMeta(mode="sampler"), cost=0.0), "0 samples"),
    "huge numbers": (lambda: _profile(
        ProfileMeta(mode="sampler", dropped=2**63 - 1, start_time=0.0, end_time=1e11),
        cost=2.0**62), "4,611,686,018,427,387,904 samples"),
    "start after end": (lambda: _profile(
        ProfileMeta(mode="sampler", start_time=1e11, end_time=0.0)), "0:00"),
    "weird metric name": (lambda: _profile(
        ProfileMeta(mode="\x1b[2Jmode"), (Metric("[bold]x\x1b]0;pwned\x07\n", "count"),),
        name="f\x1b[2J"), "[bold]x\\x1b]0;pwned\\x07\\x0a"),
    "undecodable bytes": (lambda: _profile(
        ProfileMeta(mode="sampler", argv=["/tmp/\udcff\udcfeprog"], threads={1: "t\udcff"}),
        name="f\udcff\ud800", module="/bin/\udcffx"), "5 samples"),
    "no frames": (lambda: Profile(ProfileMeta(mode="import"), (SAMPLES,)).finalize(),
                  "0 samples"),
}


@pytest.mark.parametrize("kind", list(ODD))
def test_odd_profiles_open(tmp_path: Path, kind: str) -> None:
    make, shown = ODD[kind]
    path = tmp_path / "odd.proftui"
    storage.save(make(), path, embed_sources=False)
    profile = load_any(path)  # loadable: the validator accepts it

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: "saved profile" in screen_text(app), what="header")
        name = profile.frames[0].function if len(profile.frames) else ""
        # the flat profile's row, escaped (the table may paint a frame after the header)
        await wait_for(pilot, lambda: display(name) in screen_text(app), what="flat row")
        for key in ("2", "h", "u", "1", "3", "4", "2", "u", "f"):
            await pilot.press(key)
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        header = screen_text(app).splitlines()[0]
        assert shown in header, header
        assert "\x1b" not in screen_text(app)
        await pilot.press("q")

    run_app(ProfTuiApp(profile=profile), body, SIZE)


def test_100000_deep_tree_bottom_up_view() -> None:
    """The bottom-up view of a 100,000-deep recursion appears, says it is cut, and `q` quits."""
    profile = deep_chain()

    async def body() -> None:
        app = ProfTuiApp(profile=profile)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "saved profile" in screen_text(app), what="header")
            await pilot.press("2")
            await pilot.press("h")  # the hot path goes down to the row limit, no further
            await pilot.pause(0.3)
            tree = app.query_one(CallTreeView)
            cursor = tree.cursor_node
            assert cursor is not None and cursor.data is not None
            depth, node = 0, cursor
            while node.parent is not None:
                depth, node = depth + 1, node.parent
            assert depth == MAX_VIEW_DEPTH
            await pilot.press("u")
            await wait_for(pilot, lambda: "levels up are cut" in screen_text(app), timeout=60,
                           what="bottom-up tree")
            assert f"more than {INVERTED_MAX_DEPTH} levels" in screen_text(app)
            start = time.monotonic()
            await pilot.press("q")
        assert time.monotonic() - start < 30  # quitting is not held up
    run(body)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(mutations=st.lists(MUTATION, min_size=1, max_size=3))
# a source path with a lone surrogate: the source pane opens it without failing
@example(mutations=[(PATHS.index(("frames", 2, 2)), "replace", "\udcff\ud800")])
def test_fuzzed_loadable_profiles_open(tmp_path: Path, mutations: list[tuple[int, str, Any]]
                                       ) -> None:
    """`proftui open` of mutated files that still load: every pane draws, nothing fails."""
    path = write_mutated(tmp_path / "fuzzed.proftui", mutations)
    try:
        profile = load_any(path)
    except ProftuiError:
        assume(False)  # refused files are the unit fuzz test's business
        return

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: "saved profile" in screen_text(app), what="header")
        for key in ("2", "h", "u", "f", "3", "4", "1"):
            await pilot.press(key)
            await pilot.pause(0.05)
        await pilot.press("q")

    run_app(ProfTuiApp(profile=profile), body, SIZE)
