"""A fleet query in the TUI: the header names the query, `r` runs it again (a live
fleet view) and the panes show the new answer; a failing re-run is a notification.
`t` `g` breaks it down another way (a new query), `b` in the picker makes a part the
baseline another part is compared with."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet.query import FleetQuery
from proftui.collectors.fleet.url import parse
from proftui.collectors.model.profile import SAMPLES, CallTree, Frame, Profile, ProfileMeta
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.screens.main import MainScreen
from proftui.tui.screens.threads import ThreadsScreen
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


def _per(parts: dict[str, dict[str, float]]) -> Profile:
    """A fleet profile whose parts hold these functions' self costs (under main)."""
    profile = Profile(ProfileMeta(mode="fleet", argv=[SOURCE]), (SAMPLES,))
    main = profile.frames.intern(Frame("main", "/bin/srv"))
    for label, costs in parts.items():
        tree = profile.parts.setdefault(label, CallTree(1))
        for name, cost in costs.items():
            path = [main, profile.frames.intern(Frame(name, "/bin/srv"))]
            profile.tree.add_stack(path, [cost])
            tree.add_stack(path, [cost])
    return profile.finalize()


# What the server answers per breakdown (the same rows, grouped another way).
ANSWERS = {
    (): {"web1 srv pid 10": {"parse": 30.0, "render": 10.0},
         "web2 srv pid 11": {"parse": 20.0, "render": 40.0}},
    ("host",): {"host=web1": {"parse": 30.0, "render": 10.0},
                "host=web2": {"parse": 20.0, "render": 40.0}},
    ("program",): {"program=srv": {"parse": 50.0, "render": 50.0}},
}


class FakeQuery(FleetQuery):
    """A fleet query whose server is ANSWERS (the breakdowns it was asked are kept)."""

    asked: ClassVar[list[tuple[str, ...]]] = []

    def load(self) -> Profile:
        return _per(ANSWERS[self.url.by])

    def broken_down(self, by: tuple[str, ...]) -> tuple[FleetQuery, Profile]:
        FakeQuery.asked.append(by)
        query = FakeQuery(replace(self.url, by=by))
        return query, query.load()


async def _picker(pilot: Pilot, app: ProfTuiApp) -> ThreadsScreen:
    await wait_for(pilot, lambda: screen_ready(app, ThreadsScreen), what="picker")
    assert isinstance(app.screen, ThreadsScreen)
    return app.screen


def test_t_breaks_a_fleet_profile_down_another_way_and_b_compares_two_parts() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: screen_ready(app, MainScreen), what="main screen")
        await wait_for(pilot, lambda: app.query_one(FlatPane).entries, what="flat rows")
        await pilot.press("t")
        picker = await _picker(pilot, app)
        assert picker.breakdown.startswith("process") and picker.next_breakdown == "host"
        await pilot.press("g")  # by host: a new query, and the picker on its parts
        await wait_for(pilot, lambda: isinstance(app.screen, ThreadsScreen)
                       and app.screen.breakdown == "host", what="picker by host")
        assert FakeQuery.asked == [("host",)]
        assert [c.label for c in app.screen.choices] == [None, "host=web2", "host=web1"]
        await pilot.press("down", "down", "b")  # host=web1 is the baseline
        await wait_for(pilot, lambda: "Δ vs part host=web1" in str(
            app.query_one(HeaderBar).render()), what="the baseline in the header")
        await pilot.press("t")
        await _picker(pilot, app)
        await pilot.press("down", "enter")  # show host=web2, compared with host=web1
        flat = app.query_one(FlatPane)
        await wait_for(pilot, lambda: app.part == "host=web2" and flat.changes,
                       what="Δ columns")
        names = {app.profile.frames[fid].function: change  # type: ignore[union-attr]
                 for fid, change in (flat.changes or {}).items()}
        # web2: parse 20/60, render 40/60; web1: parse 30/40, render 10/40 (points)
        assert round(names["parse"].self_delta, 1) == round(100 * (20 / 60 - 30 / 40), 1)
        assert round(names["render"].self_delta, 1) == round(100 * (40 / 60 - 10 / 40), 1)
        await pilot.press("x")  # forgets the part baseline
        await wait_for(pilot, lambda: flat.changes is None, what="no Δ")
        await pilot.press("t")
        await _picker(pilot, app)
        await pilot.press("g")  # by program: host=web2 is gone, so all of it is shown
        await wait_for(pilot, lambda: isinstance(app.screen, ThreadsScreen)
                       and app.screen.breakdown == "program", what="picker by program")
        assert app.part is None
        assert [c.label for c in app.screen.choices] == [None, "program=srv"]

    FakeQuery.asked = []
    app = ProfTuiApp(profile=_per(ANSWERS[()]), fleet=FakeQuery(parse(SOURCE)))
    run_app(app, body, (140, 30))


def test_b_in_the_picker_compares_two_threads_of_a_saved_profile() -> None:
    """Not only fleets: any two parts (threads of one run) compare through `b`."""
    profile = _per({"pid 5 tid 5": {"parse": 10.0}, "pid 5 tid 6": {"parse": 5.0,
                                                                     "render": 5.0}})

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: screen_ready(app, MainScreen), what="main screen")
        await wait_for(pilot, lambda: app.query_one(FlatPane).entries, what="flat rows")
        await pilot.press("t")
        picker = await _picker(pilot, app)
        assert picker.next_breakdown == ""  # g: not a fleet profile
        index = next(i for i, c in enumerate(picker.choices) if c.label == "pid 5 tid 5")
        await pilot.press(*["down"] * index, "b")
        await pilot.press("t")
        picker = await _picker(pilot, app)
        index = next(i for i, c in enumerate(picker.choices) if c.label == "pid 5 tid 6")
        await pilot.press(*["down"] * index, "enter")
        flat = app.query_one(FlatPane)
        await wait_for(pilot, lambda: app.part == "pid 5 tid 6" and flat.changes,
                       what="Δ columns")
        names = {profile.frames[fid].function: change.self_delta
                 for fid, change in (flat.changes or {}).items()}
        assert round(names["parse"], 1) == -50.0 and round(names["render"], 1) == 50.0

    run_app(ProfTuiApp(profile=profile), body, (140, 30))
