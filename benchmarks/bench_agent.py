"""`proftui agent` against `perf record -a -g` at the same rate, on the same host and load.

The load: two Lua interpreters (../shared/programs/lua, built here) running
benchmarks/programs/mixed.lua for a fixed number of rounds, and, with --churn, a shell
starting a short process 20 times a second (a host where programs start, exec and
exit all the time), and, with --server, a clickhouse-server answering one query after
another meanwhile (a host's big C++ server: its stripped 82 MB library symbolized).
Each configuration samples the whole host while that load runs:

  none    nothing sampling (the anchor of the load's own CPU time)
  perf    perf record -a -g -F HZ -o FILE (frame-pointer call chains, written to a file)
  dwarf   perf record -a --call-graph dwarf -F HZ -o FILE (8 KiB of user stack per sample,
          as the agent copies; unwound only later, by perf report)
  agent   proftui agent -F HZ -o FILE (per-CPU events with user stack copies, unwound
          with CFI per process, symbolized into one profile, saved at the end)
  push    proftui agent -F HZ --push URL (what a host runs: a table per process, pushed
          every 10 s to a clickhouse-server started here; the server's CPU is not counted)

Configurations are interleaved over the rounds.  Printed per rate: the sampler's CPU
(its whole process tree, start-up and the end included: what the user pays, its
modules byte-compiled as an install leaves them) and the
load's CPU time (sampling costs the sampled processes the kernel's work per sample),
medians over the rounds, with the ratios agent / perf and agent / dwarf.  Goal (issue 36):
agent CPU <= perf's (-g).  perf record only copies what the kernel wrote to a file; the
agent also unwinds, symbolizes and aggregates (and, here, saves a profile with -o, where
a real agent would push instead).

usage: python benchmarks/bench_agent.py [--rounds N] [--rates 99,999] [--churn] [--server]
                                      [--kinds none,perf,dwarf,agent,push]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_fleet import build_lua  # the same Lua build (benchmarks/ is on sys.path)

from tests.helpers.clickhouse import Server, running_servers, server_binary

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "programs" / "mixed.lua"
# Runs the sampler and reports its tree's CPU; a SIGINT to the group is the sampler's to
# act on (a handler, not SIG_IGN, which the sampler would inherit).
WRAP = ("import resource, signal, subprocess, sys; "
        "signal.signal(signal.SIGINT, lambda *_: None); rc = subprocess.call(sys.argv[1:]); "
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print('TREE_CPU', ru.ru_utime + ru.ru_stime, ru.ru_maxrss, file=sys.stderr); "
        "sys.exit(rc)")


def run_load(lua: Path, rounds: int, churn: bool, server: Server | None = None) -> float:
    """The load to its end: the CPU seconds of its processes (not the server's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs = [subprocess.Popen([str(lua), str(SCRIPT), str(rounds)]) for _ in range(2)]
    churner = None
    if churn:
        churner = subprocess.Popen(["sh", "-c", "while :; do /bin/true; sleep 0.05; done"],
                                   start_new_session=True)
    asking = Asking(server) if server is not None else None
    for p in procs:
        p.wait()
    if asking is not None:
        asking.stop()
    if churner is not None:
        os.killpg(churner.pid, signal.SIGTERM)
        churner.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


class Asking:
    """Queries to a server, one after another, from start until `stop()`; a failed one
    ends the benchmark (the load would silently lack its server)."""

    answered = 0  # by every Asking of the run: said with the results

    def __init__(self, server: Server) -> None:
        self._server = server
        self._done = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._ask)
        self._thread.start()

    def _ask(self) -> None:
        from clickhouse_driver import Client

        client = Client(host="127.0.0.1", port=self._server.tcp, connect_timeout=10,
                        send_receive_timeout=60)
        try:
            while not self._done.is_set():
                client.execute("SELECT sum(cityHash64(number)) FROM numbers(5000000)")
                Asking.answered += 1
        except Exception as exc:  # said by stop()
            self._error = exc
        finally:
            client.disconnect()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        if self._error is not None:
            raise SystemExit(f"the server's queries failed: {self._error}")


def sampler_argv(kind: str, hz: int, out: Path, url: str = "") -> list[str]:
    if kind == "perf":
        return ["perf", "record", "-q", "-a", "-g", "-F", str(hz), "-o", str(out)]
    if kind == "dwarf":
        return ["perf", "record", "-q", "-a", "--call-graph", "dwarf", "-F", str(hz), "-o",
                str(out)]
    agent = [sys.executable, "-m", "proftui.tui.cli", "agent", "-F", str(hz)]
    return [*agent, "--push", url] if kind == "push" else [*agent, "-o", str(out)]


def one(kind: str, hz: int, lua: Path, rounds: int, churn: bool, work: Path, url: str = "",
        server: Server | None = None) -> tuple[float, float, float]:
    """(sampler tree CPU s, load CPU s, sampler peak RSS MiB) of one run."""
    if kind == "none":
        return 0.0, run_load(lua, rounds, churn, server), 0.0
    out = work / f"{kind}.out"
    sampler = subprocess.Popen([sys.executable, "-c", WRAP, *sampler_argv(kind, hz, out, url)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    time.sleep(1.0)  # started and sampling
    load_cpu = run_load(lua, rounds, churn, server)
    os.killpg(sampler.pid, signal.SIGINT)
    _out, err = sampler.communicate(timeout=120)
    if "TREE_CPU" not in err:
        raise SystemExit(f"{kind} failed: {err[-2000:]}")
    cpu, rss = err.rsplit("TREE_CPU", 1)[1].split()[:2]
    out.unlink(missing_ok=True)
    return float(cpu), load_cpu, int(rss) / 1024


def compile_proftui() -> None:
    """Byte-compile proftui's modules first, as an installed copy is (pip writes them), so
    the agent's start-up is an installed one's whatever PYTHONDONTWRITEBYTECODE says here
    (compiling its modules from source took ~30 ms of every start)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / d) for d in (
        "collectors", "tui"))], check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rates", default="99,999")
    parser.add_argument("--lua-rounds", type=int, default=120, help="mixed.lua rounds per run")
    parser.add_argument("--churn", action="store_true")
    parser.add_argument("--server", action="store_true",
                        help="a clickhouse-server answering queries beside the load")
    parser.add_argument("--kinds", default="none,perf,dwarf,agent")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed: no anchor")
        return 1
    kinds = tuple(args.kinds.split(","))
    compile_proftui()
    if ("push" in kinds or args.server) and server_binary() is None:
        print("clickhouse-server is not installed: no push or --server runs (apt-get "
              "install clickhouse-server)")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as name, contextlib.ExitStack() as up:
        work = Path(name)
        server = up.enter_context(running_servers(1))[0] \
            if "push" in kinds or args.server else None
        url = server.url("bench_agent") if server is not None else ""
        asked = server if args.server else None
        lua = build_lua(work)
        rates = [int(r) for r in args.rates.split(",")]
        results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for _ in range(args.rounds):
            for hz in rates:
                for kind in kinds:
                    results.setdefault((kind, hz), []).append(
                        one(kind, hz, lua, args.lua_rounds, args.churn, work, url, asked))
        load1 = os.getloadavg()[0]
        print(f"load: 2 x lua mixed.lua {args.lua_rounds} rounds"
              f"{' + a process started every 50 ms' if args.churn else ''}"
              f"{f' + a clickhouse-server ({Asking.answered} queries)' if args.server else ''}; "
              f"{os.cpu_count()} CPUs; {args.rounds} rounds; load average {load1:.2f}")
        print(f"{'rate':>6} {'sampler':>8} {'its CPU s':>10} {'peak MiB':>9} "
              f"{'load CPU s':>11} {'load +%':>8}")
        for hz in rates:
            unsampled = results.get(("none", hz))  # without it the load has no anchor
            base = statistics.median(r[1] for r in unsampled) if unsampled else None
            cpu = {}
            for kind in kinds:
                rows = results[(kind, hz)]
                cpu[kind] = statistics.median(r[0] for r in rows)
                load = statistics.median(r[1] for r in rows)
                rss = max(r[2] for r in rows)
                grew = f"{100 * (load / base - 1):>+8.1f}" if base else f"{'-':>8}"
                print(f"{hz:>6} {kind:>8} {cpu[kind]:>10.3f} {rss:>9.1f} {load:>11.2f} {grew}")
            for mine in ("agent", "push"):
                if mine in cpu and "perf" in cpu:
                    print(f"{hz:>6} {mine} / perf -g CPU: {cpu[mine] / cpu['perf']:.2f}x "
                          f"(goal <= 1.00x)")
            if "agent" in cpu and "dwarf" in cpu:
                print(f"{hz:>6} agent / perf --call-graph dwarf CPU: "
                      f"{cpu['agent'] / cpu['dwarf']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
