"""Fleet profiles against real ClickHouse servers (Debian's 18.16 here): runs pushed from
several processes, labelled as different hosts, read back exactly as their local files
merge; an outage mid-run loses and duplicates nothing; bad input is one line, exit 2."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet.query import FleetQuery, load, load_window
from proftui.collectors.fleet.url import parse
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.storage import load as load_file

from tests.conftest import build_fixture
from tests.helpers.clickhouse import Server, free_port
from tests.helpers.fleet import CLI, assert_same, proftui, push_run, servers_or_skip, tree_paths
from tests.helpers.tmux import Terminal

CPU_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    for servers in servers_or_skip(1):
        yield servers[0]


def _check_one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proftui: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_cpu_fleet_equals_merged_local_files(server: Server, tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    url = server.url("cpu_exact")
    runs = []
    for i, rounds in enumerate((300, 200, 250)):
        out = tmp_path / f"h{i}.proftui"
        result = push_run(url, binary, out, str(rounds), labels=(f"host=h{i}", "job=exact"))
        assert result.returncode == 7, result.stderr  # the fixture's own status
        assert "pushed" in result.stderr
        runs.append(load_file(out))
    fleet = load(url + "?from=-1h&job=exact")
    assert_same(fleet, runs)
    assert sum(p.total(0) for p in runs) == fleet.total(0) > 0
    # One part per pushed run, named by host, program and pid, each with its run's cost
    # and calling contexts (`t` picks one).
    by_host = {label.split()[0]: tree for label, tree in fleet.parts.items()}
    assert sorted(by_host) == ["h0", "h1", "h2"], list(fleet.parts)
    assert all(f" {binary.name} pid " in label for label in fleet.parts), list(fleet.parts)
    for i, run in enumerate(runs):
        assert by_host[f"h{i}"].root.total_cost[0] == run.total(0)
        assert tree_paths(Profile(meta=fleet.meta, metrics=fleet.metrics, frames=fleet.frames,
                                  tree=by_host[f"h{i}"])) == tree_paths(run)
    # The timeline: each part's totals per minute, summing to the part; a range of it is
    # a query of that window (here: the minutes the runs fell in, then an empty hour).
    slices = fleet.slices
    assert slices is not None and slices.totals_only and slices.width == 60
    assert slices.index.labels == list(fleet.parts)
    assert [sum(row) for row in slices.part_activity(0)] == [
        tree.root.total_cost[0] for tree in fleet.parts.values()]
    busy = [k for k in range(len(slices)) if any(row[k] for row in slices.part_activity(0))]
    window = load_window(url + "?job=exact", slices.start + 60 * busy[0],
                         slices.start + 60 * (busy[-1] + 1))
    assert_same(window, runs)
    with pytest.raises(ProftuiError, match="no fleet samples"):
        load_window(url, slices.start - 7200, slices.start - 3600)
    # by=: a part per value of those labels, sessions sharing them merged.
    per_host = load(url + "?from=-1h&job=exact&by=host")
    assert_same(per_host, runs)
    assert {label: tree.root.total_cost[0] for label, tree in per_host.parts.items()} == {
        f"host=h{i}": run.total(0) for i, run in enumerate(runs)}
    per_program = load(url + "?from=-1h&job=exact&by=program,job")
    assert list(per_program.parts) == [f"program={binary.name} job=exact"]
    assert tree_paths(Profile(meta=fleet.meta, metrics=fleet.metrics, frames=per_program.frames,
                              tree=per_program.parts[f"program={binary.name} job=exact"])) \
        == tree_paths(fleet)
    # A label filter narrows to its hosts; repeating a key accepts either value.
    assert_same(load(url + "?from=-1h&host=h1"), [runs[1]])
    assert_same(load(url + "?from=-1h&host=h0&host=h2"), [runs[0], runs[2]])
    # The automatic labels: program, build-id, mode, pid.
    assert "program=smp_work" not in fleet.meta.warnings[0]  # named by the binary's name
    assert load(url + f"?from=-1h&program={binary.name}&mode=sampler").total(0) == \
        fleet.total(0)
    # Line costs travel with the stacks' leaf sites.
    merged_lines: dict = {}
    for run in runs:
        for key, values in run.line_costs.items():
            merged_lines.setdefault(key, [0.0] * len(values))
            merged_lines[key] = [a + b for a, b in zip(merged_lines[key], values, strict=True)]
    assert fleet.line_costs == merged_lines


def test_heap_fleet_equals_merged_local_files(server: Server, tmp_path: Path) -> None:
    binary = build_fixture("heap_basic.c", ["-O2", "-g", "-pthread"])
    url = server.url("heap_exact")
    runs = []
    for i in range(2):
        out = tmp_path / f"heap{i}.proftui"
        result = push_run(url, binary, out, labels=(f"host=hh{i}",), options=("--mode", "heap"))
        assert result.returncode == 3, result.stderr
        runs.append(load_file(out))
    fleet = load(url + "?from=-1h")
    assert "leaked_bytes" in [m.name for m in fleet.metrics]
    assert_same(fleet, runs)


def first_push(server: Server, database: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the run has pushed its first interval into `database`."""
    from clickhouse_driver import Client
    from clickhouse_driver.errors import Error

    client = Client("127.0.0.1", port=server.tcp)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if client.execute(f"SELECT count() FROM {database}.proftui_samples")[0][0]:
                return
        except Error:  # the table does not exist before the first push
            pass
        time.sleep(0.1)
    raise AssertionError(f"no interval pushed (proftui exit status {proc.poll()})")


def test_outage_mid_run_every_interval_once(server: Server, tmp_path: Path) -> None:
    """The server stops for a few seconds while the run pushes every second, then comes
    back while the target still runs (about 9 s): the intervals wait in the spool and
    arrive once each."""
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    url = server.url("outage")
    out = tmp_path / "outage.proftui"
    proc = subprocess.Popen(
        [*CLI, "record",
         "--push", url, "--every", "1", "--label", "host=flaky", "-o", str(out),
         str(binary), "9000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first_push(server, "outage", proc)  # not a fixed sleep: start-up is slow under load
        server.stop()
        time.sleep(4)
        server.start()
        _stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        if server.process is None:
            server.start()
    assert proc.returncode == 7, stderr
    assert "sends failed" in stderr, stderr  # the outage was seen, and outlived
    local = load_file(out)
    fleet = load(url + "?from=-1h")
    assert_same(fleet, [local])
    from clickhouse_driver import Client

    rows = Client("127.0.0.1", port=server.tcp).execute(
        "SELECT count(), uniqExact(batch) FROM outage.proftui_samples WHERE batch != 0")
    markers, batches = rows[0]
    assert markers == batches >= 3, rows  # several intervals, each marked once


def test_bad_input_is_refused_in_one_line(server: Server, tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    dead = f"clickhouse://127.0.0.1:{_closed_port()}/prof"
    marker = tmp_path / "ran"
    # unreachable: the query, and a push (the target is not started)
    assert "cannot reach ClickHouse" in _check_one_line(proftui("report", dead))
    line = _check_one_line(proftui("record", "--push", dead, "-o", str(tmp_path / "x"),
                                   "sh", "-c", f"touch {marker}"))
    assert "cannot reach" in line and not marker.exists()
    # wrong database; empty result; malformed URLs; another schema version
    assert "no database" in _check_one_line(proftui("report", server.url("nope")))
    push_run(server.url("bad_input"), binary, tmp_path / "b.proftui", "50")
    line = _check_one_line(proftui("report", server.url("bad_input",
                                                       "from=2001-01-01&to=2001-01-02")))
    assert "no fleet samples" in line
    for url in ("clickhouse://", "clickhouse:///prof", "clickhouse://h:99999/prof",
                server.url("x", "from=yesterday"), server.url("bad-name"),
                server.url("x", "from=-1h&to=-2h")):
        _check_one_line(proftui("report", url))
    _check_one_line(proftui("record", "--push", server.url("x", "host=a"), "true"))
    from clickhouse_driver import Client

    client = Client("127.0.0.1", port=server.tcp)
    client.execute("CREATE DATABASE other_schema")
    client.execute("CREATE TABLE other_schema.proftui_samples (time DateTime, x UInt8) "
                   "ENGINE = MergeTree ORDER BY time")
    for result in (proftui("report", server.url("other_schema")),
                   proftui("record", "--push", server.url("other_schema"), "true")):
        assert "schema version 1" in _check_one_line(result)
    client.execute("INSERT INTO bad_input.proftui_schema VALUES", [(2, 0)])
    assert "version 2" in _check_one_line(proftui("report", server.url("bad_input")))
    # credentials: a wrong password is refused in one line that does not show it
    line = _check_one_line(proftui("report", f"clickhouse://{server.user}:wrong-pw@127.0.0.1:"
                                   f"{server.tcp}/prof"))
    assert "wrong-pw" not in line and "refused" in line


def test_attached_target_unharmed_by_a_dead_server(tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    target = subprocess.Popen([str(binary), "100000"], stdout=subprocess.DEVNULL)
    try:
        dead = f"clickhouse://127.0.0.1:{_closed_port()}/prof"
        _check_one_line(proftui("record", "--pid", str(target.pid), "--push", dead,
                                "-o", str(tmp_path / "a.proftui")))
        assert target.poll() is None
    finally:
        target.send_signal(signal.SIGKILL)
        target.wait()


def test_credentials_come_from_the_environment_unprinted(server: Server,
                                                         tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    env = {**os.environ, "PROFTUI_CLICKHOUSE_USER": server.user,
           "PROFTUI_CLICKHOUSE_PASSWORD": server.password}
    result = subprocess.run(
        [*CLI, "record",
         "--push", server.url("creds"), "-o", str(tmp_path / "c.proftui"), str(binary), "50"],
        capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 7 and "pushed" in result.stderr, result.stderr
    assert server.password not in result.stderr
    report = proftui("report", "--json", server.url("creds", auth=True))
    assert report.returncode == 0 and server.password not in report.stdout + report.stderr


def test_every_reading_command_takes_fleet_urls(server: Server, tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    url = server.url("diffs")
    for build, rounds in (("old", "100"), ("new", "200")):
        push_run(url, binary, tmp_path / f"{build}.proftui", rounds, labels=(f"build={build}",))
    result = proftui("diff", "--absolute", url + "?build=old", url + "?build=new")
    assert result.returncode == 0, result.stderr
    assert "work_a" in result.stdout
    pb = tmp_path / "fleet.pb.gz"
    result = proftui("export", "-f", "pprof", "-o", str(pb), url + "?from=-1h")
    assert result.returncode == 0 and pb.stat().st_size > 0, result.stderr
    result = proftui("report", "--json", url + "?build=new")
    assert result.returncode == 0 and '"flat"' in result.stdout


def _closed_port() -> int:
    from tests.helpers.clickhouse import free_port

    return free_port()  # bound then released: nothing listens there


def test_instrument_intervals_are_snapshot_differences_with_calls(server: Server,
                                                                  tmp_path: Path) -> None:
    """A collector without a stack table (instrument) pushes snapshot differences: the
    fleet tree has the same costs and exact call counts as the local file."""
    binary = build_fixture("ins_basic.c", ["-O2", "-g", "-finstrument-functions", "-pthread"])
    url = server.url("instr")
    out = tmp_path / "ins.proftui"
    result = push_run(url, binary, out, "20000")
    assert "pushed" in result.stderr, result.stderr
    local = load_file(out)
    fleet = load(url + "?from=-1h")
    assert_same(fleet, [local])

    def calls(profile) -> dict:  # type: ignore[no-untyped-def]
        tree = profile.tree
        return {tuple(profile.frames[f] for f in tree.path(n)): tree.calls[n]
                for n in tree.preorder()}

    assert calls(fleet) == calls(local)


def test_breakdown_by_thread_equals_the_local_threads(server: Server, tmp_path: Path) -> None:
    """by=thread: a part per thread of each push session, each equal to the local file's
    thread part (the rows keep each thread); the timeline per thread sums to it."""
    binary = build_fixture("thr_ratio.c", ["-O2", "-g", "-pthread"])
    url = server.url("threads")
    out = tmp_path / "t.proftui"
    result = push_run(url, binary, out, str(tmp_path / "report"), "20000000",
                      labels=("host=t1",))
    assert result.returncode == 0, result.stderr
    local = load_file(out)
    threads = load(url + "?from=-1h&by=thread")
    assert_same(threads, [local])
    head = f"t1 {binary.name} "
    assert all(label.startswith(head) for label in threads.parts), list(threads.parts)
    assert {label.removeprefix(head): tree.root.total_cost[0]
            for label, tree in threads.parts.items()} == {
        label: tree.root.total_cost[0] for label, tree in local.parts.items()}
    assert len(threads.parts) >= 4
    slices = threads.slices
    assert slices is not None and slices.index.labels == list(threads.parts)
    assert [sum(row) for row in slices.part_activity(0)] == [
        tree.root.total_cost[0] for tree in threads.parts.values()]
    # beside a label: "host=t1 pid P tid T"
    by_host = load(url + "?from=-1h&by=host,thread")
    assert sorted(by_host.parts) == sorted(f"host=t1 {label}" for label in local.parts)


def test_a_breakdown_regroups_the_answer_shown(server: Server, tmp_path: Path) -> None:
    """`t` `g`: a label breakdown regroups the rows already read (no server asked: here
    the URL's port is dead), equal to the server's own grouping; threads need rows the
    answer lacks, so they are a query of the same window."""
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    url = server.url("regroup")
    for host in ("r1", "r2"):
        result = push_run(url, binary, tmp_path / f"{host}.proftui", "150",
                          labels=(f"host={host}",))
        assert result.returncode == 7, result.stderr
    shown = FleetQuery(parse(url + "?from=-1h"))
    whole = shown.load()
    offline = FleetQuery(replace(shown.url, port=free_port()), shown.last)
    by_host, profile = offline.broken_down(("host",))
    assert by_host.url.by == ("host",)
    asked = load(url + "?from=-1h&by=host")
    assert {k: t.root.total_cost for k, t in profile.parts.items()} == {
        k: t.root.total_cost for k, t in asked.parts.items()} != {}
    assert tree_paths(profile) == tree_paths(whole) == tree_paths(asked)
    assert [sum(row) for row in profile.slices.part_activity(0)] == [  # type: ignore[union-attr]
        t.root.total_cost[0] for t in profile.parts.values()]
    with pytest.raises(ProftuiError) as info:  # threads: a query, and the server is gone
        offline.broken_down(("thread",))
    assert "\n" not in str(info.value)
    _query, threads = shown.broken_down(("thread",))
    assert len(threads.parts) == 2 and threads.total(0) == whole.total(0)
    assert shown.last[0].threads  # now every breakdown regroups this answer
    _query, back = offline.broken_down(())
    assert sorted(back.parts) == sorted(whole.parts)


def test_an_attached_run_pushes_what_it_saves(server: Server, tmp_path: Path) -> None:
    """`record --pid N --push`: the server holds exactly the local file's stacks and
    costs (attach's reader adds new stacks while the pusher reads the table)."""
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    target = subprocess.Popen([str(binary), "1500"], stdout=subprocess.DEVNULL)
    url = server.url("attached")
    out = tmp_path / "a.proftui"
    try:
        result = proftui("record", "--pid", str(target.pid), "--push", url, "--every", "1",
                         "-F", "499", "-o", str(out))
    finally:
        target.wait(timeout=120)
    assert result.returncode == 0, result.stderr
    local = load_file(out)
    assert local.total(0) > 100
    assert_same(load(url + "?from=-1h"), [local])


def test_open_regroups_without_the_server(tmp_path: Path) -> None:
    """`proftui open URL`, then the server stops: `t` `g` still breaks the answer shown
    down by host (its rows are kept), and `r` says in one line that the server is gone."""
    binary = build_fixture("smp_work.c", CPU_FLAGS)
    for (srv,) in servers_or_skip(1):
        url = srv.url("shown")
        for host in ("web1", "web2"):
            result = push_run(url, binary, tmp_path / f"{host}.proftui", "150",
                              labels=(f"host={host}",))
            assert result.returncode == 7, result.stderr
        term = Terminal([*CLI, "open", url + "?from=-1h"], tmp_path)
        try:
            term.wait_for("functions · sorted by")
            srv.stop()
            term.key("t")
            term.wait_for("by process (host, program, pid)", "g: by host")
            term.key("g")
            screen = term.wait_for("by host (share", "host=web1", "host=web2")
            assert "All parts" in screen
            term.key("escape")
            term.key("r")
            term.wait_for("cannot", timeout=40)
        finally:
            term.close()
