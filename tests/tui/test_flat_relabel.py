"""A sort or a filter of the flat profile shows the same functions again: their labels
(shortened, made distinct, fitted to the column) are not made anew for every row, which
cost a 50,000-function profile ~0.2 s per key (issue 33)."""

from __future__ import annotations

import pytest
from proftui.collectors.model.profile import Frame
from proftui.tui.app import ProfTuiApp
from proftui.tui.widgets.flat_table import FlatTable
from textual.pilot import Pilot

from tests.helpers.profiles import stacks_profile
from tests.helpers.tui import flat_ready, run_app, wait_for

FUNCTIONS = 3000


def test_a_sort_makes_no_label_again(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = [Frame(f"ns::fn_{i:05d}(int)", module="/bin/p", address=0x1000 + i)
              for i in range(FUNCTIONS)]
    profile = stacks_profile(frames, [([0, i], float(1 + i % 7)) for i in range(1, FUNCTIONS)])
    made: list[str] = []
    label = FlatTable.label

    def counted(self: FlatTable, e: object) -> str:
        made.append(e.frame.function)  # type: ignore[attr-defined]
        return label(self, e)  # type: ignore[arg-type]

    monkeypatch.setattr(FlatTable, "label", counted)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        flat = await flat_ready(pilot, app)
        table = app.query_one(FlatTable)
        await wait_for(pilot, lambda: len(made) >= FUNCTIONS, what="every row fitted")
        for key in ("s", "s", "S"):
            made.clear()
            sort = flat.sort_key, flat.descending
            await pilot.press(key)
            await wait_for(pilot, lambda s=sort: (flat.sort_key, flat.descending) != s,
                           what="the new sort")
            await pilot.pause()
            # The rows drawn (a screenful) and nothing else: every function was fitted.
            assert len(made) <= 3 * table.size.height, (key, len(made))

    run_app(ProfTuiApp(profile=profile), body)
