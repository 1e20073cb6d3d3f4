"""Fleet profiles at scale: push cost, query time and disk, against a local record, same run.

The program is Lua 5.5 (../shared/programs/lua) running tests/fixtures/lua/cpu.lua, a
real interpreter with a real, skewed distribution of call paths.

  record   `proftui record -o` and `proftui record --push URL -o` of the same program for
           --seconds at --hz: the front end's CPU (the proftui process alone: its
           rusage, all threads, never the target's) per sample.
  fleet    --hosts simulated hosts x --minutes at --hz (default 10 x 10 min x 1 kHz: 6
           million samples).  Each host replays the stack table of a real run of the
           program (every distinct stack with its leaf site, drawn with its measured
           weight, a random stream per host) through the real push path: a stack
           table's interval changes, batches, the spool, native inserts into a
           private server.  The push's CPU per sample is held to the local record's.
  query    the flat profile of the hour (`fleet.query.load` + the flat view), and
           `proftui report URL` end to end: goal <= 2 s.
  disk     the server's bytes (active parts of the database as it holds them after
           the pushes, then after OPTIMIZE FINAL, what its background merges reach)
           per sample, against a local .proftui of one simulated host (that host's
           profile saved as `record` saves it: with the program's sources embedded,
           and without).

usage: python benchmarks/bench_fleet.py [--hosts 10] [--minutes 10] [--hz 1000]
                                        [--seconds 20] [--every 10]
"""

from __future__ import annotations

import argparse
import contextlib
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from itertools import accumulate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.fleet.pusher import Pusher  # noqa: E402
from proftui.collectors.fleet.query import load  # noqa: E402
from proftui.collectors.fleet.url import parse  # noqa: E402
from proftui.collectors.model import storage  # noqa: E402
from proftui.collectors.model.profile import CPU_NS, SAMPLES, ProfileMeta  # noqa: E402
from proftui.collectors.model.views import flat_profile  # noqa: E402
from proftui.collectors.stacktable.builder import StackProfile  # noqa: E402

from tests.helpers.clickhouse import running_servers, server_binary  # noqa: E402

LUA_DIR = ROOT.parent / "shared" / "programs" / "lua"
SCRIPT = ROOT / "tests" / "fixtures" / "lua" / "cpu.lua"
FRONT_END = ("import resource, sys; from proftui.tui.cli import main; rc = main(sys.argv[1:]); "
             "ru = resource.getrusage(resource.RUSAGE_SELF); "
             "print('FRONTEND_CPU', ru.ru_utime + ru.ru_stime, file=sys.stderr); sys.exit(rc)")


def build_lua(work: Path) -> Path:
    out = work / "lua"
    subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", "-o", str(out),
                    str(LUA_DIR / "onelua.c"), "-lm", "-ldl"], check=True)
    return out


def lua_args(lua: Path, seconds: float) -> list[str]:
    return [str(lua), str(SCRIPT), str(max(1, round(seconds * 12)))]  # ~12 units a second


def record(args: list[str], out: Path) -> tuple[float, float, str]:
    """`proftui record ARGS -o OUT`: (front-end CPU s, samples, stderr)."""
    result = subprocess.run([sys.executable, "-c", FRONT_END, "record", "-o", str(out), *args],
                            capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"record failed: {result.stderr[-2000:]}")
    cpu = float(result.stderr.rsplit("FRONTEND_CPU", 1)[1].split()[0])
    return cpu, storage.load(out).total(0), result.stderr


def real_stacks(lua: Path, seconds: float, hz: int) -> tuple[list, list[float], int]:
    """The stack table of a real run: (frames, site) per stack, its samples, period ns."""
    from proftui.tui.arguments import build_parser
    from proftui.tui.headless import run_headless
    from proftui.tui.modes import make_collector

    args = build_parser("record").parse_args(["-F", str(hz), *lua_args(lua, seconds)])
    collector = make_collector(args, output="log")  # the script's output is not shown
    profile = run_headless(collector)
    table = collector.stack_tables()[0]
    stacks, weights = [], []
    for index in range(len(table)):
        _part, path = table.stack_path(index)
        stacks.append(([table.frames[f] for f in path], table.stack_site(index)))
        weights.append(table.costs[0][index])
    return stacks, weights, profile.meta.period_ns or 1_000_000


class SimulatedHost:
    """What the pusher needs of a collector: a stack table, a lock, a mode and a pid."""

    mode = "sampler"

    def __init__(self, pid: int, stacks: list) -> None:
        self.pid = pid
        self.argv = ["lua"]
        self.lock = threading.RLock()
        self.table = StackProfile((SAMPLES, CPU_NS))
        self.index = [self.table.stack_of_frames(i, f"pid {pid} tid {pid}", frames, site)
                      for i, (frames, site) in enumerate(stacks)]

    def collect(self) -> object:
        """What a real collector's collect() costs each interval: a snapshot of the table
        (the drain itself a local record pays too)."""
        return self.table.snapshot(ProfileMeta(mode="sampler"))

    def stack_tables(self) -> list[StackProfile]:
        return [self.table]

    def series_parts(self) -> None:
        """One series for the whole run (the agent's collector has one per process)."""
        return None

    def tables_held(self) -> contextlib.nullcontext[None]:
        """Nothing adds to the table but `simulate`, on the pusher's own thread."""
        return contextlib.nullcontext()


def simulate(url: str, lua: Path, stacks: list, weights: list[float], period_ns: int,
             opts: argparse.Namespace, spool: Path) -> tuple[float, float, SimulatedHost]:
    """Push every host's intervals; (push CPU s, samples pushed, the last host)."""
    cum = list(accumulate(weights))
    per_interval = int(opts.hz * opts.every)
    intervals = int(opts.minutes * 60 / opts.every)
    start = time.time() - opts.minutes * 60 - 120
    push_cpu = samples = 0.0
    host: SimulatedHost | None = None
    for h in range(opts.hosts):
        host = SimulatedHost(10_000 + h, stacks)
        clock = [start]
        pusher = Pusher(parse(url, query=False), {"host": f"sim{h:02d}"}, every_s=1e6,
                        spool_root=spool, clock=lambda c=clock: c[0])  # type: ignore[misc]
        pusher.connect()
        pusher.start(host, str(lua))  # type: ignore[arg-type]
        rng = random.Random(h)
        for k in range(intervals):
            counts = Counter(rng.choices(range(len(stacks)), cum_weights=cum, k=per_interval))
            for i, n in counts.items():  # what the sampler's collector does in any record
                host.table.add(host.index[i], (n, n * period_ns))
            samples += per_interval
            clock[0] = start + (k + 1) * opts.every
            began = time.process_time()
            pusher.take()
            if not pusher.send_pending():
                raise SystemExit(f"push failed: {pusher.stats.last_error}")
            push_cpu += time.process_time() - began
        began = time.process_time()
        print(f"  host {h}: {pusher.finish()}", flush=True)
        push_cpu += time.process_time() - began
    assert host is not None
    return push_cpu, samples, host


def server_bytes(client: object, database: str) -> dict[str, int]:
    rows = client.execute(  # type: ignore[attr-defined]
        "SELECT table, sum(bytes_on_disk) FROM system.parts WHERE database = %(d)s AND active "
        "GROUP BY table", {"d": database})
    return {table: int(size) for table, size in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--hz", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="length of the real record runs")
    parser.add_argument("--every", type=float, default=10.0)
    opts = parser.parse_args()
    if server_binary() is None:
        raise SystemExit("clickhouse-server is not installed (apt-get install clickhouse-server)")
    if not (LUA_DIR / "onelua.c").is_file():
        raise SystemExit(f"Lua sources not found at {LUA_DIR}")
    from clickhouse_driver import Client

    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp, running_servers(1) as (srv,):
        work = Path(tmp)
        lua = build_lua(work)
        url = srv.url("bench")
        program = ["-F", str(opts.hz), *lua_args(lua, opts.seconds)]
        version = Client("127.0.0.1", port=srv.tcp).execute("SELECT version()")[0][0]
        print(f"program: lua {SCRIPT.name}, {opts.seconds:.0f} s runs at {opts.hz} Hz; server: "
              f"clickhouse-server {version}")

        local_cpu, local_samples, _ = record(program, work / "local.proftui")
        push_cpu_real, push_samples, _err = record(["--push", url, "--every", str(opts.every),
                                                   *program], work / "pushed.proftui")
        local_ps = local_cpu / local_samples
        push_ps = push_cpu_real / push_samples
        print(f"record   local:  front-end {local_cpu:6.2f} s CPU, {local_samples:,.0f} samples, "
              f"{local_ps * 1e6:6.1f} us/sample")
        print(f"record   --push: front-end {push_cpu_real:6.2f} s CPU, {push_samples:,.0f} "
              f"samples, {push_ps * 1e6:6.1f} us/sample   ratio {push_ps / local_ps:.2f} "
              f"(+{push_cpu_real - local_cpu:.2f} s: the client's import, the connection, "
              "each interval's snapshot, hashing each stack once, the inserts)")

        stacks, weights, period_ns = real_stacks(lua, opts.seconds, opts.hz)
        print(f"fleet    replaying {len(stacks):,} distinct stacks of a real run; "
              f"{opts.hosts} hosts x {opts.minutes:g} min x {opts.hz} Hz, one interval every "
              f"{opts.every:g} s")
        sim_url = srv.url("fleet")
        wall = time.perf_counter()
        push_cpu, samples, host = simulate(sim_url, lua, stacks, weights, period_ns, opts,
                                           work / "spool")
        wall = time.perf_counter() - wall
        sim_ps = push_cpu / samples
        print(f"fleet    pushed {samples:,.0f} samples in {wall:.1f} s wall; push CPU (each "
              f"interval's snapshot, rows, batches, spool, inserts) {push_cpu:.2f} s = "
              f"{sim_ps * 1e6:.2f} us/sample   ratio to the local record's front end "
              f"{sim_ps / local_ps:.3f} (goal <= 1)")

        began = time.perf_counter()
        profile = load(sim_url + "?from=-1h")
        flat = flat_profile(profile)
        query_s = time.perf_counter() - began
        exact = profile.total(0) == samples
        print(f"query    flat profile of the hour: {query_s:.2f} s ({len(flat)} functions, "
              f"{profile.total(0):,.0f} samples, {'all' if exact else 'NOT all'} of them) "
              "(goal <= 2 s)")
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "proftui.tui.cli", "report", "-n", "20",
                        sim_url + "?from=-1h"], check=True, capture_output=True)
        print(f"query    `proftui report URL` end to end: {time.perf_counter() - began:.2f} s")

        client = Client("127.0.0.1", port=srv.tcp)
        time.sleep(5)  # a moment for the background merges the server does anyway
        held = server_bytes(client, "fleet")
        for table in held:
            client.execute(f"OPTIMIZE TABLE fleet.{table} FINAL")
        merged = server_bytes(client, "fleet")
        meta = ProfileMeta(mode="sampler", argv=lua_args(lua, opts.seconds), pids=[host.pid])
        local_file = storage.save(host.table.snapshot(meta), work / "host.proftui")
        bare_file = storage.save(host.table.snapshot(meta), work / "bare.proftui",
                                 embed_sources=False)
        per_host = samples / opts.hosts
        local_b = local_file.stat().st_size / per_host
        bare_b = bare_file.stat().st_size / per_host
        for name, sizes in (("as pushed", held), ("merged", merged)):
            total = sum(sizes.values())
            parts = ", ".join(f"{t.removeprefix('proftui_')} {s / 1e6:.2f}"
                              for t, s in sorted(sizes.items()))
            print(f"disk     server {name}: {total / 1e6:.2f} MB ({parts}) = "
                  f"{total / samples:.3f} B/sample   ratio to local .proftui "
                  f"{total / samples / local_b:.2f} (with sources), "
                  f"{total / samples / bare_b:.2f} (without) (goal <= 1)")
        print(f"disk     local .proftui of one host: {local_file.stat().st_size / 1e6:.2f} MB "
              f"= {local_b:.3f} B/sample; without embedded sources "
              f"{bare_file.stat().st_size / 1e6:.2f} MB = {bare_b:.3f} B/sample")


if __name__ == "__main__":
    main()
