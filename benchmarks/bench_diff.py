"""What the diff views cost on the big synthetic profile (50,000 functions, 200,000 nodes).

Model: `diff.align` of another profile of that size, the baseline's flat profile,
the per-function changes (`diffviews.function_changes`) and `diff.subtract` (the live
since-mark view), each as a ratio of `flat_profile` of the same profile measured
in the same run (the anchor: what opening a profile costs today).

TUI: key-to-screen through Textual's Pilot on the big profile opened with a base
(the Δ columns on) and without (the anchor), same keys, same run: `s` (sort),
`a` (shares/absolute), a filter character, `2` (tree with Δ).  Goal: p95 <= 100 ms.

usage: python benchmarks/bench_diff.py [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proftui.collectors.model.diff import align, subtract
from proftui.collectors.model.diffviews import function_changes, gone_entries
from proftui.collectors.model.parts import part_total
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane

from benchmarks.bench_tui import pct, synthetic_profile


def _timed(action: object) -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - started


def model(new: Profile, base: Profile) -> None:
    anchor = _timed(lambda: flat_profile(new))
    aligned = align(base, new)
    rows = flat_profile(new)
    base_rows = flat_profile(aligned)
    costs = {
        "align": _timed(lambda: align(base, new)),
        "flat profile of the baseline": _timed(lambda: flat_profile(aligned)),
        "function changes (once per view)": _timed(lambda: function_changes(
            rows + gone_entries(rows, base_rows, len(new.metrics)), base_rows, 0,
            part_total(new, None, 0), part_total(aligned, None, 0), "shares")),
        "subtract (since the mark)": _timed(lambda: subtract(new, base)),
    }
    print(f"anchor: flat_profile of the big profile {anchor * 1000:.0f} ms")
    for name, seconds in costs.items():
        print(f"  {name:34} {seconds * 1000:8.0f} ms  {seconds / anchor:5.2f}x the anchor")


async def keys(new: Profile, base: Profile | None, repeat: int) -> dict[str, list[float]]:
    app = ProfTuiApp(profile=new, base=base, base_name="base")
    out: dict[str, list[float]] = {}
    async with app.run_test(size=(160, 45)) as pilot:
        flat = app.query_one(FlatPane)
        while not flat.shown or (base is not None and flat.changes is None):
            await pilot.pause(0.05)
        for _ in range(repeat):
            for name, key in (("s (sort)", "s"), ("a (shares/absolute)", "a"),
                              ("2 (tree)", "2"), ("1 (flat)", "1")):
                started = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                out.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            await pilot.press("slash")
            started = time.perf_counter()
            await pilot.press("m")
            await pilot.pause()
            out.setdefault("filter character", []).append((time.perf_counter() - started) * 1000)
            await pilot.press("backspace", "escape")
            await pilot.pause()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    new = synthetic_profile(50_000, 200_000, seed=1)
    base = synthetic_profile(50_000, 200_000, seed=2)
    model(new, base)
    plain = asyncio.run(keys(new, None, args.repeat))
    diffed = asyncio.run(keys(new, base, args.repeat))
    print(f"\n{'key':22} {'no base p50':>11} {'--base p50':>10} {'--base p95':>10}  goal")
    for name, values in diffed.items():
        p95 = pct(values, 0.95)
        print(f"{name:22} {statistics.median(plain[name]):9.1f}ms "
              f"{statistics.median(values):8.1f}ms {p95:8.1f}ms  "
              f"{'ok' if p95 <= 100 else 'SLOW'}")


if __name__ == "__main__":
    main()
