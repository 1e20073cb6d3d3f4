"""A fleet query in the TUI: the header names the query, `r` runs it again (a live
fleet view) and the panes show the new answer; a failing re-run is a notification."""

from __future__ import annotations

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta
from proftui.tui.app import ProfTuiApp
from proftui.tui.screens.main import MainScreen
from proftui.tui.widgets.header_bar import HeaderBar
from textual.pilot import Pilot

from tests.helpers.tui import run_app, screen_ready, wait_for

SOURCE = "clickhouse://db.example/prof?from=-15m&to=now&host=web1"


def _fleet(cost: float) -> Profile:
    profile = Profile(ProfileMeta(mode="fleet", argv=[SOURCE]), (SAMPLES,))
    main = profile.frames.intern(Frame("main", "/bin/srv"))
    work = profile.frames.intern(Frame("serve_request", "/bin/srv"))
    profile.tree.add_stack([main, work], [cost])
    return profile.finalize()


def test_r_runs_the_fleet_query_again() -> None:
    answers = [_fleet(250.0), ProftuiError("cannot reach ClickHouse at db.example:9000")]

    def reload() -> Profile:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: "100 samples" in str(
            app.query_one(HeaderBar).render()))
        # a key sent before the screen has its focus is lost (one suite run lost this `r`)
        await wait_for(pilot, lambda: screen_ready(app, MainScreen), what="main screen")
        header = str(app.query_one(HeaderBar).render())
        assert "fleet" in header and "db.example/prof" in header
        binding = app.screen.active_bindings["r"]
        assert binding.binding.description == "Re-query" and binding.enabled
        await pilot.press("r")
        await wait_for(pilot, lambda: "250 samples" in str(
            app.query_one(HeaderBar).render()))
        await pilot.press("r")  # the server went away: said, the last answer stays
        await wait_for(pilot, lambda: any("cannot reach" in n.message
                                          for n in app._notifications))
        assert "250 samples" in str(app.query_one(HeaderBar).render())

    run_app(ProfTuiApp(profile=_fleet(100.0), reload=reload, source=SOURCE), body, (140, 30))
