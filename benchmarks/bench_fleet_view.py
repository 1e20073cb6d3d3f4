"""The fleet view at scale: 10 hosts x 10 minutes of per-process rows, read in the TUI.

What `proftui agent` pushes from a fleet: every host runs --procs programs, each its own
series (labels host, program, build, pid, user, mode=agent) with its own stacks.  The
stacks are those of a real run of Lua 5.5 (../shared/programs/lua, the fixture script
tests/fixtures/lua/cpu.lua); each program's binary frames carry its own module name,
so programs do not share stacks, and the odd hosts run a second build of each.  Every
process replays its program's stacks at --hz with its own random stream, through the
real push path (stack tables, intervals, batches, spool, inserts) into a private server.

Then `proftui open URL?from=-1h` runs in a real terminal (tmux, benchmarks/bench_keys.py's
driver): each key is timed from the press until the screen shows its result:

  first screen   the flat profile of the hour drawn
  6              the timeline: each part's series per minute
  range          Enter, arrows, Enter: a window of the timeline, re-queried, in every pane
  t              the picker
  g              each breakdown in turn (host, program, build, thread, process): the
                 answer regrouped (threads: a query of the window), the picker on its parts
  b, Enter       a part marked as the baseline, another shown with its Δ columns

Anchor, same run: the server's own time for the view's main aggregation (the same SQL
through clickhouse-driver), and `proftui report URL` end to end.  Goal: <= 2 s each.
The server runs on this machine: the keys are timed once its background merges of the
pushed rows are done (a fleet's server has CPUs of its own).

usage: python benchmarks/bench_fleet_view.py [--hosts 10] [--procs 6] [--minutes 10]
                                             [--hz 99] [--sessions 2]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from itertools import accumulate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_fleet import SimulatedHost, build_lua, real_stacks  # noqa: E402
from bench_keys import PROFTUI, Session, Timings, text_of  # noqa: E402
from proftui.collectors.fleet.pusher import Pusher  # noqa: E402
from proftui.collectors.fleet.query import load  # noqa: E402
from proftui.collectors.fleet.url import parse  # noqa: E402
from proftui.collectors.model.views import flat_profile  # noqa: E402

from tests.helpers.clickhouse import running_servers, server_binary  # noqa: E402

PROGRAMS = ("api-server", "worker", "cache", "indexer", "gateway", "scheduler", "ingest",
            "mailer")
GOAL_S = 2.0


class AgentProcess(SimulatedHost):
    """One process of a simulated host, as the agent pushes it."""

    mode = "agent"


def program_stacks(stacks: list, lua: Path, program: str) -> list:
    """The real run's stacks, its binary's frames renamed to `program`'s module."""
    module = str(lua)
    out = []
    for frames, site in stacks:
        frames = [replace(f, module=f"/usr/bin/{program}") if f.module == module else f
                  for f in frames]
        if site is not None and site[0] == module:
            site = (f"/usr/bin/{program}", *site[1:])
        out.append((frames, site))
    return out


def simulate(url: str, lua: Path, stacks: list, weights: list[float], period_ns: int,
             opts: argparse.Namespace, spool: Path) -> tuple[int, float]:
    """Push every host's processes; the samples pushed and when the first interval began."""
    per_interval = max(1, int(opts.hz * opts.every))
    intervals = int(opts.minutes * 60 / opts.every)
    start = time.time() - opts.minutes * 60 - 120
    samples = 0
    by_program = {p: program_stacks(stacks, lua, p) for p in PROGRAMS[:opts.procs]}
    for h in range(opts.hosts):
        for k, program in enumerate(PROGRAMS[:opts.procs]):
            process = AgentProcess(20_000 + 100 * h + k, by_program[program])
            rng = random.Random(h * 100 + k)
            cum = list(accumulate(w * rng.random() for w in weights))
            clock = [start]
            labels = {"host": f"sim{h:02d}", "program": program, "user": "app",
                      "build": f"{program}-build-{'b' if h % 2 else 'a'}"}
            pusher = Pusher(parse(url, query=False), labels, every_s=1e6, spool_root=spool,
                            clock=lambda c=clock: c[0])  # type: ignore[misc]
            pusher.connect()
            pusher.start(process, str(lua))  # type: ignore[arg-type]
            for i in range(intervals):
                counts = Counter(rng.choices(range(len(stacks)), cum_weights=cum,
                                             k=per_interval))
                for s, n in counts.items():
                    process.table.add(process.index[s], (n, n * period_ns))
                samples += per_interval
                clock[0] = start + (i + 1) * opts.every
                pusher.take()
                if not pusher.send_pending():
                    raise SystemExit(f"push failed: {pusher.stats.last_error}")
            pusher.finish()
        print(f"  host {h}: {opts.procs} processes pushed", flush=True)
    return samples, start


def iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def total_of(text: str) -> str:
    """The header's total ("3,564,000" of "· 3,564,000 samples")."""
    found = re.search(r"· ([0-9,]+) samples", text.splitlines()[0] if text else "")
    return found.group(1) if found else ""


def shown_total(text: str) -> str:
    """The timeline's total of the range shown, "" before it shows one."""
    found = re.search(r"shown: [^,]+, ([0-9,]+) ", text)
    return found.group(1) if found else ""


def view_keys(s: Session) -> None:
    """The fleet view's keys (module docstring), each timed to its screen."""
    s.press("6", "6: timeline (series per part)", lambda t: "Activity over" in t)
    s.press("End", None)
    for _ in range(6):
        s.press("Left", None)
    s.press("Enter", None, lambda t: "selecting" in t)
    for _ in range(3):
        s.press("S-Right", None)
    whole = total_of(text_of(s.term.screen()))
    # the status line's "shown: A-B s, N (Esc..." once the window's query answered
    s.press("Enter", "range: Enter (a query of the window)",
            lambda t, w=whole: shown_total(t) not in ("", w))
    s.press("Escape", "range: Esc (the whole hour again)",
            lambda t, w=whole: "shown:" not in t and total_of(t) == w)
    s.press("1", None, lambda t: "functions · sorted by" in t)
    s.press("t", "t: picker", lambda t: "Show one part" in t)
    for name in ("host", "program", "build", "thread", "process (host, program, pid)"):
        how = "a query of threads" if name == "thread" else "regrouped"
        s.press("g", f"g: by {name.split()[0]} ({how})",
                lambda t, n=name: f"by {n} (share" in t and "All parts" in t)
    s.press("Down", None)
    s.press("b", "b: part as the baseline", lambda t: "Δ vs part" in t)
    s.press("t", None, lambda t: "Show one part" in t)
    s.press("Down", None)
    s.press("Down", None)
    s.press("Enter", "Enter: another part, with Δ", lambda t: "ΔSelf" in t and "Δ vs" in t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--procs", type=int, default=6, help=f"at most {len(PROGRAMS)}")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--hz", type=int, default=99, help="samples a second per process")
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=10.0, help="the real Lua run")
    parser.add_argument("--sessions", type=int, default=2)
    opts = parser.parse_args()
    if server_binary() is None:
        raise SystemExit("clickhouse-server is not installed (apt-get install clickhouse-server)")
    from clickhouse_driver import Client

    with tempfile.TemporaryDirectory(prefix="bench-fleet-view-") as tmp, \
            running_servers(1) as (srv,):
        work = Path(tmp)
        lua = build_lua(work)
        stacks, weights, period_ns = real_stacks(lua, opts.seconds, 1000)
        url = srv.url("fleet")
        print(f"fleet: {opts.hosts} hosts x {opts.procs} processes x {opts.minutes:g} min at "
              f"{opts.hz} Hz, {len(stacks):,} stacks per program (a real Lua run)", flush=True)
        began = time.perf_counter()
        samples, start = simulate(url, lua, stacks, weights, period_ns, opts, work / "spool")
        print(f"pushed {samples:,} samples in {time.perf_counter() - began:.0f} s", flush=True)
        client = Client("127.0.0.1", port=srv.tcp)
        rows = client.execute("SELECT count() FROM fleet.proftui_samples WHERE batch = 0")[0][0]
        print(f"server rows (per minute, series, thread, stack): {rows:,}")
        # The server's own merges after the inserts use this machine's CPUs (a fleet's
        # server has its own): the view is timed once they are done, at most 120 s on.
        settled = time.perf_counter()
        while client.execute("SELECT count() FROM system.merges")[0][0] and \
                time.perf_counter() - settled < 120:
            time.sleep(1)
        time.sleep(2)
        merging = client.execute("SELECT count() FROM system.merges")[0][0]
        print(f"server merges settled after {time.perf_counter() - settled:.0f} s "
              f"({merging} still running)")

        # The hour that ends with the pushes (a fixed window: every session sees the same)
        end = start + opts.minutes * 60 + 30
        hour = url + f"?from={iso(end - 3600)}&to={iso(end)}"
        server_s = []
        for _ in range(3):
            t0 = time.perf_counter()
            answer = client.execute(
                "SELECT profile, stack, series, sum(call_count), sum(samples), sum(cpu_ns) "
                "FROM fleet.proftui_samples WHERE time >= toDateTime(%(a)s) AND "
                "time < toDateTime(%(b)s) AND batch = 0 GROUP BY profile, stack, series",
                {"a": int(end - 3600), "b": int(end)})
            server_s.append(time.perf_counter() - t0)
        anchor = statistics.median(server_s)
        print(f"anchor   the server's aggregation alone: {anchor:.2f} s ({len(answer):,} rows "
              "of stack and series)")
        t0 = time.perf_counter()
        profile = load(hour)
        flat = flat_profile(profile)
        flat_s = time.perf_counter() - t0
        print(f"query    flat profile of the hour in process: {flat_s:.2f} s ({len(flat):,} "
              f"functions, {len(profile.parts)} parts, {profile.total(0):,.0f} samples = "
              f"{'all' if profile.total(0) == samples else 'NOT all'})   "
              f"{flat_s / anchor:.1f}x the server")
        t0 = time.perf_counter()
        subprocess.run([PROFTUI, "report", "-n", "20", hour], check=True, capture_output=True)
        report_s = time.perf_counter() - t0
        print(f"query    `proftui report URL` end to end: {report_s:.2f} s")

        timings = Timings()
        for n in range(opts.sessions):
            session = Session(hour, work, timings)  # type: ignore[arg-type]
            try:
                view_keys(session)
            finally:
                session.close()
            print(f"  session {n + 1}/{opts.sessions} done", flush=True)
        print(f"\n{'key':44} {'n':>3} {'median s':>9} {'max s':>7} {'x server':>9}  goal  "
              "each, in order")
        worst = 0.0
        for name, values in timings.done.items():
            top = max(values) / 1000
            worst = max(worst, top)
            each = " ".join(f"{v / 1000:.2f}" for v in values)
            print(f"{name:44} {len(values):3d} {statistics.median(values) / 1000:9.2f} "
                  f"{top:7.2f} {top / anchor:9.1f}  {'ok' if top <= GOAL_S else 'SLOW':4}  "
                  f"{each}")
        print(f"worst key: {worst:.2f} s; flat profile of the hour {flat_s:.2f} s "
              f"(goal <= {GOAL_S:.0f} s each)")


if __name__ == "__main__":
    main()
