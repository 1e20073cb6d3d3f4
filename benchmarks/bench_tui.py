"""Keypress-to-screen latency of the TUI on a big synthetic profile, and its memory.

The big profile has 50,000 functions and a 200,000-node call tree (random
shape with a fixed seed, skewed costs so hot paths exist).  Each action is a
real key pressed through Textual's Pilot; the time runs from the press until
every message it caused is handled and the screen update has run.  Anchor:
the same keys on a small profile (60 functions, 200 nodes) in the same run,
so the ratio shows what profile size costs.  Goal: p95 <= 100 ms on the big one.
The flame pane (5) is measured too: move, zoom in and out, search and n/N.
`--base`: the big profile again, opened with a baseline (`open NEW --base BASE`: a
copy of it with a third of its nodes' costs changed), so every view draws its Δ
columns or diff colours; `a` (shares/absolute) is timed there too.  Anchor: the
same big profile without a base, in the same run.

Then the observer's own CPU use (issue 15): the installed `proftui` runs in a
real terminal (tmux, 160x45) on a long-running target sampled at 1 kHz (Lua
from /work/shared/programs/lua running a mixed workload, else the att_spin
fixture), and its CPU time (every thread, plus the tools it runs such as
objdump, from /proc via psutil; the target excluded) is read over a window
per state: live on each pane, live with the disassembly shown, paused, idle
after the target ended, and a saved profile open.  Anchor: an idle `sleep`
in the same tmux, same window.
Goals: <= 15% of one CPU live at 1 kHz, <= 5% paused or idle.

usage: python benchmarks/bench_tui.py [--repeat N] [--only latency|observer] [--window S]
                                    [--base]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.model.profile import CPU_NS, SAMPLES, CallNode, Frame, Profile, ProfileMeta  # noqa: E402
from proftui.tui.app import ProfTuiApp  # noqa: E402
from proftui.tui.panes.flame import FlamePane  # noqa: E402
from proftui.tui.panes.flat import FlatPane  # noqa: E402
from proftui.tui.panes.tree import CallTreeView  # noqa: E402
from proftui.tui.widgets.flame_graph import FlameGraph  # noqa: E402
from proftui.tui.widgets.flat_table import FlatTable  # noqa: E402
from textual import events  # noqa: E402

SIZE = (160, 50)


def synthetic_profile(functions: int, nodes: int, seed: int = 1) -> Profile:
    """A profile with `functions` frames and a `nodes`-node tree (every function used).

    Stacks of 2-40 frames are added one by one; at each level an existing child is
    followed with probability 0.85, so paths share prefixes as in real programs.
    """
    rng = random.Random(seed)
    profile = Profile(ProfileMeta(mode="sampler", argv=["synthetic"], pids=[1]),
                      (SAMPLES, CPU_NS))
    ids = [profile.frames.intern(Frame(f"fn_{i:05d}_{'x' * (i % 17)}", module="/bin/synthetic",
                                       address=0x1000 + 64 * i, raw_name=f"fn_{i}"))
           for i in range(functions)]
    kids: dict[int, list[CallNode]] = {0: []}
    created = 0
    while created < nodes:
        node = profile.tree.root
        for _level in range(rng.randint(2, 40)):
            existing = kids[node.index]
            if existing and rng.random() < 0.85:
                node = existing[min(len(existing) - 1, int(rng.expovariate(0.5)))]
                continue
            fid = ids[created] if created < functions else \
                ids[int(rng.paretovariate(1.1)) % functions]
            if fid in node.children:
                node = node.children[fid]
                continue
            child = node.child(fid)
            kids[node.index].append(child)
            kids[child.index] = []
            node = child
            created += 1
            if created >= nodes:
                break
        samples = int(rng.paretovariate(1.5))
        node.self_cost[0] += samples
        node.self_cost[1] += samples * 1_000_000.0
    return profile.finalize()


def perturbed(functions: int, nodes: int, seed: int = 1) -> Profile:
    """The profile `synthetic_profile` builds, a third of its nodes' costs changed (a
    baseline for it: most paths match, some grew or shrank, some are absent)."""
    profile = synthetic_profile(functions, nodes, seed)
    rng = random.Random(seed + 100)
    for node in profile.tree.nodes():
        if node.self_cost[0] and rng.random() < 0.33:
            factor = rng.choice((0.0, 0.5, 2.0, 3.0))
            node.self_cost[0] = float(int(node.self_cost[0] * factor))
            node.self_cost[1] = node.self_cost[1] * factor
    return profile.finalize()


async def measure(profile: Profile, repeat: int, base: Profile | None = None
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per action, key-to-screen latencies in ms; and key-to-result for worker views."""
    started = time.perf_counter()
    app = ProfTuiApp(profile=profile, base=base)
    times: dict[str, list[float]] = {}
    results: dict[str, list[float]] = {}  # key press -> derived view on screen
    async with app.run_test(size=SIZE) as pilot:
        flat = app.query_one(FlatPane)
        while not flat.shown or (base is not None and app.baseline is None):
            await asyncio.sleep(0.01)
        await pilot.pause()
        times["_first_screen_s"] = [time.perf_counter() - started]
        times["_rss_shown_mib"] = [psutil.Process().memory_info().rss / 2**20]

        async def timed(name: str, action: Callable[[], Awaitable[None]]) -> None:
            start = time.perf_counter()
            await action()
            times.setdefault(name, []).append(1000 * (time.perf_counter() - start))

        async def press(key: str) -> None:
            # Pilot.press also waits for CPU idleness (~50-100 ms of sleeps per key on a
            # shared machine), which is not the app's latency: post the key as the
            # terminal driver would, wait until every queued message is handled, then
            # run the screen update (layout + compositor + write) now.
            event = events.Key(key, key if len(key) == 1 else None)
            event.set_sender(app)
            app.post_message(event)
            for _ in range(3):  # handlers post follow-up messages (focus, expand, ...)
                await pilot._wait_for_screen()
            app.screen._on_timer_update()

        table = app.query_one(FlatTable)
        for _ in range(repeat):
            await timed("flat: cursor down", lambda: press("down"))
        if base is not None:
            for _ in range(max(4, repeat // 5)):
                await timed("flat: shares/absolute (a)", lambda: press("a"))
        for _ in range(max(4, repeat // 5)):
            await timed("flat: sort column (s)", lambda: press("s"))
        while flat.sort_key != "self":
            await pilot.press("s")
        await press("slash")
        for char in "fn0012":  # each keystroke re-filters all functions
            await timed("flat: filter, one keystroke", lambda c=char: press(c))
        await press("escape")
        flat.query_one("#flat-filter").value = ""
        await pilot.pause()
        tree = app.query_one(CallTreeView)

        async def until_derived() -> None:
            while tree.pending:
                await asyncio.sleep(0.005)
            for _ in range(2):
                await pilot._wait_for_screen()
            app.screen._on_timer_update()

        for i in range(max(8, repeat // 3)):
            table.move_cursor(row=i % 20)
            start = time.perf_counter()
            await timed("drill flat -> tree (Enter)", lambda: press("enter"))
            await until_derived()
            results.setdefault("focused tree shown (worker)", []).append(
                1000 * (time.perf_counter() - start))
            await timed("back (Escape)", lambda: press("escape"))
        await pilot.press("2")
        await pilot.pause()
        for _ in range(repeat):
            await timed("tree: cursor down", lambda: press("down"))
        for _ in range(max(4, repeat // 5)):
            tree.move_to(tree.root.children[0])
            await timed("tree: expand hot path (h)", lambda: press("h"))
            await timed("tree: collapse/expand (space)", lambda: press("space"))
        start = time.perf_counter()
        await timed("tree: bottom-up (u)", lambda: press("u"))
        await until_derived()
        results.setdefault("bottom-up tree shown (worker)", []).append(
            1000 * (time.perf_counter() - start))
        await flame_keys(app, pilot, press, timed, repeat, results)
        if base is not None:
            for _ in range(max(4, repeat // 5)):
                await timed("flame: shares/absolute (a)", lambda: press("a"))
    return times, results


async def flame_keys(app: ProfTuiApp, pilot: object, press: Callable[[str], Awaitable[None]],
                     timed: Callable[[str, Callable[[], Awaitable[None]]], Awaitable[None]],
                     repeat: int, results: dict[str, list[float]]) -> None:
    """The flame pane (5): show it, move, zoom in and out, search and step through matches."""
    graph = app.query_one(FlameGraph)
    for _ in range(max(4, repeat // 5)):
        await timed("flame: show pane (5)", lambda: press("5"))
        await press("1")
    await press("5")
    graph.set_icicle(False)  # root at the bottom, whatever the settings file remembers
    for i in range(repeat):  # up towards the leaves, then back down to the root
        await timed("flame: move up/down", lambda i=i: press("up" if i % 8 < 4 else "down"))
    for i in range(repeat):
        await timed("flame: move left/right", lambda i=i: press("right" if i % 4 < 2 else "left"))
    for _ in range(max(4, repeat // 5)):
        graph.action_to_root()
        await press("up")
        await press("up")
        assert graph.sel[0] == 2, graph.sel  # a frame two levels above "all"
        await timed("flame: zoom (Enter)", lambda: press("enter"))
        assert graph.zoomed
        await timed("flame: zoom out (Esc)", lambda: press("escape"))
        assert not graph.zoomed and app.nav[-1].pane == "flame"
    pane = app.query_one(FlamePane)
    for pattern in ("fn_000", "fn_01", "x{16}", "fn_1", "fn_2.*x{3}$", "fn_0004", "fn_3"):
        await press("slash")
        await press("ctrl+u")  # the prompt starts with the previous pattern
        for char in pattern:
            await press(char)
        start = time.perf_counter()
        await timed("flame: search (Enter in the prompt)", lambda: press("enter"))
        while pane.share is None:  # the combined share: a walk of the tree in slices
            await asyncio.sleep(0.005)
        results.setdefault("flame: search share (in slices)", []).append(
            1000 * (time.perf_counter() - start))
        for i in range(max(4, repeat // 5)):
            await timed("flame: next match (n)", lambda i=i: press("n" if i % 3 else "N"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the observer's own CPU use ---------------------------------------------------------

PROFTUI = Path(sys.executable).parent / "proftui"
LUA_DIR = Path("/work/shared/programs/lua")
LIVE_GOAL, IDLE_GOAL = 15.0, 5.0  # % of one CPU
LUA_SCRIPT = ROOT / "benchmarks" / "programs" / "mixed.lua"  # runs until killed


def observer_target() -> tuple[list[str], str]:
    """(argv, description) of a target that runs until killed."""
    out = ROOT / "build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    if (LUA_DIR / "onelua.c").exists():
        lua = out / "lua"
        if not lua.exists():
            subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", str(LUA_DIR / "onelua.c"),
                            "-lm", "-ldl", "-o", str(lua)], check=True)
        return [str(lua), str(LUA_SCRIPT)], "Lua 5.5 (-O2 -g) running a mixed workload"
    print(f"({LUA_DIR} is absent: the target is the att_spin fixture instead of Lua)")
    spin = out / "att_spin"
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-o", str(spin),
                    str(ROOT / "tests/fixtures/att_spin.c")], check=True)
    return [str(spin), "100000"], "tests/fixtures/att_spin.c (two spinning threads)"


class Tmux:
    """One detached tmux session running `argv`; keys in, screen out."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.name = f"proftui-bench-{uuid.uuid4().hex[:8]}"
        shell = "unset COLUMNS LINES; exec " + " ".join(f"'{a}'" for a in argv)
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "160", "-y", "45",
                        "-c", str(cwd), "-e", "TERM=xterm-256color", shell], check=True)
        pane_pid = subprocess.run(["tmux", "display", "-p", "-t", self.name, "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout
        self.process = psutil.Process(int(pane_pid))  # `exec`: the pane's process is proftui

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True).stdout

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.screen():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: never saw {text!r} on screen:\n{self.screen()}")
            time.sleep(0.2)

    def key(self, *keys: str) -> None:
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
            time.sleep(0.4)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def cpu_share(process: psutil.Process, seconds: float) -> float:
    """`process`'s CPU use over the next `seconds`, in % of one CPU: its own threads and
    the tools it ran and reaped meanwhile (objdump), not the target (reaped at its end)."""

    def used() -> float:
        t = process.cpu_times()
        return t.user + t.system + t.children_user + t.children_system

    before, started = used(), time.monotonic()
    time.sleep(seconds)
    return 100 * (used() - before) / (time.monotonic() - started)


def observer(window: float) -> list[tuple[str, float, float]]:
    """(state, % of one CPU, goal) per state; see the module docstring."""
    work = Path(tempfile.mkdtemp(prefix="bench-observer-"))
    argv, what = observer_target()
    print(f"target: {what}; proftui -F 1000 in tmux 160x45; {window:.0f} s per state")
    rows: list[tuple[str, float, float]] = []
    anchor = Tmux(["sleep", "600"], work)
    try:
        rows.append(("anchor: idle `sleep` in tmux", cpu_share(anchor.process, window), 0.0))
    finally:
        anchor.close()
    term = Tmux([str(PROFTUI), "-F", "1000", *argv], work)
    try:
        term.wait_for("Self%")
        target = None
        while target is None:
            kids = term.process.children()
            target = kids[0] if kids else None
            time.sleep(0.1)
        time.sleep(3)  # symbols loaded, the first snapshots shown
        rows.append(("live, flat profile", cpu_share(term.process, window), LIVE_GOAL))
        term.key("2")
        rows.append(("live, call tree", cpu_share(term.process, window), LIVE_GOAL))
        term.key("4")
        rows.append(("live, process pane", cpu_share(term.process, window), LIVE_GOAL))
        term.key("1", "3")  # the source of the flat profile's top function
        term.wait_for("source:")
        term.key("d")
        term.wait_for("disassembly")
        time.sleep(1)
        rows.append(("live, disassembly shown", cpu_share(term.process, window), LIVE_GOAL))
        term.key("p")
        term.wait_for("PAUSED")
        time.sleep(1)
        rows.append(("paused (disassembly shown)", cpu_share(term.process, window), IDLE_GOAL))
        term.key("1")
        rows.append(("paused (flat profile)", cpu_share(term.process, window), IDLE_GOAL))
        term.key("p")
        time.sleep(1)
        target.send_signal(signal.SIGTERM)
        term.wait_for("SIGTERM")
        time.sleep(2)
        rows.append(("idle after the target ended", cpu_share(term.process, window), IDLE_GOAL))
        term.key("q")
    finally:
        term.close()
    saved = work / "saved.proftui"
    record = subprocess.Popen([str(PROFTUI), "record", "-o", str(saved), "-F", "1000", *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(5)
    for kid in psutil.Process(record.pid).children():
        kid.send_signal(signal.SIGTERM)
    record.wait(timeout=60)
    term = Tmux([str(PROFTUI), "open", str(saved)], work)
    try:
        term.wait_for("Self%")
        time.sleep(2)
        rows.append(("saved profile open, idle", cpu_share(term.process, window), IDLE_GOAL))
    finally:
        term.close()
    shutil.rmtree(work, ignore_errors=True)
    return rows


def with_base(repeat: int) -> None:
    """The big profile with and without a baseline, in one run (see the docstring)."""
    big = synthetic_profile(50_000, 200_000)
    base = perturbed(50_000, 200_000)
    plain, _ = asyncio.run(measure(big, repeat))
    plain.pop("_rss_shown_mib")
    plain.pop("_first_screen_s")
    started = time.perf_counter()
    diffed, done = asyncio.run(measure(big, repeat, base))
    seconds = time.perf_counter() - started
    diffed.pop("_rss_shown_mib")
    diffed.pop("_first_screen_s")
    print(f"\n--base: the big profile with a baseline (anchor: the same without one)\n"
          f"{'action':34} {'anchor p50':>10} {'anchor p95':>10} {'base p50':>9} "
          f"{'base p95':>9}  goal")
    worst = worst_flame = 0.0
    for name, values in diffed.items():
        anchor = plain.get(name)
        p50, p95 = statistics.median(values), pct(values, 0.95)
        worst = max(worst, p95)
        if name.startswith("flame"):
            worst_flame = max(worst_flame, p95)
        a50 = f"{statistics.median(anchor):8.1f}ms" if anchor else f"{'-':>10}"
        a95 = f"{pct(anchor, 0.95):8.1f}ms" if anchor else f"{'-':>10}"
        print(f"{name:34} {a50} {a95} {p50:7.1f}ms {p95:7.1f}ms  "
              f"{'ok' if p95 <= 100 else 'SLOW'}")
    print(f"\nwith a base: worst p95 {worst:.1f} ms, flame pane's worst p95 {worst_flame:.1f} ms"
          f" (goal <= 100 ms); session {seconds:.0f} s")
    for name, values in done.items():
        print(f"{name:34} {statistics.median(values):8.1f}ms {max(values):8.1f}ms (max)")


def latency(repeat: int) -> None:
    me = psutil.Process()
    rss0 = me.memory_info().rss
    small = synthetic_profile(60, 200)
    started = time.perf_counter()
    big = synthetic_profile(50_000, 200_000)
    built = time.perf_counter() - started
    rss_profile = me.memory_info().rss
    print(f"big profile: {len(big.frames):,} functions, {len(big.tree) - 1:,} tree nodes, "
          f"built in {built:.1f} s, {(rss_profile - rss0) / 2**20:.0f} MiB")
    started = time.perf_counter()
    anchor, anchor_done = asyncio.run(measure(small, repeat))
    started_big = time.perf_counter()
    results, done = asyncio.run(measure(big, repeat))
    big_seconds = time.perf_counter() - started_big
    rss_app = me.memory_info().rss
    total = time.perf_counter() - started
    shown = results.pop("_rss_shown_mib")[0]
    results.pop("_first_screen_s")
    anchor.pop("_rss_shown_mib")
    anchor.pop("_first_screen_s")
    print(f"process RSS: {shown:.0f} MiB with the big profile open in the app, "
          f"{rss_app / 2**20:.0f} MiB after the session (derived trees cached); "
          f"the profile itself {(rss_profile - rss0) / 2**20:.0f} MiB\n")
    print(f"{'action':34} {'small p50':>9} {'big p50':>9} {'big p95':>9} {'ratio':>6}  goal")
    worst = 0.0
    for name, values in results.items():
        small_p50 = statistics.median(anchor[name])
        p50, p95 = statistics.median(values), pct(values, 0.95)
        worst = max(worst, p95)
        print(f"{name:34} {small_p50:8.1f}ms {p50:8.1f}ms {p95:8.1f}ms "
              f"{p50 / small_p50 if small_p50 else 0:5.1f}x  {'ok' if p95 <= 100 else 'SLOW'}")
    print(f"\nworst key-to-screen p95 {worst:.1f} ms (goal <= 100 ms)")
    print("\nviews derived in a worker (input stays live meanwhile): key -> result on screen")
    for name, values in done.items():
        print(f"{name:34} {statistics.median(anchor_done[name]):8.1f}ms "
              f"{statistics.median(values):8.1f}ms {max(values):8.1f}ms (max)")
    print(f"\nmeasured in {total:.0f} s (big profile session {big_seconds:.0f} s)")



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40, help="presses per cursor action")
    parser.add_argument("--only", choices=("latency", "observer"), help="run one part")
    parser.add_argument("--window", type=float, default=10.0,
                        help="seconds of CPU measurement per observer state")
    parser.add_argument("--base", action="store_true",
                        help="only the big profile with and without a baseline (Δ views)")
    args = parser.parse_args()
    if args.base:
        with_base(args.repeat)
        return
    if args.only != "observer":
        latency(args.repeat)
    if args.only == "latency":
        return
    if shutil.which("tmux") is None or not PROFTUI.exists():
        print("\nobserver CPU: skipped (needs tmux and the installed proftui command)")
        return
    rows = observer(args.window)
    print(f"\n{'observer state':34} {'CPU':>7}  goal")
    for name, share, goal in rows:
        verdict = "" if not goal else f"<= {goal:.0f}%  " + ("ok" if share <= goal else "OVER")
        print(f"{name:34} {share:6.1f}%  {verdict}")


if __name__ == "__main__":
    main()
