"""Attach mode end to end: a fixture started outside proftui, sampled, detached.

Each test checks that the target then finishes with its normal output and
exit status (the target is sacred).  Methods the machine forbids are skipped
with the reason proftui itself gives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import attach, attached_profile
from tests.helpers.costs import names_on_paths, self_costs
from tests.helpers.targets import ATT_DONE, ATT_FLAGS, ATT_NO_FP_FLAGS, ReadyTarget, SpinTarget


def check_profile(profile: Profile, pid: int, method: str) -> None:
    assert profile.meta.mode == "attach"
    assert profile.meta.pids == [pid]
    assert method in profile.meta.clock
    assert any(f"method: {method}" in w for w in profile.meta.warnings)
    selfs = self_costs(profile)
    total = profile.total(0)
    assert total >= 20, selfs
    # Two spinning threads: att_hot (main thread) and att_cold (second thread)
    # take nearly all the samples, roughly half each.
    assert selfs.get("att_hot", 0) / total > 0.25, selfs
    assert selfs.get("att_cold", 0) / total > 0.25, selfs
    paths = names_on_paths(profile)
    chain = ["main", "att_outer", "att_middle", "att_hot"]
    assert any(p[-4:] == chain for p in paths), paths
    assert any(p[-2:] == ["att_thread_main", "att_cold"] for p in paths), paths
    # One part per thread, named like the other collectors name them.
    assert len(profile.parts) == 2, list(profile.parts)
    assert all(label.startswith(f"pid {pid} tid ") for label in profile.parts)
    assert set(profile.meta.threads) >= {int(k.rsplit(" ", 1)[1]) for k in profile.parts}


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_attach_samples_the_hot_chains_of_a_running_target(method: str) -> None:
    with SpinTarget(2.5) as fixture:
        collector = attach(fixture.pid, method, frequency_hz=500, duration_s=0.8)
        live = collector.snapshot()  # a live snapshot works while attached
        assert live.meta.complete is False
        profile = collector.wait()
        collector.stop()
        assert profile.meta.complete is True
        assert collector.exit_info() is None  # detached before the target ended
        check_profile(profile, fixture.pid, method)
        assert fixture.tracer() == 0  # really detached
        out, status = fixture.finish()
        assert (out, status) == (ATT_DONE, 7)


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_code_without_frame_pointers_unwinds_through_cfi(method: str) -> None:
    with SpinTarget(2.0, ATT_NO_FP_FLAGS) as fixture:
        collector = attach(fixture.pid, method, frequency_hz=500, duration_s=0.8)
        profile = collector.wait()
        collector.stop()
        check_profile(profile, fixture.pid, method)  # main -> att_outer -> att_middle -> att_hot
        assert fixture.finish() == (ATT_DONE, 7)


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_signals_reach_the_target_while_attached(method: str) -> None:
    """Signals to a traced target are passed on untouched (ptrace signal-delivery-stops)."""
    with SpinTarget(1.5) as fixture:
        collector = attach(fixture.pid, method, frequency_hz=1000)
        for _ in range(5):
            os.kill(fixture.pid, signal.SIGUSR1)
            time.sleep(0.05)
        collector.stop()
        assert fixture.finish() == (ATT_DONE.replace("usr1=0", "usr1=5"), 7)


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_target_exit_while_attached_keeps_profile(method: str) -> None:
    with SpinTarget(0.8) as fixture:
        collector = attach(fixture.pid, method, frequency_hz=500)
        profile = collector.wait()  # no duration: returns when the target exits
        collector.stop()
        out, status = fixture.finish()
        assert (out, status) == (ATT_DONE, 7)
        assert profile.total(0) > 0
        assert "att_hot" in self_costs(profile)
        assert any("target exited" in w for w in profile.meta.warnings), profile.meta.warnings
        info = collector.exit_info()
        assert info is not None
        if method == "ptrace":  # the tracer sees the exit status; perf cannot
            assert info.status == 7


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_follows_code_that_appears_after_attaching(method: str) -> None:
    lib = build_fixture("att_lib.c", ["-shared", "-fPIC", *ATT_FLAGS[:-1]], output="att_lib")
    binary = build_fixture("att_late.c", ATT_FLAGS)
    with ReadyTarget([binary, lib, "0.3", "1.2"]) as target:
        profile = attached_profile(target, method, frequency_hz=500)
        assert target.finish(timeout=20) == ("att_late done\n", 5)
    selfs = self_costs(profile)
    assert selfs.get("att_lib_spin", 0) / profile.total(0) > 0.6, selfs
    assert any(p[-2:] == ["att_late_thread", "att_lib_spin"]
               for p in names_on_paths(profile)), names_on_paths(profile)
    spin = next(f for f in profile.frames if f.function == "att_lib_spin")
    assert os.path.realpath(spin.module) == os.path.realpath(lib)
    assert len(profile.meta.threads) >= 2  # the thread born after attaching


def test_ptrace_says_when_it_falls_behind() -> None:
    """Issue 13: ptrace at a high rate on two busy threads costs the target and
    may not reach the asked rate (the target's CPU timer fires at most once a kernel
    tick): the stops' cost is reported, and the rate warning appears exactly when the
    achieved rate is below 80% of the asked, saying why."""
    with SpinTarget(2.0) as fixture:
        collector = attach(fixture.pid, "ptrace", frequency_hz=4000, duration_s=0.8)
        profile = collector.wait()
        collector.stop()
        assert fixture.finish() == (ATT_DONE, 7)
    stopped = [w for w in profile.meta.warnings if w.startswith("ptrace stopped the target")]
    assert stopped, profile.meta.warnings
    achieved = profile.total(0) / (profile.total(1) / 1e9)
    behind = [w for w in profile.meta.warnings if w.startswith("ptrace sampled ")]
    # Under 0.2 s of CPU time sampled (a loaded machine) the rate is not judged.
    judged = profile.total(1) / 1e9 >= 0.2
    assert bool(behind) == (judged and achieved < 0.8 * 4000), (achieved, profile.meta.warnings)
    if behind:
        assert behind[0].startswith(f"ptrace sampled {achieved:.0f} times per second")
        timer = any(w.startswith("ptrace: samples were taken where the target's own CPU timer")
                    for w in profile.meta.warnings)
        assert ("once per kernel tick" in behind[0]) == timer, profile.meta.warnings


def test_deleted_binary_still_resolves(tmp_path: Path) -> None:
    """The binary was replaced or removed after the target started (an upgrade)."""
    import shutil

    copy = tmp_path / "att_spin_copy"
    shutil.copy(build_fixture("att_spin.c", ATT_FLAGS), copy)
    with ReadyTarget([copy, "1.5"]) as target:
        copy.unlink()
        profile = attached_profile(target, "auto", frequency_hz=500, duration_s=0.5)
        assert "att_hot" in self_costs(profile)
        assert target.finish(timeout=20) == (ATT_DONE, 7)


def run_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "proftui.tui.cli", *args],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_helper(parent: int, timeout: float = 15.0) -> int:
    """Pid of the proftui-attach child of `parent`, once it runs (proftui starts slowly
    on a loaded machine, and a signal before then would not test detaching)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                # Bytes: another test's process may carry a name that is not UTF-8.
                stat = (entry / "stat").read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            name, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :]
            if name == "proftui-attach" and int(rest.split()[1]) == parent:
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError("proftui never started its attach helper")


@pytest.mark.parametrize("how", ["duration", "sigterm", "sigint"])
def test_stopped_record_cli_saves_the_profile(tmp_path: Path, how: str) -> None:
    # 8 s: proftui's start-up under load takes seconds, and the target must outlive it.
    fixture = SpinTarget(8.0)
    out_file = tmp_path / "run.proftui"
    try:
        extra = ["--duration", "0.7"] if how == "duration" else []
        cli = run_cli("record", "--pid", str(fixture.pid), "-F", "200", *extra,
                      "-o", str(out_file))
        if how != "duration":
            wait_for_helper(cli.pid)
            time.sleep(0.5)  # header read, now sampling in wait()
            cli.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        _, err = cli.communicate(timeout=20)
        # SIGTERM ended proftui (128+N, as a shell reports it); Ctrl-C is the usual end.
        assert cli.returncode == (143 if how == "sigterm" else 0), err
        assert "saved" in err
        profile = storage.load(out_file)
        assert profile.meta.mode == "attach" and profile.meta.pids == [fixture.pid]
        assert "att_hot" in self_costs(profile)
        assert fixture.tracer() == 0
        assert fixture.finish() == (ATT_DONE, 7)
    finally:
        fixture.kill()


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_proftui_killed_helper_detaches(tmp_path: Path, method: str) -> None:
    """If proftui dies (SIGKILL), its helper notices and detaches: target unharmed."""
    # 6 s: on a loaded machine proftui's start-up alone can take seconds, and the target
    # must still be running when proftui is killed.
    with SpinTarget(6.0) as fixture:
        cli = run_cli("record", "--pid", str(fixture.pid), "--method", method,
                      "-o", str(tmp_path / "x.proftui"))
        if cli.poll() is None:
            wait_for_helper(cli.pid)
        deadline = time.monotonic() + 15
        while method == "ptrace" and fixture.tracer() == 0 and cli.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)  # attached: the kill below then tests detaching
        time.sleep(0.5)
        if cli.poll() is not None:
            err = cli.stderr.read() if cli.stderr else ""
            if "not allowed" in err or "denied" in err:
                pytest.skip(err)
            pytest.fail(err)
        cli.kill()
        cli.wait()
        deadline = time.monotonic() + 5
        while fixture.tracer() != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fixture.tracer() == 0
        assert fixture.finish() == (ATT_DONE, 7)


def test_bad_pids() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    with pytest.raises(ProftuiError, match=f"no process with pid {gone.pid}"):
        AttachCollector([], CollectorOptions(pid=gone.pid)).start()
    zombie = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 5
        while "Z" not in Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(ProftuiError, match="zombie"):
            AttachCollector([], CollectorOptions(pid=zombie.pid)).start()
    finally:
        zombie.wait()
    with pytest.raises(ProftuiError, match="itself"):
        AttachCollector([], CollectorOptions(pid=os.getpid())).start()
    if Path("/proc/2/stat").exists() and "kthreadd" in Path("/proc/2/comm").read_text():
        with pytest.raises(ProftuiError, match="kernel thread"):
            AttachCollector([], CollectorOptions(pid=2)).start()


def test_second_tracer_is_explained() -> None:
    with SpinTarget(2.0) as fixture:
        first = attach(fixture.pid, "ptrace")
        try:
            with pytest.raises(ProftuiError, match=r"already traced by pid \d+ \(proftui-attach\)"):
                AttachCollector([], CollectorOptions(pid=fixture.pid, method="ptrace")).start()
        finally:
            first.stop()
        assert fixture.finish() == (ATT_DONE, 7)


@pytest.mark.parametrize("method", ["perf", "ptrace", "auto"])
def test_permission_denied_is_explained(method: str) -> None:
    """An unprivileged user attaching to root's process gets the real reason."""
    import shutil

    from proftui.collectors.runtime.libraries import runtime_executable_path

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as an unprivileged user")
    fixture = SpinTarget(1.5)
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        helper = subprocess.run(
            [*as_nobody, runtime_executable_path("proftui-attach"), str(fixture.pid), "100",
             method], stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        assert helper.returncode == 1
        message = helper.stderr.decode()
        assert "Permission denied" in message or "Operation not permitted" in message
        # The explanation is computed as that user, from /proc facts.
        explain = subprocess.run(
            [*as_nobody, sys.executable, "-c",
             "import sys; from proftui.collectors.attach.checks import explain_failure; "
             "print(explain_failure(int(sys.argv[1]), sys.argv[2], sys.stdin.read()))",
             str(fixture.pid), method],
            input=message, capture_output=True, text=True, timeout=20,
            cwd=Path(__file__).resolve().parents[2])
        assert explain.returncode == 0, explain.stderr
        assert "belongs to uid 0 and you are uid 65534" in explain.stdout, explain.stdout
        assert fixture.tracer() == 0
        assert fixture.finish() == (ATT_DONE, 7)
    finally:
        fixture.kill()


def test_cli_reports_missing_pid() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    cli = run_cli("--pid", str(gone.pid), "--text")
    _, err = cli.communicate(timeout=20)
    assert cli.returncode == 2
    assert err.strip() == f"proftui: no process with pid {gone.pid}"


def test_attach_subcommand_takes_options_after_pid() -> None:
    """`proftui attach PID --duration S --text`: options after the pid are options."""
    with SpinTarget(3.0) as fixture:
        cli = run_cli("attach", str(fixture.pid), "--duration", "0.6", "-F", "200", "--text")
        out, err = cli.communicate(timeout=20)
        assert cli.returncode == 0, err
        assert "att_hot" in out
        assert fixture.finish() == (ATT_DONE, 7)


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_helper_stream_aggregates_samples_by_stack(method: str) -> None:
    """The helper aggregates (issue 23): each distinct stack is announced once, before
    the first counts that name it, and the counts add up to the samples it took."""
    from proftui.collectors.runtime.libraries import runtime_executable_path
    from proftui.collectors.runtime.wire_attach import Counts, End, Lost, Stack, StreamDecoder

    with SpinTarget(2.0) as fixture:
        # its stdin stays open until it returns: EOF there means "detach now"
        helper = subprocess.Popen([runtime_executable_path("proftui-attach"), str(fixture.pid),
                                   "1000", method], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert helper.stdout is not None and helper.stderr is not None and helper.stdin
        out, err = helper.stdout.read(), helper.stderr.read()  # until the target exits
        helper.stdin.close()
        helper.wait(timeout=30)
        if helper.returncode != 0:
            pytest.skip(f"{method} sampling is not allowed here: {err.decode()}")
        assert fixture.finish() == (ATT_DONE, 7)
    records = list(StreamDecoder().feed(out))
    announced: list[int] = []
    counted = 0
    times = []
    for record in records:
        if isinstance(record, Stack):
            announced.append(record.id)
        elif isinstance(record, Counts):
            assert {sid for sid, _, _ in record.counts} <= set(announced)
            assert len({sid for sid, _, _ in record.counts}) == len(record.counts)
            counted += sum(samples for _, samples, _ in record.counts)
            times.append(record.time)
    assert announced == list(range(len(announced)))  # each once, numbered in order
    end = [r for r in records if isinstance(r, End)]
    assert len(end) == 1 and end[0].samples == counted > 100, (end, counted)  # ptrace lags
    assert not any(isinstance(r, Lost) and r.where != 1 for r in records)
    # A spinning loop has few distinct stacks (start-up's and exit's included: a
    # loaded run gave 17 stacks for 164 ptrace samples).
    assert len(announced) < max(counted / 10, 40), (len(announced), counted)
    assert times == sorted(times) and len(times) >= 5  # a COUNTS every tenth of a second
