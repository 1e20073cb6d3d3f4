"""The target's lifecycle when proftui is told to stop (issue 14): SIGTERM/SIGHUP end a
launched target as a shell would (SIGKILL after a grace period if it ignores them),
detach from an attached one, keep the profile; a closed stdout keeps the target's
status; the TUI's output log is bounded and exact.  Nothing is left under TMPDIR.
"""

from __future__ import annotations

import array
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.model import storage
from proftui.collectors.registry import COLLECTORS
from proftui.collectors.runtime.launch import GRACE_S, LaunchedProcess
from proftui.collectors.runtime.output import OutputLog
from proftui.collectors.runtime.rundir import RunDirectory

from tests.conftest import build_fixture

SPIN_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer"]
MiB = 1 << 20


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TMPDIR for proftui (and this process's run directories), checked empty at the end."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    yield tmp
    assert sorted(p.name for p in tmp.iterdir()) == [], "proftui left files under TMPDIR"


def proftui(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "proftui.tui.cli", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **kwargs)  # type: ignore[call-overload]


def spin_binary() -> Path:
    return build_fixture("life_spin.c", SPIN_FLAGS)


def words(start: int, end: int) -> bytes:
    """life_flood's output between byte offsets start and end (multiples of 8)."""
    return array.array("Q", range(start // 8, end // 8)).tobytes()


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


# -- the bounded output log ----------------------------------------------------------


def test_output_log_keeps_head_and_tail_exactly() -> None:
    data = os.urandom(200_000)
    log = OutputLog(head_bytes=1000, tail_bytes=3000)
    with os.fdopen(os.dup(log.write_fd), "wb", buffering=0) as writer:
        log.start()
        offset = 0
        for size in [1, 999, 7, 2500, 13, 4096, 11] * 20:  # chunks across both limits
            writer.write(data[offset:offset + size])
            offset += size
    assert log.settle(10)
    total = offset
    assert log.total_bytes == total
    assert log.head() == data[:1000]
    assert log.tail(3000) == data[total - 3000:total]
    assert log.tail(10) == data[total - 10:total]
    assert log.tail(10**9) == data[total - 3000:total]
    assert log.dropped_bytes == total - 4000
    assert f"{total - 4000:,} bytes of output dropped" in log.text()
    log.close()


def test_one_gib_of_output_is_kept_exactly_in_memory(tmpdir_env: Path) -> None:
    """A target writing 1 GiB in the TUI's log mode: nothing under TMPDIR, the first
    MiB and the last MiBs kept byte for byte, the rest counted, the target not blocked."""
    binary = build_fixture("life_flood.c", ["-O2"])
    with RunDirectory() as run_dir:
        proc = LaunchedProcess([str(binary), "1024"], run_dir=run_dir.path, output="log")
        info = proc.wait(timeout=300)
        assert list(run_dir.path.iterdir()) == []
        log = proc.output_log
        assert log is not None
        assert info.status == 0, "the target saw a short write"
        assert log.total_bytes == 1024 * MiB
        assert proc.output_head() == words(0, log.head_limit)
        tail = proc.output_tail(log.tail_limit)
        assert tail == words(1024 * MiB - log.tail_limit, 1024 * MiB)
        assert proc.output_tail(24) == words(1024 * MiB - 24, 1024 * MiB)
        assert proc.output_dropped == 1024 * MiB - log.head_limit - log.tail_limit
        proc.close()


def test_collector_in_log_mode_keeps_output_exact(tmpdir_env: Path) -> None:
    """The same through a real collector (the TUI's path): 8 MiB, 3 MiB dropped."""
    if "sampler" not in COLLECTORS:
        pytest.skip("sampler mode is not in this build")
    from proftui.collectors.base import CollectorOptions

    binary = build_fixture("life_flood.c", ["-O2"])
    collector = COLLECTORS["sampler"]([str(binary), "8"], CollectorOptions(output="log"))
    collector.start()
    try:
        profile = collector.wait()
        process = collector.process  # type: ignore[attr-defined]
        assert profile.meta.exit_status == 0
        assert process.output_head() == words(0, MiB)
        assert process.output_tail(4 * MiB) == words(4 * MiB, 8 * MiB)
        assert process.output_dropped == 3 * MiB
    finally:
        collector.stop()


# -- headless runs told to stop ----------------------------------------------------------


def _started(proc: subprocess.Popen[str]) -> int:
    """The target's pid from its "ready PID" line (it runs in proftui's stdout)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("ready "), line
    return int(line.split()[1])


@pytest.mark.parametrize(("how", "sig", "status", "said"), [
    ("", signal.SIGTERM, 143, "killed by signal 15 (SIGTERM)"),
    ("", signal.SIGHUP, 129, "killed by signal 1 (SIGHUP)"),
    ("catch", signal.SIGTERM, 3, "exited with status 3"),
    ("ignore", signal.SIGTERM, 137, f"ignored SIGTERM for {GRACE_S:g} s and was killed by "
                                    "signal 9 (SIGKILL)"),
])
def test_headless_run_passes_the_signal_on(tmpdir_env: Path, how: str, sig: int, status: int,
                                           said: str) -> None:
    """`proftui --text prog` told to stop: the target gets the signal, its own reaction
    decides its status (which proftui returns), a target ignoring it is killed after the
    grace period; the report is still printed and one line says what happened."""
    proc = proftui("--text", str(spin_binary()), *([how] if how else []))
    pid = _started(proc)
    time.sleep(0.5)  # some samples
    sent = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    no_traceback(err)
    assert proc.returncode == status, err
    assert f"proftui: {signal.Signals(sig).name}: target pid {pid} {said}" in err
    assert len(err.strip().splitlines()) == 1, err
    if how == "catch":
        assert out.startswith(f"caught {sig}\n")  # the target's own output, untouched
    assert "life_hot" in out  # the report
    assert not Path(f"/proc/{pid}").exists()
    if how == "ignore":
        assert took >= GRACE_S
    print(f"SIGTERM to exit ({how or 'default'} target): {took:.2f} s")


def test_record_saves_after_sigterm(tmpdir_env: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.proftui"
    proc = proftui("record", "-o", str(out), str(spin_binary()), "catch")
    pid = _started(proc)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    stdout, err = proc.communicate(timeout=60)
    no_traceback(err)
    assert (proc.returncode, stdout) == (3, "caught 15\n")
    assert f"target pid {pid} exited with status 3" in err
    profile = storage.load(out)
    assert profile.meta.exit_status == 3
    assert any(f.function == "life_hot" for f in profile.frames)


# -- headless attach told to stop ----------------------------------------------------------


class PlainTarget:
    """life_spin started by the test itself, for attach mode."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([str(spin_binary())], stdout=subprocess.PIPE, text=True)
        self.pid = _started(self.proc)  # type: ignore[arg-type]

    def assert_untouched(self) -> None:
        """Still running, not traced, not stopped."""
        time.sleep(0.2)
        assert self.proc.poll() is None, "the attached target must keep running"
        status = dict(line.split(":\t", 1) for line in
                      Path(f"/proc/{self.pid}/status").read_text().splitlines() if ":\t" in line)
        assert status["TracerPid"].strip() == "0"
        assert status["State"][0] not in "tT", status["State"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _attached(proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """Wait until proftui's attach helper runs, then let it sample a little."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any("proftui-attach" in _cmdline(child) for child in _children(proc.pid)):
            time.sleep(1.0)
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            if any(w in err for w in ("denied", "not allowed", "ptrace_scope", "paranoid")):
                pytest.skip(f"attach is not allowed here: {err.strip()}")
            raise AssertionError(f"proftui ended before attaching: {err}")
        time.sleep(0.05)
    raise AssertionError("the attach helper never started")


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("method", ["perf", "ptrace"])
@pytest.mark.parametrize(("sig", "status"), [
    (signal.SIGHUP, 129), (signal.SIGTERM, 143), (signal.SIGINT, 0)])
def test_stopped_headless_attach_saves_the_profile(tmpdir_env: Path, tmp_path: Path, method: str,
                                                   sig: int, status: int) -> None:
    """`proftui attach PID -o f` told to stop: it detaches (the target runs on, untraced,
    not stopped), saves the profile and exits 128+N (Ctrl-C is the normal end: 0)."""
    if "attach" not in COLLECTORS:
        pytest.skip("attach mode is not in this build")
    target = PlainTarget()
    out = tmp_path / "attach.proftui"
    try:
        proc = proftui("attach", str(target.pid), "--method", method, "-o", str(out))
        _attached(proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        no_traceback(err)
        assert proc.returncode == status, err
        assert f"saved to {out}" in err
        if sig != signal.SIGINT:
            assert (f"proftui: {signal.Signals(sig).name}: detached from pid {target.pid}, "
                    "which keeps running") in err
        profile = storage.load(out)
        assert any(f.function == "life_hot" for f in profile.frames)
        target.assert_untouched()
    finally:
        target.kill()


def test_headless_attach_text_report_after_sighup(tmpdir_env: Path) -> None:
    if "attach" not in COLLECTORS:
        pytest.skip("attach mode is not in this build")
    target = PlainTarget()
    try:
        proc = proftui("attach", str(target.pid), "--text")
        _attached(proc)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
        no_traceback(err)
        assert proc.returncode == 129, err
        assert "life_hot" in out
        target.assert_untouched()
    finally:
        target.kill()


# -- a closed stdout ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["--text", "--json"])
def test_report_to_a_closed_pipe_keeps_the_targets_status(tmpdir_env: Path, fmt: str) -> None:
    """`proftui --text prog | head`: prog dies of SIGPIPE as in a plain pipeline;
    proftui returns that status (141), says in one line that the report was not
    written, and shows no traceback."""
    binary = build_fixture("life_flood.c", ["-O2"])
    proc = proftui(fmt, str(binary), "64")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.buffer.read(4096)
    proc.stdout.close()  # what `head` does
    err = proc.stderr.read()
    proc.wait(timeout=60)
    no_traceback(err)
    assert proc.returncode == 128 + signal.SIGPIPE, err
    assert re.fullmatch(r"proftui: report not written: standard output was closed \(broken "
                        r"pipe\); target pid \d+ killed by signal 13 \(SIGPIPE\)\n", err), err


def test_report_to_a_closed_pipe_after_a_clean_exit(tmpdir_env: Path) -> None:
    """The target finished on its own (status 5); only the report is lost, and said so."""
    binary = build_fixture("cli_exit.c", ["-O1"])
    proc = proftui("--text", str(binary), "5")
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == "out 2\n"
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=60)
    no_traceback(err)
    assert proc.returncode == 5
    assert err.splitlines()[-1].startswith("proftui: report not written: standard output "
                                           "was closed (broken pipe); target pid ")
    assert err.splitlines()[-1].endswith(" exited with status 5")

