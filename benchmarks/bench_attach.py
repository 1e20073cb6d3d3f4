"""Target slowdown while proftui is attached (`proftui --pid`), per method and rate.

The target (tests/fixtures/att_bench.c) waits until the profiler is attached,
then times a fixed amount of CPU work itself.  Anchor: the same work with
nothing attached, measured in the same run; `perf record -g -p` at the same
rates is shown where perf is installed and allowed.  Configurations are
interleaved over the rounds so machine drift hits them all alike.  Other load
on the machine only ever adds time, so the table compares the best round of
each configuration (wall time, and the target's own CPU time, which includes
kernel work done on its behalf such as ptrace stops and sample collection).
Goal: <= 3% slowdown at 100 Hz.

Then the front end's cost per sample: the helper's stream, recorded from a
1000 Hz attach to a target built without frame pointers, is fed through
AttachCollector's reader path (decode, aggregate, symbolize new addresses)
twice; the second pass (symbols cached, the steady state) is the figure,
shown also as a share of one core at 1000 samples/s.  Goal: <= 10 us.

Last, dropped samples per rate (issue 15): perf-method attaches to the two-thread
spinning fixture (tests/fixtures/att_spin.c) for --drop-seconds each, while the
collector takes snapshots three times a second as the TUI does; samples kept and
lost (in the kernel's perf rings, or because the helper's stack table was full)
per rate, with the default rings and with --buffer 0.5 (the former default:
256 KiB per CPU on 2 CPUs).  Goal: dropped <= 1% of sampled at 1 kHz on an idle
machine.  The load average is printed: on a busy machine the helper runs late
and the smaller rings overflow first.

Accuracy (issue 26): on tests/fixtures/att_server.c (an epoll server and its client on
loopback) each method against `perf record -p` (its samples of the attach's own window
only): the largest difference of any function's self share, in points (goal <= 5), with
the server's one connection and 1 KiB replies (it sleeps in epoll_wait between requests)
and with 2 connections and 4 KiB replies, and on tests/fixtures/att_kv.c (a key-value
store whose CPU time is mostly in epoll_wait, read and write) with 4 connections; then
the share of samples under main on tests/fixtures/att_deep.c (26 KiB of stack below
main, no frame pointers; goal >= 99%).
The ptrace method is measured twice: on the target's own CPU timer (its default) and
polling (PROFTUI_ATTACH_POLL=1, what it falls back to).  The last row is that CPU timer
itself, without proftui: ITIMER_PROF sampling inside the server (benchmarks/
itimer_preload.c, gperftools' clock) against perf over the same run.
Each figure is the median of --accuracy-rounds runs, with the range.

usage: python benchmarks/bench_attach.py [--rounds N] [--seconds S] [--drop-seconds S]
                                         [--accuracy-rounds N]
                                         [--only slowdown|drops|accuracy]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.attach.collector import AttachCollector  # noqa: E402
from proftui.collectors.base import CollectorOptions  # noqa: E402
from proftui.collectors.errors import ProftuiError  # noqa: E402
from proftui.collectors.runtime.libraries import runtime_executable_path  # noqa: E402

from tests.helpers import reference  # noqa: E402

FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]
Attacher = Callable[[int], Callable[[], None]]  # attach to pid; returns "detach"


def build_target() -> Path:
    out = ROOT / "build" / "bench" / "att_bench"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", *FLAGS, "-o", str(out), str(ROOT / "tests/fixtures/att_bench.c")],
                   check=True)
    return out


def run_once(binary: Path, iterations: int, attacher: Attacher | None) -> tuple[float, float]:
    """(wall, CPU) seconds of the target's work, with `attacher` attached meanwhile."""
    proc = subprocess.Popen([str(binary), str(iterations)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.readline()
    detach = attacher(proc.pid) if attacher else (lambda: None)
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        wall, cpu = (float(x) for x in proc.stdout.readline().split())
    finally:
        detach()
        proc.stdin.close()
        proc.wait()
    return wall, cpu


def proftui_attacher(method: str, hz: int) -> Attacher:
    def attach(pid: int) -> Callable[[], None]:
        collector = AttachCollector([], CollectorOptions(pid=pid, method=method,
                                                         frequency_hz=hz))
        collector.start()
        time.sleep(0.05)  # let the helper settle into its loop

        def detach() -> None:
            collector.stop()
            collector.snapshot()  # symbolizing happens off the target's CPU time anyway

        return detach

    return attach


def perf_attacher(hz: int, out_dir: Path) -> Attacher:
    def attach(pid: int) -> Callable[[], None]:
        perf = subprocess.Popen(["perf", "record", "-q", "-F", str(hz), "-g", "-p", str(pid),
                                 "-o", str(out_dir / "perf.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)  # perf record has no "attached" signal: give it time

        def detach() -> None:
            perf.send_signal(signal.SIGINT)
            perf.wait()

        return detach

    return attach


def record_stream(binary: Path, method: str, seconds: float = 1.0) -> tuple[bytes, int]:
    """(the helper's raw stream, target pid) of a `seconds` attach at 1000 Hz; the
    target is left running (the caller kills it)."""
    proc = subprocess.Popen([str(binary), "30"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    helper = subprocess.Popen([runtime_executable_path("proftui-attach"), str(proc.pid), "1000",
                               method], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    chunks: list[bytes] = []
    assert helper.stdout is not None and helper.stdin is not None
    reader = threading.Thread(target=lambda: chunks.append(helper.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    time.sleep(seconds)
    helper.stdin.write(b"q")
    helper.stdin.close()
    reader.join()
    helper.wait()
    return b"".join(chunks), proc.pid


def front_end_cost(method: str) -> tuple[float, float, int] | None:
    """(cold, warm) microseconds of front-end CPU per sample and the sample count."""
    src = ROOT / "tests/fixtures/att_spin.c"
    binary = ROOT / "build" / "bench" / "att_spin_nofp"
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o", str(binary),
                    str(src)], check=True)
    data, pid = record_stream(binary, method)
    try:
        collector = AttachCollector([], CollectorOptions(pid=pid))
        collector._open_symbols()  # what start() does before the helper runs
        per_pass = []
        for _ in range(2):
            collector._decoder = type(collector._decoder)()
            collector._stacks = {}
            t0 = time.process_time()
            for at in range(0, len(data), 65536):  # pipe-sized reads, as _read_loop gets them
                collector._consume(data[at:at + 65536])
            per_pass.append(time.process_time() - t0)
        samples = int(sum(c[0] for c in collector._stacks.values()))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not samples:
        return None
    return 1e6 * per_pass[0] / samples, 1e6 * per_pass[1] / samples, samples


def drops(hz: int, buffer_mib: float | None, seconds: float) -> tuple[int, int, int]:
    """(samples kept, lost in the perf rings, lost in the helper's table) of one perf attach to
    att_spin at `hz`, snapshotting ~3 times a second meanwhile."""
    binary = ROOT / "build" / "bench" / "att_spin"
    if not binary.exists():
        subprocess.run(["gcc", *FLAGS, "-pthread", "-o", str(binary),
                        str(ROOT / "tests/fixtures/att_spin.c")], check=True)
    proc = subprocess.Popen([str(binary), str(seconds + 30)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    try:
        collector = AttachCollector([], CollectorOptions(
            pid=proc.pid, method="perf", frequency_hz=hz,
            buffer_bytes=int(buffer_mib * 2**20) if buffer_mib else None))
        collector.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            collector.snapshot()  # the TUI's poll loop competes with the reader thread
            time.sleep(0.33)
        collector.stop()
        collector.snapshot()
        kept = int(sum(c[0] for c in collector._stacks.values()))
        return kept, collector._lost - collector._lost_table, collector._lost_table
    finally:
        proc.kill()
        proc.wait()


def usable(method: str, binary: Path) -> str | None:
    """None if `method` can attach here, else the reason."""
    try:
        run_once(binary, 10, proftui_attacher(method, 100))
    except ProftuiError as exc:
        return str(exc)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.5, help="target work per run")
    parser.add_argument("--drop-seconds", type=float, default=5.0,
                        help="attach time per rate in the drop measurement")
    parser.add_argument("--accuracy-rounds", type=int, default=3)
    parser.add_argument("--only", choices=("slowdown", "drops", "accuracy"),
                        help="run one part")
    args = parser.parse_args()
    if args.only in (None, "accuracy"):
        accuracy(args.accuracy_rounds)
    if args.only == "accuracy":
        return 0
    if args.only != "drops":
        slowdown(args)
    if args.only == "slowdown":
        return 0
    reason = usable("perf", build_target())
    if reason:
        print(f"\ndropped samples: skipped (perf attach: {reason})")
        return 0
    print(f"\ndropped samples, perf method, att_spin (2 spinning threads), "
          f"{args.drop_seconds:.0f} s each, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'rate, rings':34} {'samples':>8} {'ring lost':>10} {'table lost':>12} "
          f"{'dropped':>8}  goal")
    for hz in (100, 1000, 4000):
        for buffer_mib, label in ((None, "default rings"), (0.5, "--buffer 0.5")):
            kept, ring, table = drops(hz, buffer_mib, args.drop_seconds)
            share = 100 * (ring + table) / max(1, kept)
            goal = ("<= 1%  " + ("ok" if share <= 1 else "OVER")) if hz == 1000 else ""
            print(f"{f'-F {hz}, {label}':34} {kept:8} {ring:10} {table:12} {share:7.2f}%  {goal}")
    return 0


def _alias(name: str) -> str:
    """glibc's names of one function (perf: __GI___libc_write, proftui: write) as one."""
    import re

    name = reference.normal_name(name).replace("__GI_", "")
    return re.sub(r"^__+", "", re.sub(r"^__libc_", "", name))


def _folded(shares: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, share in shares.items():
        out[_alias(name)] = out.get(_alias(name), 0.0) + share
    return out


def server_points(method: str, conns: int, reply_kib: int, seconds: float = 2.0,
                  fixture: str = "att_server") -> float:
    """Largest self-share difference (points) between proftui `method` and perf -p, over
    the attach's own window (perf's samples before and after it are left out: the
    server runs differently when nothing stops it).  `fixture`: att_server (CONNS
    connections, REPLY_KIB replies) or att_kv (CONNS connections)."""
    src = ROOT / f"tests/fixtures/{fixture}.c"
    binary = ROOT / "build" / "bench" / fixture
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-g", "-o", str(binary), str(src)], check=True)
    shape = [str(conns), str(reply_kib)] if fixture == "att_server" else [str(conns)]
    proc = subprocess.Popen([str(binary), str(seconds + 4), *shape],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    tmp = Path(tempfile.mkdtemp(prefix="bench-attach-acc-"))
    try:
        perf = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_REALTIME", "-e",
                                 "task-clock", "-F", "1000", "-g", "-p", str(proc.pid),
                                 "-o", str(tmp / "perf.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        collector = AttachCollector([], CollectorOptions(pid=proc.pid, method=method,
                                                         frequency_hz=1000, duration_s=seconds))
        collector.start()
        profile = collector.wait()
        collector.stop()
        perf.send_signal(signal.SIGINT)
        perf.wait()
        window = (profile.meta.start_time or 0.0, profile.meta.end_time or time.time())
        theirs = _folded(reference.perf_user_shares(tmp / "perf.data", binary.name[:15],
                                                    window))
        mine = _folded(reference.proftui_symbol_shares(profile))
        return max(abs(mine.get(n, 0.0) - theirs.get(n, 0.0)) for n in {*mine, *theirs})
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _itimer_name(line: str, symbols: dict[str, list[tuple[int, str]]]) -> str:
    """The function of one itimer_preload.c line: dladdr's name, else the object's."""
    pc, base, name, path = line.split(" ", 3)
    if name != "?":
        return name
    if path not in symbols:
        nm = subprocess.run(["nm", "-n", path], capture_output=True, text=True).stdout
        symbols[path] = [(int(f[0], 16), f[2]) for f in map(str.split, nm.splitlines())
                         if len(f) == 3 and f[1] in "tTwW"]
    offset = int(pc, 16) - int(base, 16)
    below = [sym for start, sym in symbols[path] if start <= offset]
    return below[-1] if below else "?"


def itimer_points(conns: int, reply_kib: int, seconds: float = 2.0) -> float:
    """Largest self-share difference (points) between ITIMER_PROF sampling inside the
    server (no proftui) and perf -p over the same run."""
    src = ROOT / "tests/fixtures/att_server.c"
    binary = ROOT / "build" / "bench" / "att_server"
    shim = ROOT / "build" / "bench" / "itimer_preload.so"
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-g", "-o", str(binary), str(src)], check=True)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(shim),
                    str(ROOT / "benchmarks/itimer_preload.c")], check=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench-attach-itimer-"))
    env = {**os.environ, "LD_PRELOAD": str(shim), "ITIMER_OUT": str(tmp / "pcs")}
    proc = subprocess.Popen([str(binary), str(seconds + 0.3), str(conns), str(reply_kib)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    proc.stdout.readline()
    try:
        perf = subprocess.run(["perf", "record", "-q", "-e", "task-clock", "-F", "1000", "-g",
                               "-p", str(proc.pid), "-o", str(tmp / "perf.data")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert perf.returncode in (0, -signal.SIGINT, 130)
        proc.wait()
        symbols: dict[str, list[tuple[int, str]]] = {}
        counts: dict[str, int] = {}
        for line in (tmp / "pcs").read_text().splitlines():
            name = _itimer_name(line, symbols)
            counts[name] = counts.get(name, 0) + 1
        total = sum(counts.values())
        mine = _folded({name: 100.0 * n / total for name, n in counts.items()})
        theirs = _folded(reference.perf_user_shares(tmp / "perf.data", binary.name[:15]))
        return max(abs(mine.get(n, 0.0) - theirs.get(n, 0.0)) for n in {*mine, *theirs})
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def deep_under_main(method: str, seconds: float = 2.0) -> float:
    """Percent of samples whose stack reaches main, on att_deep (no frame pointers)."""
    src = ROOT / "tests/fixtures/att_deep.c"
    binary = ROOT / "build" / "bench" / "att_deep"
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-o", str(binary), str(src)],
                   check=True)
    proc = subprocess.Popen([str(binary), str(seconds + 4)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    try:
        collector = AttachCollector([], CollectorOptions(pid=proc.pid, method=method,
                                                         frequency_hz=1000, duration_s=seconds))
        collector.start()
        profile = collector.wait()
        collector.stop()
    finally:
        proc.kill()
        proc.wait()
    total = profile.tree.root.total_cost[0]
    under = sum(node.total_cost[0] for node in profile.tree.nodes()
                if profile.frames[node.frame_id].function == "main"
                and node.parent is not None
                and profile.frames[node.parent.frame_id].function != "main")
    return 100.0 * under / total if total else 0.0


def accuracy(rounds: int) -> None:
    """The accuracy table (see the module docstring)."""
    if not reference.perf_allowed(Path(tempfile.gettempdir())):
        print("accuracy: skipped (perf record cannot sample here: no reference)")
        return
    print(f"accuracy against perf record -p, same window, median of {rounds} "
          f"(range), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'method':11} {'server 1x1 KiB pts':>20} {'server 2x4 KiB pts':>20} "
          f"{'kv, 4 conns pts':>20} {'deep: % under main':>20}")
    for label, method, poll in (("perf", "perf", ""), ("ptrace", "ptrace", ""),
                                ("ptrace-poll", "ptrace", "1")):
        os.environ["PROFTUI_ATTACH_POLL"] = poll  # read by the helper (pt_attach_ptrace.c)
        cells = []
        for run in (lambda m=method: server_points(m, 1, 1),
                    lambda m=method: server_points(m, 2, 4),
                    lambda m=method: server_points(m, 4, 0, fixture="att_kv"),
                    lambda m=method: deep_under_main(m)):
            values = sorted(run() for _ in range(rounds))
            cells.append(f"{statistics.median(values):5.1f} ({values[0]:.1f}-{values[-1]:.1f})")
        print(f"{label:11} {cells[0]:>20} {cells[1]:>20} {cells[2]:>20} {cells[3]:>20}")
    os.environ.pop("PROFTUI_ATTACH_POLL", None)
    cells = []
    for run in (lambda: itimer_points(1, 1), lambda: itimer_points(2, 4)):
        values = sorted(run() for _ in range(rounds))
        cells.append(f"{statistics.median(values):5.1f} ({values[0]:.1f}-{values[-1]:.1f})")
    print(f"{'ITIMER_PROF':11} {cells[0]:>20} {cells[1]:>20} {'':>20} {'':>20}  "
          "(in-process, no proftui)")
    print("goals: <= 5 points from perf; >= 99% under main")
    print()


def slowdown(args: argparse.Namespace) -> None:
    """The target's slowdown table and the front end's cost per sample."""
    binary = build_target()
    # Calibrate the work to about --seconds with nothing attached.
    per_iter = run_once(binary, 200, None)[0] / 200
    iterations = max(100, int(args.seconds / per_iter))
    tmp = Path(tempfile.mkdtemp(prefix="bench-attach-"))
    configs: dict[str, Attacher | None] = {"no profiler (anchor)": None}
    skipped: list[str] = []
    for method in ("perf", "ptrace"):
        reason = usable(method, binary)
        if reason:
            skipped.append(f"proftui {method}: {reason}")
            continue
        for hz in (100, 1000):
            configs[f"proftui --method {method} -F {hz}"] = proftui_attacher(method, hz)
    if shutil.which("perf"):
        for hz in (100, 1000):
            configs[f"perf record -g -p (-F {hz})"] = perf_attacher(hz, tmp)
    else:
        skipped.append("perf record: perf is not installed")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, attacher in configs.items():
            times[name].append(run_once(binary, iterations, attacher))
    shutil.rmtree(tmp, ignore_errors=True)
    base = times["no profiler (anchor)"]
    wall0, cpu0 = min(w for w, _ in base), min(c for _, c in base)
    spread = 100 * (statistics.median(w for w, _ in base) / wall0 - 1)
    print(f"target work: {iterations} iterations, {wall0:.3f} s unprofiled; best of "
          f"{args.rounds} rounds (anchor's median is {spread:.1f}% above its best: noise)")
    print(f"{'configuration':34} {'wall s':>7} {'slowdown':>9} {'cpu s':>7} {'cpu +':>7}")
    for name, values in times.items():
        wall, cpu = min(w for w, _ in values), min(c for _, c in values)
        print(f"{name:34} {wall:7.3f} {100 * (wall / wall0 - 1):+8.1f}% {cpu:7.3f} "
              f"{100 * (cpu / cpu0 - 1):+6.1f}%")
    for line in skipped:
        print(f"skipped {line}")
    print(f"\n{'front end per sample':34} {'cold us':>8} {'warm us':>8} {'core at 1 kHz':>14}")
    for method in ("perf", "ptrace"):
        if any(line.startswith(f"proftui {method}:") for line in skipped):
            continue
        cost = front_end_cost(method)
        if cost is None:
            print(f"proftui --method {method}: no samples recorded")
            continue
        cold, warm, samples = cost
        print(f"{'proftui --method ' + method + f' ({samples} samples)':34} {cold:8.1f} "
              f"{warm:8.1f} {warm / 1000:13.1%}")


if __name__ == "__main__":
    sys.exit(main())
