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
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.base import Collector, CollectorOptions  # noqa: E402
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
from tests.helpers.tui import wait_for  # noqa: E402

SIZE = (130, 36)
Shots = Callable[[ProfTuiApp, Path], Awaitable[list[Path]]]  # drives an app, saves screens


def save(app: ProfTuiApp, out: Path, name: str) -> Path:
    """The screen as it is now, saved as `out`/`name`."""
    app.save_screenshot(filename=name, path=str(out))
    return out / name


def drive(collector: Collector, shots: Shots, out: Path) -> None:
    """Run the app on the started `collector`, driven by `shots`; print what was saved.
    The collector is stopped whatever happens."""
    try:
        for path in asyncio.run(shots(ProfTuiApp(collector=collector), out)):
            print(path)
    finally:
        collector.stop()


async def shoot(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        flat = app.query_one(FlatPane)
        await wait_for(pilot, lambda: app.profile is not None and app.profile.total(0) > 400
                       and app._proc is not None and len(app._proc.cpu_history) >= 3,
                       20.0, "samples and the process's CPU history")
        await pilot.pause(0.3)
        saved.append(save(app, out, "flat.svg"))
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        await pilot.pause()
        await pilot.press("h")
        await pilot.pause(0.2)
        saved.append(save(app, out, "tree.svg"))
        await pilot.press("escape")
        names = [e.frame.function for e in flat.shown]
        app.query_one(FlatTable).move_cursor(row=names.index("att_hot"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: not tree.pending, 20.0, "the focused tree")
        await pilot.pause(0.2)
        saved.append(save(app, out, "tree-focus.svg"))
        await pilot.press("enter")
        source = app.query_one(SourcePane)
        await wait_for(pilot, lambda: source.listing is not None, 20.0, "the source")
        await pilot.pause(0.3)
        saved.append(save(app, out, "source.svg"))
        await pilot.press("d")
        await wait_for(pilot, lambda: source.listing is not None
                       and source.listing.kind == "disassembly", 20.0, "the disassembly")
        await pilot.pause(0.3)
        saved.append(save(app, out, "disassembly.svg"))
        await pilot.press("i")
        await wait_for(pilot, lambda: source.listing is not None
                       and source.listing.kind == "interleaved", 20.0, "the interleaved listing")
        await pilot.pause(0.3)
        saved.append(save(app, out, "interleaved.svg"))
        app.exit()
    return saved


async def shoot_threads(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.profile is not None and len(app.profile.parts) >= 5
                       and app.profile.total(0) > 800, 30.0, "the threads' samples")
        await pilot.press("t")
        await pilot.pause(0.5)
        saved.append(save(app, out, "threads.svg"))
        await pilot.press("escape", "2")
        await pilot.pause(0.3)
        await pilot.press("T")
        tree = app.query_one(CallTreeView)
        await wait_for(pilot, lambda: not tree.pending, 30.0, "the tree of threads")
        await pilot.pause(0.5)
        saved.append(save(app, out, "thread-roots.svg"))
        await pilot.press("question_mark")
        await pilot.pause(0.5)
        saved.append(save(app, out, "help.svg"))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.ended, 60.0, "the target's end")
        await pilot.press("4")
        await pilot.pause(1.0)
        saved.append(save(app, out, "process.svg"))
        app.exit()
    return saved


async def shoot_heap(app: ProfTuiApp, out: Path) -> list[Path]:
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.ended, 60.0, "the heap demo")
        await pilot.pause(0.5)
        await pilot.press("m", "m")  # live bytes at exit: what leaked, by call path
        await pilot.pause(0.5)
        saved.append(save(app, out, "heap-flat.svg"))
        await pilot.press("4")
        await pilot.pause(1.0)
        saved.append(save(app, out, "heap-chart.svg"))
        app.exit()
    return saved


LUA_DIR = Path("/work/shared/programs/lua")
LUA_WORK = ROOT / "benchmarks" / "programs" / "mixed.lua"  # bench_tui.py's workload


async def shoot_flame(app: ProfTuiApp, out: Path) -> list[Path]:
    """The flame pane on Lua (a real interpreter: many functions, deep stacks)."""
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.profile is not None and app.profile.total(0) >= 1500,
                       60.0, "Lua's samples")
        await pilot.press("5")
        await pilot.pause(0.5)
        await pilot.press("up", "up", "up", "up")
        await pilot.pause(0.5)
        saved = save(app, out, "flame.svg")
        app.exit()
    return [saved]


def flame(out: Path) -> None:
    """flame.svg: Lua (/work/shared/programs/lua) under the sampler, if its source is here."""
    if not (LUA_DIR / "onelua.c").exists():
        print(f"flame.svg skipped: {LUA_DIR} is absent")
        return
    with tempfile.TemporaryDirectory() as scratch:
        lua = Path(scratch) / "lua"
        subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", str(LUA_DIR / "onelua.c"),
                        "-lm", "-ldl", "-o", str(lua)], check=True)
        collector = SamplerCollector([str(lua), str(LUA_WORK), "400"],
                                     CollectorOptions(output="log"))
        collector.start()
        drive(collector, shoot_flame, out)


async def shoot_diff(app: ProfTuiApp, out: Path) -> list[Path]:
    """The Δ columns of the flat profile and the differential flame graph."""
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.profile is not None and app.baseline is not None,
                       30.0, "the baseline aligned")
        await pilot.pause(0.5)
        saved.append(save(app, out, "diff-flat.svg"))
        await pilot.press("5")
        await pilot.pause(0.5)
        await pilot.press(*["up"] * 5)  # from the root up to dft_a, which grew
        await pilot.pause(0.5)
        saved.append(save(app, out, "diff-flame.svg"))
        app.exit()
    return saved


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
    drive(heap, shoot_heap, out)
    threads = build_fixture("thr_ratio.c", ["-O2", "-g", "-pthread"])
    with tempfile.TemporaryDirectory() as scratch:
        collector = SamplerCollector([str(threads), str(Path(scratch) / "report.txt"),
                                      "300000000"], CollectorOptions(output="log"))
        collector.start()
        drive(collector, shoot_threads, out)
    target = SpinTarget(30.0)
    try:
        drive(attach(target.pid, frequency_hz=1000), shoot, out)
    finally:
        target.kill()


if __name__ == "__main__":
    main()
