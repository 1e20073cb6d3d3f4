"""`proftui agent`: every process of the host sampled system-wide, each pushed to a private
ClickHouse as its own series; checked against what two known programs measured on
themselves in the same run, after both exited."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.fleet.query import load
from proftui.collectors.model.parts import parse_label, part_profile
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.storage import load as load_file
from proftui.collectors.model.views import flat_profile
from proftui.collectors.runtime.helper import STOP_TIMEOUT_S
from proftui.collectors.wording import count

from tests.conftest import LUA_SCRIPTS, build_fixture, build_lua
from tests.helpers.clickhouse import Server
from tests.helpers.costs import paths_to
from tests.helpers.fleet import CLI, proftui, servers_or_skip
from tests.helpers.reference import fixture_cpu_shares

ROOT = Path(__file__).resolve().parents[2]
SHELL_SPIN = 40_000  # iterations of the shell's loop before its exec: ~0.1 s of dash


def _can_sample_every_process() -> str | None:
    """Why this machine cannot run the agent, or None."""
    if os.geteuid() != 0:
        try:
            paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
        except OSError:
            return "perf_event is not available (no /proc/sys/kernel/perf_event_paranoid)"
        if paranoid > -1:
            return (f"sampling every process needs root or CAP_PERFMON (not root, and "
                    f"kernel.perf_event_paranoid is {paranoid})")
    return None


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    why = _can_sample_every_process()
    if why:
        pytest.skip(why)
    for servers in servers_or_skip(1):
        yield servers[0]


def _stop(agent: subprocess.Popen[str], signum: int) -> str:
    """Stop the agent as a user or a service manager does; its stderr, once it exited 0
    (killed instead when it does not end in time)."""
    agent.send_signal(signum)
    try:
        _out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, err
    return err


def _self_shares(profile: Profile, names: list[str]) -> dict[str, float]:
    """Each function's share of the self samples of `names`, in percent."""
    flat = {row.frame.function: row.self_cost[0] for row in flat_profile(profile)}
    total = sum(flat.get(n, 0.0) for n in names)
    assert total > 0, sorted(flat)
    return {n: 100.0 * flat.get(n, 0.0) / total for n in names}


def _thread_shares(report: Path) -> dict[str, float]:
    """thr_ratio's own CPU time per worker, as its function's share in percent."""
    spent = {}
    for line in report.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith("worker-"):
            spent[f"thr_spin_{parts[0].removeprefix('worker-')}"] = int(parts[2])
    total = sum(spent.values())
    return {name: 100.0 * ns / total for name, ns in spent.items()}


def test_agent_pushes_each_program_with_its_own_shares(server: Server, tmp_path: Path) -> None:
    work = build_fixture("smp_work.c", ["-O1", "-g"])
    threads = build_fixture("thr_ratio.c", ["-O2", "-g", "-pthread"])
    url = server.url("agent")
    run = secrets.token_hex(4)
    saved = tmp_path / "host.proftui"
    agent = subprocess.Popen(
        [*CLI, "agent", "--push", url, "--every", "1", "-F", "999", "--label", f"run={run}",
         "-o", str(saved)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)  # the helper's events are open well before this
        assert agent.poll() is None, agent.communicate()
        work_report, thread_report = tmp_path / "work.txt", tmp_path / "threads.txt"
        # The first starts as a shell that spins, then execs it: one pid, two programs.
        first = subprocess.Popen(
            ["/bin/sh", "-c", f"i=0; while [ $i -lt {SHELL_SPIN} ]; do i=$((i+1)); done; "
             f'exec "{work}" 3000 "{work_report}"'], stdout=subprocess.DEVNULL)
        second = subprocess.Popen([str(threads), str(thread_report), "60000000"],
                                  stdout=subprocess.DEVNULL)
        assert first.wait(timeout=120) == 7 and second.wait(timeout=120) == 0
        time.sleep(1.5)  # both exited: their last samples pushed at the next interval
    finally:
        err = _stop(agent, signal.SIGTERM)
    assert "Traceback" not in err and "pushed" in err, err

    # Each program's own shares, from the server, within 5 points of what it measured.
    # Other tests may run the same programs meanwhile, which this agent sees too: by pid.
    mine = load(f"{url}?from=-1h&run={run}&program={work.name}&pid={first.pid}")
    truth = fixture_cpu_shares(work_report)
    got = _self_shares(mine, list(truth))
    assert all(abs(got[n] - truth[n]) <= 5.0 for n in truth), (got, truth)
    theirs = load(f"{url}?from=-1h&run={run}&program={threads.name}&pid={second.pid}")
    truth = _thread_shares(thread_report)
    got = _self_shares(theirs, list(truth))
    assert all(abs(got[n] - truth[n]) <= 5.0 for n in truth), (got, truth)
    # The processes' labels: each its own pid and build; the agent's own is left out.
    for program, pid in ((work.name, first.pid), (threads.name, second.pid)):
        by_pid = load(f"{url}?from=-1h&run={run}&program={program}&pid={pid}&by=pid,host")
        assert list(by_pid.parts) == [f"pid={pid} host={os.uname().nodename}"], by_pid.parts
    everything = load(f"{url}?from=-1h&run={run}&by=pid")
    assert f"pid={agent.pid}" not in everything.parts, list(everything.parts)
    # Per-minute series (the timeline) sum to each part's whole; by thread, thr_ratio's
    # threads are parts of their own, summing to its process.
    slices = everything.slices
    assert slices is not None and slices.index.labels == list(everything.parts)
    per_minute = [sum(row) for row in slices.part_activity(0)]
    assert per_minute == [tree.root.total_cost[0] for tree in everything.parts.values()], \
        (per_minute, list(everything.parts))
    # (by program too: a sample of its fork child before the exec is Python's)
    per_thread = load(f"{url}?from=-1h&run={run}&program={threads.name}&pid={second.pid}"
                      "&by=thread")
    assert len(per_thread.parts) >= 4, list(per_thread.parts)
    by_thread = {label: t.root.total_cost[0] for label, t in per_thread.parts.items()}
    assert sum(by_thread.values()) == theirs.total(0), (by_thread, theirs.total(0))
    # The exec: the shell's samples before it are the shell's, under the same pid; the
    # program= queries above left them out.
    shell = os.path.basename(os.path.realpath("/bin/sh"))
    launcher = os.path.basename(os.path.realpath(sys.executable))  # its fork child, if seen
    by_program = load(f"{url}?from=-1h&run={run}&pid={first.pid}&by=program")
    assert ({f"program={shell}", f"program={work.name}"} <= set(by_program.parts)
            <= {f"program={shell}", f"program={work.name}", f"program={launcher}"}), \
        list(by_program.parts)
    assert by_program.parts[f"program={work.name}"].root.total_cost[0] == mine.total(0)
    # The local profile holds the same samples of these processes as the server: by pid,
    # a process's images before and after an exec together (its parts are by pid).
    local = load_file(saved)
    for program, pid in ((work.name, first.pid), (threads.name, second.pid)):
        in_local = sum(tree.root.total_cost[0] for label, tree in local.parts.items()
                       if parse_label(label)[0] == pid)
        assert local.meta.threads[pid] == program  # the name of its last image
        pushed = load(f"{url}?from=-1h&run={run}&pid={pid}")
        assert in_local == pushed.total(0) > 0, (program, in_local, pushed.total(0))


def test_agent_build_label_is_the_executables(server: Server, tmp_path: Path) -> None:
    """Each process is pushed with its executable's build-id, also one whose file was
    deleted as soon as it exited (read while it ran, not at the push)."""
    work = build_fixture("smp_work.c", ["-O1", "-g"])
    from proftui.collectors.symbols.elf import ElfFile

    with ElfFile(str(work)) as elf:
        build = str(elf.build_id())
    url = server.url("agent_build")
    run = secrets.token_hex(4)
    agent = subprocess.Popen(
        [*CLI, "agent", "--push", url, "--every", "1", "-F", "199", "--label", f"run={run}",
         "--program", work.name, "--duration", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    target = subprocess.Popen([str(work), "600"], stdout=subprocess.DEVNULL)
    assert target.wait(timeout=60) == 7
    copy = tmp_path / work.name  # the same build, gone once it ran
    shutil.copy2(work, copy)
    brief = subprocess.Popen([str(copy), "300"], stdout=subprocess.DEVNULL)
    assert brief.wait(timeout=60) == 7
    copy.unlink()
    _out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    # the filter: one program (other tests may run it meanwhile, seen too: by pid)
    pushed = load(f"{url}?from=-1h&run={run}&by=program,build")
    assert {label.split()[0] for label in pushed.parts} == {f"program={work.name}"}, \
        (list(pushed.parts), err)
    for pid in (target.pid, brief.pid):
        mine = load(f"{url}?from=-1h&run={run}&pid={pid}&by=program,build")
        assert list(mine.parts) == [f"program={work.name} build={build}"], \
            (pid, list(mine.parts), err)
    assert "outside the filter" in err  # the other processes' samples, said


def test_samples_the_agent_lost_are_said_by_the_fleet(server: Server, tmp_path: Path) -> None:
    """Rings of 64 KiB at 999 Hz, and the helper stopped for 1.5 s: the kernel drops
    samples.  A fleet query of a process on that host says how many, the same number the
    agent's own profile holds (its rings are the host's, not one process's)."""
    import psutil

    work = build_fixture("smp_work.c", ["-O1", "-g"])
    url = server.url("agent_lost")
    run = secrets.token_hex(4)
    saved = tmp_path / "host.proftui"
    agent = subprocess.Popen(
        [*CLI, "agent", "--push", url, "--every", "1", "-F", "999", "--buffer", "0.0625",
         "--label", f"run={run}", "--program", work.name, "-o", str(saved)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert agent.poll() is None, agent.communicate()
        helpers = [p for p in psutil.Process(agent.pid).children() if p.name() == "proftui-attach"]
        assert len(helpers) == 1, helpers
        target = subprocess.Popen([str(work), "3000"], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        helpers[0].suspend()
        time.sleep(1.5)
        helpers[0].resume()
        assert target.wait(timeout=120) == 7
        time.sleep(1.5)
    finally:
        err = _stop(agent, signal.SIGTERM)
    local = load_file(saved)
    late = sum(int(n.split()[0].replace(",", "")) for n in local.meta.warnings
               if "after their process's last push" in n)
    assert local.meta.dropped > 0, (local.meta.warnings, err)
    pushed = load(f"{url}?from=-1h&run={run}&pid={target.pid}")
    said = [n for n in pushed.meta.warnings if n.startswith("the agent on ")]
    lost = count(local.meta.dropped + late, "sample")
    assert said == [f"the agent on {os.uname().nodename} lost {lost} in this window (its rings "
                    "were full, or they came after their process's last push): each process "
                    "of that host may be short by up to that many"], (said, local.meta.warnings)
    assert pushed.total(0) > 0
    print(f"lost {local.meta.dropped} (late {late}) of {local.total(0):.0f} kept; {said[0]}")


def test_a_long_run_forgets_its_stacks_and_pushes_every_sample(server: Server,
                                                                tmp_path: Path) -> None:
    """--max-stacks (a long run's memory bounded): at 100 stacks the helper and the tables
    forget theirs, again and again while Lua (a real program) runs.  Every sample the
    agent counted reaches the fleet, and the shares are those a second agent that keeps
    every stack (-o) found in the same run."""
    lua = build_lua()
    url = server.url("agent_forget")
    run = secrets.token_hex(4)
    saved = tmp_path / "kept.proftui"
    # The two sample at different rates: at one rate their timers fire in step (some
    # runs gave both the very same profile), and the one that fires just after the
    # other's interrupt skews.  Two keeping agents, both at 999 Hz, once put Lua's
    # internshrstr at 12.6% against 7.6% (5,750 samples each: 7 standard errors), 1
    # run in 23; at 999 and 997 Hz, 19 runs were all within 1.5 points.
    common = ["agent", "--program", lua.name]
    pushing = subprocess.Popen([*CLI, *common, "-F", "999", "--push", url, "--every", "1",
                                "--max-stacks", "100", "--label", f"run={run}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    keeping = subprocess.Popen([*CLI, *common, "-F", "997", "-o", str(saved)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        assert pushing.poll() is None and keeping.poll() is None
        target = subprocess.Popen([str(lua), str(LUA_SCRIPTS / "cpu.lua"), "24"],
                                  stdout=subprocess.DEVNULL)
        assert target.wait(timeout=300) == 0
        time.sleep(2.0)  # its last samples pushed at the next interval
    finally:
        try:
            err = _stop(pushing, signal.SIGTERM)
        finally:  # the second agent stops too, whatever the first did
            kept_err = _stop(keeping, signal.SIGTERM)
    forgot = [line for line in err.splitlines() if "forgot the stacks it held" in line]
    assert forgot and "(at 100, --max-stacks)" in forgot[0], err
    assert "held 1 time" not in forgot[0], forgot  # again and again
    assert "forgot" not in kept_err, kept_err
    sampled = next(line for line in err.splitlines() if "agent sampled" in line)
    counted = int(sampled.rsplit(" ", 2)[-2].replace(",", ""))
    late = sum(int(line.split("note: ")[1].split()[0].replace(",", ""))
               for line in err.splitlines() if "after their process's last push" in line)
    everything = load(f"{url}?from=-1h&run={run}")  # other tests may run this Lua too
    assert everything.total(0) == counted - late > 1000, (everything.total(0), counted, err)
    pushed = load(f"{url}?from=-1h&run={run}&pid={target.pid}")
    reference = part_profile(load_file(saved), f"pid {target.pid}")
    ours, theirs = _flat_shares(pushed), _flat_shares(reference)
    print(f"{forgot[0]}; pushed {everything.total(0):.0f} of {counted} counted ({late} late); "
          f"this Lua: pushed {pushed.total(0):.0f}, kept {reference.total(0):.0f}")
    big = [name for name, share in theirs.items() if share >= 3.0]
    assert len(big) >= 3, theirs
    assert all(abs(ours.get(n, 0.0) - theirs[n]) <= 3.0 for n in big), \
        {n: (round(ours.get(n, 0.0), 1), round(theirs[n], 1)) for n in big}


def _flat_shares(profile: Profile) -> dict[str, float]:
    """Each function's share of the profile's self samples, in percent."""
    total = profile.total(0)
    return {row.frame.function: 100.0 * row.self_cost[0] / total
            for row in flat_profile(profile)}


def test_agent_without_permission_is_one_line() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as an unprivileged user")
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid < 0:
        pytest.skip("kernel.perf_event_paranoid is -1: every user may sample every process")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all"]
    out = Path(tempfile.mkdtemp(prefix="proftui-agent-"))  # where that user may write
    try:
        out.chmod(0o777)
        result = subprocess.run(
            [*as_nobody, sys.executable, "-m", "proftui.tui.cli", "agent", "-o",
             str(out / "x.proftui"), "--duration", "1"],
            capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        shutil.rmtree(out)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "proftui: sampling every process needs root or CAP_PERFMON "
        f"(kernel.perf_event_paranoid is {paranoid}; without the capability it must be -1)")


def test_agent_without_perf_event_is_one_line(tmp_path: Path) -> None:
    """A kernel without perf events (perf_event_open: ENOSYS, by an LD_PRELOAD shim the
    sampling helper inherits): one line, exit status 2, nothing saved."""
    shim = build_fixture("no_perf_event.c", ["-O2", "-shared", "-fPIC", "-ldl"],
                         output="no_perf_event.so")
    saved = tmp_path / "x.proftui"
    began = time.monotonic()
    result = subprocess.run([*CLI, "agent", "-o", str(saved), "--duration", "1"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "LD_PRELOAD": str(shim)})
    # no wait for a stream that ended with the helper (it waited twice STOP_TIMEOUT_S)
    assert time.monotonic() - began < STOP_TIMEOUT_S
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "proftui: perf_event is not available here (Function not implemented): the kernel "
        "has no cpu-clock events for this system")
    assert not saved.exists()


def test_agent_needs_somewhere_to_put_the_profile() -> None:
    result = proftui("agent", "--duration", "1")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "proftui: proftui agent needs --push URL (or -o FILE to save the profile)")


def test_short_lived_processes_keep_their_samples_and_names(tmp_path: Path) -> None:
    """Twenty runs of ~0.1 s, one after another: each exits long before the agent ends
    (most before their stacks are even symbolized); each keeps its samples, by name."""
    why = _can_sample_every_process()
    if why:
        pytest.skip(why)
    work = build_fixture("smp_work.c", ["-O1", "-g"])
    saved = tmp_path / "host.proftui"
    agent = subprocess.Popen([*CLI, "agent", "-F", "199", "--program", work.name,
                              "-o", str(saved)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        for _ in range(20):
            run = subprocess.run([str(work), "60"], stdout=subprocess.DEVNULL)
            assert run.returncode == 7
    finally:
        err = _stop(agent, signal.SIGTERM)
    profile = load_file(saved)
    runs = {label.split()[1] for label in profile.parts}
    assert len(runs) >= 15, (sorted(profile.parts), err)  # most runs took a sample or more
    flat = {row.frame.function: row.self_cost[0] for row in flat_profile(profile)}
    named = sum(flat.get(n, 0.0) for n in ("work_a", "work_b", "work_c"))
    assert named >= 0.9 * profile.total(0), flat


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the fixture generates x86-64 code")
@pytest.mark.parametrize("push", [False, True])
def test_generated_code_is_named_from_each_processs_perf_map(push: bool, tmp_path: Path,
                                                              request: pytest.FixtureRequest
                                                              ) -> None:
    """Four JIT-like processes at once (tests/fixtures/smp_jit.c): one names its code in
    its perf map, one only after a while (its earlier stacks named then), one through a
    call stub with no frame pointer, and one whose map anyone may write (refused, said).
    With --push each process's table is its own and the host profile holds copies: both
    are named again."""
    why = _can_sample_every_process()
    if why:
        pytest.skip(why)
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    saved = tmp_path / "host.proftui"
    extra = []
    if push:
        server = request.getfixturevalue("server")
        extra = ["--push", server.url("agent_jit"), "--every", "1"]
    agent = subprocess.Popen([*CLI, "agent", "-F", "499", "--program", binary.name, *extra,
                              "-o", str(saved)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    targets: dict[str, subprocess.Popen[str]] = {}
    try:
        time.sleep(1.5)
        # "late" spins in its unnamed code until SIGUSR1, then writes its map, says
        # "ready" and spins 3 s more.
        for mode in ("late", "good", "stub", "writable"):
            targets[mode] = subprocess.Popen([str(binary), mode, "3", "ready"],
                                             stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)
        targets["late"].send_signal(signal.SIGUSR1)
        for target in targets.values():
            out, _ = target.communicate(timeout=60)
            assert target.returncode == 0 and out.startswith(f"ready {target.pid}\n"), out
        # With --push, long enough for the exited processes to be pushed and forgotten
        # (their notes must outlive them)
        time.sleep(3.0 if push else 0.5)
    finally:
        for target in targets.values():
            if target.poll() is None:
                target.kill()
                target.wait()
        try:  # the maps stay until the agent ended, as a JIT's maps stay in /tmp
            err = _stop(agent, signal.SIGTERM)
        finally:
            for target in targets.values():
                for path in (f"/tmp/perf-{target.pid}.map",
                             f"/tmp/perf-{target.pid}.map.real"):
                    Path(path).unlink(missing_ok=True)
    profile = load_file(saved)
    # (before its map, "late" spins in its code called from main itself)
    chains = {"good": [["main", "run_jit", "jit_spin"]],
              "late": [["main", "run_jit", "jit_spin"], ["main", "jit_spin"]],
              "stub": [["main", "run_stub", "call_stub", "jit_stub", "stub_spin"]]}
    for mode, whole_chains in chains.items():
        chain = whole_chains[0]
        mine = part_profile(profile, f"pid {targets[mode].pid}")
        whole = mine.total(0)
        # ~3 s at 499 Hz on a quiet machine; 249 beside two busy loops and the suite
        assert whole >= 60, (mode, whole, err)
        rows = {row.frame.function: row for row in flat_profile(mine)}
        assert chain[-1] in rows, (mode, sorted(rows), profile.meta.warnings)
        assert rows[chain[-1]].self_cost[0] >= 0.8 * whole, (mode, sorted(rows))
        jit = "jit_stub" if mode == "stub" else chain[-1]
        assert rows[jit].frame.module == "[jit]", rows[jit]
        through = sum(node.total_cost[0] for node in mine.tree.nodes()
                      if any([mine.frames[f].function.split(" [clone")[0]
                              for f in node.path()][-len(c):] == c for c in whole_chains))
        assert through >= 0.8 * whole, (mode, through, whole, paths_to(mine, chain[-1]))
    writable = part_profile(profile, f"pid {targets['writable'].pid}")
    assert not any(row.frame.module == "[jit]" for row in flat_profile(writable))
    assert any(f"/tmp/perf-{targets['writable'].pid}.map" in w and "writable by others" in w
               for w in profile.meta.warnings), profile.meta.warnings


def test_a_sample_from_before_an_exec_is_not_walked_in_the_new_program(
        tmp_path: Path) -> None:
    """Shells that spin a few ms, then exec: their first samples are read after the exec,
    when /proc shows the new program's maps.  Unwound with those they came out as raw
    addresses under the new program (~3 a run here); now each is walked with the maps of
    its time or left out and said, as is a sample inside execve itself (the old
    program's registers, the new program's memory: its pc in none of the new maps)."""
    why = _can_sample_every_process()
    if why:
        pytest.skip(why)
    work = build_fixture("smp_work.c", ["-O1", "-g"])
    saved = tmp_path / "host.proftui"
    runs = 30
    agent = subprocess.Popen([*CLI, "agent", "-F", "999", "-o", str(saved)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = set()
    try:
        time.sleep(1.5)
        for _ in range(runs):
            shell = subprocess.Popen(
                ["/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; "
                 f'exec "{work}" 60'], stdout=subprocess.DEVNULL)
            assert shell.wait(timeout=60) == 7  # the program's own status
            pids.add(shell.pid)
    finally:
        err = _stop(agent, signal.SIGTERM)
    profile = load_file(saved)
    unresolved = before = named_shell = 0.0
    names: list[str] = []
    for label, tree in profile.parts.items():
        if parse_label(label)[0] not in pids:
            continue
        for node in range(1, len(tree)):
            frame = profile.frames[tree.frames[node]]
            if not frame.module and frame.function.startswith("0x"):
                unresolved += tree.selfs[0][node]
                names.append(frame.function)
            elif frame.module == os.path.realpath("/bin/sh"):
                named_shell += tree.selfs[0][node]
    for line in err.splitlines():
        if "just before, during or after their process's exec" in line:
            before = float(line.split("note: ", 1)[1].split()[0].replace(",", ""))
    assert named_shell + before > 0, err  # the shells were sampled before their exec
    print(f"unresolved {unresolved:g} of {runs} runs; {before:g} left out, said; "
          f"{named_shell:g} named in the shell {names}")
    assert unresolved <= 0.15 * runs, (unresolved, before, named_shell, names)


def test_a_container_whose_root_cannot_be_read_is_said(tmp_path: Path) -> None:
    """An agent without CAP_SYS_PTRACE cannot read another user's process in its own mount
    namespace (a container): its samples are kept as addresses, the files it could not
    read are said, it is named (and filtered) by the name it gives itself, and it runs on
    unharmed (exit status 7, as without it)."""
    why = _can_sample_every_process()
    if why:
        pytest.skip(why)
    if os.geteuid() != 0 or not (shutil.which("setpriv") and shutil.which("unshare")):
        pytest.skip("needs root, setpriv and unshare to make a container of another user")
    work = build_fixture("smp_work.c", ["-O1", "-g"])
    place = Path(tempfile.mkdtemp(prefix="proftui-ct-"))  # where user nobody may run it
    try:
        place.chmod(0o755)
        program = place / work.name
        shutil.copy2(work, program)
        program.chmod(0o755)
        saved = tmp_path / "host.proftui"
        agent = subprocess.Popen(
            ["setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace", *CLI,
             "agent", "-F", "199", "--program", work.name, "-o", str(saved)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            # unshare and setpriv exec what follows: one pid, the target's.  ~1.2 s of
            # CPU: the agent looks at its files while it runs, even on a loaded machine
            # (with 0.3 s one loaded suite run saw it exit first, and said so instead).
            target = subprocess.Popen(
                ["unshare", "--mount", "setpriv", "--reuid=65534", "--regid=65534",
                 "--clear-groups", str(program), "1500"], stdout=subprocess.DEVNULL)
            target.wait(timeout=60)
            time.sleep(0.5)
        finally:
            err = _stop(agent, signal.SIGTERM)
    finally:
        shutil.rmtree(place)
    assert target.returncode == 7
    assert "Traceback" not in err, err
    pid = target.pid
    assert (f"note: {program}: cannot be read through /proc/{pid}/root "
            "(permission denied: reading another user's process in its own mount namespace "
            "needs CAP_SYS_PTRACE)") in err, err
    # --program matched it by its name as the kernel keeps it (other tests may run the
    # same program meanwhile: those are in the profile too, by their own pids)
    profile = load_file(saved)
    assert profile.meta.threads[pid] == work.name[:15]
    mine = [label for label in profile.parts if parse_label(label)[0] == pid]
    assert mine and all(profile.parts[label].root.total_cost[0] > 0 for label in mine)
    for label in mine:
        part = part_profile(profile, label)
        flat = {row.frame.function for row in flat_profile(part)}
        assert not flat & {"work_a", "work_b", "work_c"}, flat  # addresses, not names
