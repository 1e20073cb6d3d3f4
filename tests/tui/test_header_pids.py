"""The header names every process of a profile (a --follow run has several), or counts
those it has no room for: four processes showed as three before, without a word."""

from __future__ import annotations

from proftui.tui.app import ProfTuiApp
from proftui.tui.widgets.header_bar import HeaderBar, pid_list
from textual.pilot import Pilot

from tests.helpers.profiles import two_processes
from tests.helpers.tui import run_app, wait_for


def test_pid_list_names_or_counts_every_process() -> None:
    assert pid_list([7]) == "pid 7"
    assert pid_list([10, 11, 12, 13]) == "pids 10, 11, 12, 13"
    assert pid_list([1, 2, 3, 4, 5, 6, 7]) == "pids 1, 2, 3, 4 and 3 more"


def test_header_of_a_four_process_profile_names_all_four() -> None:
    profile = two_processes()
    profile.meta.pids = [4101, 4102, 4103, 4104]  # a --follow run: shell, and three programs

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: "4104" in str(app.query_one(HeaderBar).render()),
                       what="the fourth pid in the header")
        assert "pids 4101, 4102, 4103, 4104" in str(app.query_one(HeaderBar).render())

    run_app(ProfTuiApp(profile=profile), body, (160, 30))
