"""Regenerate docs/screenshots/*.svg: each TUI pane on a real, live profile.

tests/fixtures/att_spin.c is compiled and started, proftui attaches to it
(attach mode), and the app is driven by keys through Textual's Pilot while
the target runs; every pane is saved with `App.save_screenshot()`.  A second
run launches tests/fixtures/thr_ratio.c (four named threads) under the
sampler for the thread picker, threads as roots, the help screen and the
output panel.  The diff views: tests/fixtures/dft_work.c built twice (dft_a's work
doubled, one function replaced), each build recorded by the sampler, then opened as
`proftui open NEW --base BASE` does: the flat profile's Δ columns and the
differential flame graph.

usage: python docs/make_screenshots.py [OUTPUT_DIR [flame|diff]]
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.base import CollectorOptions  # noqa: E402
from proftui.collectors.heap.collector import HeapCollector  # noqa: E402
from proftui.collectors.sampler.collector import SamplerCollector  # noqa: E402
from proftui.tui.app import ProfTuiApp  # noqa: E402
from proftui.tui.demo import build_demo  # noqa: E402
from proftui.tui.panes.flat import FlatPane  # noqa: E402
from proftui.tui.panes.source import SourcePane  # noqa: E402
from proftui.tui.panes.tree import CallTreeView  # noqa: E402
from proftui.tui.widgets.flat_table import FlatTable  # noqa: E402

from tests.conftest import build_fixture  # noqa: E402
from tests.helpers.collect import attach  # noqa: E402
from tests.helpers.targets import SpinTarget  # noqa: E402

SIZE = (130, 36)


async def shoot(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []

    def save(name: str) -> None:
        app.save_screenshot(filename=name, path=str(out))
        saved.append(out / name)

    async with app.run_test(size=SIZE) as pilot:
        async def until(predicate: Callable[[], object], timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    raise SystemExit("timed out driving the app")
                await pilot.pause(0.05)

        flat = app.query_one(FlatPane)
        await until(lambda: app.profile is not None and app.profile.total(0) > 400
                    and app._proc is not None and len(app._proc.cpu_history) >= 3)
        await pilot.pause(0.3)
        save("flat.svg")
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause(0.2)
        save("tree.svg")
        await pilot.press("escape")
        names = [e.frame.function for e in flat.shown]
        app.query_one(FlatTable).move_cursor(row=names.index("att_hot"))
        await pilot.press("enter")
        await until(lambda: not tree.pending)
        await pilot.pause(0.2)
        save("tree-focus.svg")
        await pilot.press("enter")
        source = app.query_one(SourcePane)
        await until(lambda: source.listing is not None)
        await pilot.pause(0.3)
        save("source.svg")
        await pilot.press("d")
        await until(lambda: source.listing is not None and source.listing.kind == "disassembly")
        await pilot.pause(0.3)
        save("disassembly.svg")
        await pilot.press("i")
        await until(lambda: source.listing is not None and source.listing.kind == "interleaved")
        await pilot.pause(0.3)
        save("interleaved.svg")
        app.exit()
    return saved


async def shoot_threads(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []

    def save(name: str) -> None:
        app.save_screenshot(filename=name, path=str(out))
        saved.append(out / name)

    async with app.run_test(size=SIZE) as pilot:
        async def until(predicate: Callable[[], object], timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while not predicate():
                if time.monotonic() > deadline:
                    raise SystemExit("timed out driving the app")
                await pilot.pause(0.05)

        await until(lambda: app.profile is not None and len(app.profile.parts) >= 5
                    and app.profile.total(0) > 800)
        await pilot.press("t")
        await pilot.pause(0.5)
        save("threads.svg")
        await pilot.press("escape", "2")
        await pilot.pause(0.3)
        await pilot.press("T")
        tree = app.query_one(CallTreeView)
        await until(lambda: not tree.pending)
        await pilot.pause(0.5)
        save("thread-roots.svg")
        await pilot.press("question_mark")
        await pilot.pause(0.5)
        save("help.svg")
        await pilot.press("escape")
        await until(lambda: app.ended, timeout=60.0)
        await pilot.press("4")
        await pilot.pause(1.0)
        save("process.svg")
        app.exit()
    return saved


async def shoot_heap(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60.0
        while not app.ended:
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for the heap demo")
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        await pilot.press("m", "m")  # live bytes at exit: what leaked, by call path
        await pilot.pause(0.5)
        app.save_screenshot(filename="heap-flat.svg", path=str(out))
        saved.append(out / "heap-flat.svg")
        await pilot.press("4")
        await pilot.pause(1.0)
        app.save_screenshot(filename="heap-chart.svg", path=str(out))
        saved.append(out / "heap-chart.svg")
        app.exit()
    return saved


LUA_DIR = Path("/work/shared/programs/lua")
LUA_WORK = """
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
for _ = 1, 400 do
  local t = {}
  for i = 1, 20000 do t[i] = tostring(i * 7 % 1000) .. "x" end
  table.sort(t)
  local parts = {}
  for w in table.concat(t, ",", 1, 2000):gmatch("[^,]+") do parts[#parts+1] = w:upper() end
  fib(18)
end
"""


async def shoot_flame(app: ProfTuiApp, out: Path) -> list[Path]:
    """The flame pane on Lua (a real interpreter: many functions, deep stacks)."""
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 60.0
        while app.profile is None or app.profile.total(0) < 1500:
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for Lua's samples")
            await pilot.pause(0.1)
        await pilot.press("5")
        await pilot.pause(0.5)
        await pilot.press("up", "up", "up", "up")
        await pilot.pause(0.5)
        app.save_screenshot(filename="flame.svg", path=str(out))
        app.exit()
    return [out / "flame.svg"]


def flame(out: Path) -> None:
    """flame.svg: Lua (/work/shared/programs/lua) under the sampler, if its source is here."""
    if not (LUA_DIR / "onelua.c").exists():
        print(f"flame.svg skipped: {LUA_DIR} is absent")
        return
    with tempfile.TemporaryDirectory() as scratch:
        lua = Path(scratch) / "lua"
        subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", str(LUA_DIR / "onelua.c"),
                        "-lm", "-ldl", "-o", str(lua)], check=True)
        script = Path(scratch) / "work.lua"
        script.write_text(LUA_WORK)
        collector = SamplerCollector([str(lua), str(script)], CollectorOptions(output="log"))
        collector.start()
        try:
            for path in asyncio.run(shoot_flame(ProfTuiApp(collector=collector), out)):
                print(path)
        finally:
            collector.stop()


async def shoot_diff(app: ProfTuiApp, out: Path) -> list[Path]:
    """The Δ columns of the flat profile and the differential flame graph."""
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30.0
        while app.profile is None or app.baseline is None:
            if time.monotonic() > deadline:
                raise SystemExit("timed out aligning the baseline")
            await pilot.pause(0.1)
        await pilot.pause(0.5)
        app.save_screenshot(filename="diff-flat.svg", path=str(out))
        await pilot.press("5")
        await pilot.pause(0.5)
        await pilot.press(*["up"] * 5)  # from the root up to dft_a, which grew
        await pilot.pause(0.5)
        app.save_screenshot(filename="diff-flame.svg", path=str(out))
        app.exit()
    return [out / "diff-flat.svg", out / "diff-flame.svg"]


def diff(out: Path) -> None:
    """diff-flat.svg, diff-flame.svg: two builds of dft_work.c, each sampled."""
    from proftui.collectors.formats.importers import load_any

    with tempfile.TemporaryDirectory() as scratch:
        saved: list[Path] = []
        for name, times in (("base", 1), ("new", 2)):
            built = build_fixture("dft_work.c", ["-O2", "-g", "-fno-omit-frame-pointer",
                                                 f"-DA_TIMES={times}"])
            where = Path(scratch) / name
            where.mkdir()
            binary = where / "dft_work"  # one name for both builds, as pprof matches
            binary.write_bytes(built.read_bytes())
            binary.chmod(0o755)
            record = Path(scratch) / f"{name}.proftui"
            subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "--mode",
                            "sampler", "-o", str(record), str(binary), "1500"],
                           check=True, capture_output=True)
            saved.append(record)
        app = ProfTuiApp(profile=load_any(saved[1]), base=load_any(saved[0]),
                         base_name="base.proftui")
        for path in asyncio.run(shoot_diff(app, out)):
            print(path)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    if sys.argv[2:] == ["flame"]:  # only the flame graph
        flame(out)
        return
    if sys.argv[2:] == ["diff"]:  # only the diff views
        diff(out)
        return
    flame(out)
    diff(out)
    heap = HeapCollector([str(build_demo("heap"))], CollectorOptions(output="log"))
    heap.start()
    try:
        for path in asyncio.run(shoot_heap(ProfTuiApp(collector=heap), out)):
            print(path)
    finally:
        heap.stop()
    threads = build_fixture("thr_ratio.c", ["-O2", "-g", "-pthread"])
    with tempfile.TemporaryDirectory() as scratch:
        collector = SamplerCollector([str(threads), str(Path(scratch) / "report.txt"),
                                      "300000000"], CollectorOptions(output="log"))
        collector.start()
        try:
            for path in asyncio.run(shoot_threads(ProfTuiApp(collector=collector), out)):
                print(path)
        finally:
            collector.stop()
    target = SpinTarget(30.0)
    collector = attach(target.pid, frequency_hz=1000)
    try:
        app = ProfTuiApp(collector=collector)
        for path in asyncio.run(shoot(app, out)):
            print(path)
    finally:
        collector.stop()
        target.kill()


if __name__ == "__main__":
    main()
