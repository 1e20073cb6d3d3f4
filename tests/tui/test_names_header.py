"""The header's time since the last reset (issue 15), live on a replayed profile."""

from __future__ import annotations

import re

from proftui.tui.app import ProfTuiApp
from textual.pilot import Pilot

from tests.helpers.profiles import template_profile
from tests.helpers.tui import ReplayCollector, run_app, screen_text, wait_for


def test_header_counts_time_since_reset() -> None:
    collector = ReplayCollector(template_profile())
    app = ProfTuiApp(collector=collector)

    def since() -> float | None:
        found = re.search(r"([0-9.]+) s since reset", screen_text(app).splitlines()[0])
        return float(found.group(1)) if found else None

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: collector.ticks >= 2, what="two snapshots")
        assert since() is None  # not reset yet: only the elapsed time
        await pilot.press("r")
        await wait_for(pilot, lambda: since() is not None, what="since reset")
        first = since()
        assert first is not None and first < 5
        await wait_for(pilot, lambda: (since() or 0) >= first + 0.6, what="the clock")
        await collector.end_and_quit(pilot, app)

    try:
        run_app(app, body, (120, 30))
    finally:
        collector.stop()
