"""A ClickHouse that never finishes, or answers malformed, holds proftui no longer than
its deadlines: a query or a push's start ends in one line, exit status 2, within
PROFTUI_FLEET_TIMEOUT (25 s; scaled down here: the real values are held by
tests/unit/test_fleet_guard.py); after the target ends, at most 10 s more (the real
value, against a stopped real server), the rest kept in the spool and said."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.clickhouse import Server, driver_missing
from tests.helpers.fleet import CLI, servers_or_skip
from tests.helpers.hostile_clickhouse import hostile_server
from tests.helpers.targets import spin_binary

TIMEOUT_S = 2.0  # PROFTUI_FLEET_TIMEOUT for the fake servers
SLACK_S = 15.0  # the interpreter's start and exit on a loaded machine
FLUSH_S = 10.0  # the push's real deadline after the target's end (not scaled)


def _env(tmp_path: Path, timeout: float | None = TIMEOUT_S) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # a private spool
    env.pop("PROFTUI_FLEET_TIMEOUT", None)
    if timeout is not None:
        env["PROFTUI_FLEET_TIMEOUT"] = str(timeout)
    return env


def _timed(args: list[str], env: dict[str, str], memory: int | None = None
           ) -> tuple[subprocess.CompletedProcess[str], float]:
    """The CLI's result and seconds; `memory` bounds its address space (bytes)."""

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    began = time.monotonic()
    result = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env,
                            timeout=TIMEOUT_S + SLACK_S + 20, preexec_fn=limit)
    return result, time.monotonic() - began


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("proftui: "), result.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def _driver() -> None:
    reason = driver_missing()
    if reason:
        pytest.skip(reason)


GiB = 1 << 30
# (mode, options, what the line says); `memory`: the CLI's address space, which the
# driver's tuple for the rows claimed would pass
CASES = [
    ("progress", {}, r"no complete answer within 2 s \(PROFTUI_FLEET_TIMEOUT"),
    ("drip", {}, r"no complete answer within 2 s"),
    ("mute", {}, r"no complete answer within 2 s"),
    ("bad_hello", {}, r"malformed answer: text that is not UTF-8"),
    ("bad_exception", {}, r"malformed answer: text that is not UTF-8"),
    ("huge_block", {}, r"malformed answer: a block of 17,179,869,184 rows"),
    ("huge_block", {"rows": 1 << 28, "memory": GiB},
     r"malformed answer: a block of 268,435,456 rows"),
    ("huge_block", {"kind": "Array(String)", "rows": 1, "data": (1 << 34).to_bytes(8, "little")},
     r"malformed answer: a column of 17,179,869,184 strings"),
    ("huge_block", {"kind": "Array(JSON)", "rows": 3}, r"a column of type 'Array\(JSON\)'"),
]


@pytest.mark.parametrize("mode,options,said", CASES,
                         ids=[m + "".join(f"-{k}" for k in o) for m, o, _s in CASES])
def test_query_and_push_start_end_in_one_line(mode: str, options: dict, said: str,
                                              tmp_path: Path) -> None:
    marker = tmp_path / "started"
    env = _env(tmp_path)
    options = dict(options)
    memory = options.pop("memory", None)
    with hostile_server(mode, **options) as server:
        report, report_s = _timed(["report", server.url(query="from=-1h")], env, memory)
        push, push_s = _timed(["record", "--push", server.url(), "-o",
                               str(tmp_path / "p.proftui"), "sh", "-c", f"touch {marker}"],
                              env, memory)
    print(f"{mode} {options}: report {report_s:.2f} s, record --push {push_s:.2f} s")
    for result, seconds in ((report, report_s), (push, push_s)):
        line = _one_line(result)
        assert re.search(said, line), line
        assert f"127.0.0.1:{server.port}" in line
        assert seconds < TIMEOUT_S + SLACK_S, seconds
    assert not marker.exists()  # the target never started


def test_the_timeout_is_checked(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "PROFTUI_FLEET_TIMEOUT": "soon"}
    result = subprocess.run([*CLI, "report", "clickhouse://127.0.0.1:1/prof"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert "PROFTUI_FLEET_TIMEOUT='soon'" in _one_line(result)


# -- a real server stopped while a push runs --------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    for servers in servers_or_skip(1):
        yield servers[0]


class Lines:
    """A stream's lines as they come, each with the monotonic time it arrived."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.lines: list[tuple[float, str]] = []
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait(self, pattern: str, timeout_s: float) -> tuple[float, str] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for when, line in list(self.lines):
                if re.search(pattern, line):
                    return when, line
            time.sleep(0.02)
        return None

    def join(self) -> None:
        self._thread.join(timeout=10)


def _spool_batches(cache: Path) -> list[Path]:
    return sorted(cache.glob("proftui/spool/push-*/*.batch"))


def _marker_rows(server: Server, database: str) -> int:
    from clickhouse_driver import Client

    try:
        rows = Client("127.0.0.1", port=server.tcp).execute(
            f"SELECT count() FROM {database}.proftui_samples WHERE batch != 0")
    except Exception:
        return 0
    return int(rows[0][0])


def _wait_for(check, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_stopped_server_holds_the_end_of_a_push_at_most_10_s(server: Server,
                                                              tmp_path: Path) -> None:
    """A real server SIGSTOPped mid-run, while an interval's insert is in flight: after
    the target ends, proftui says what was not sent and where it is kept within 10 s
    (the real deadline) and exits with the target's status."""
    binary = spin_binary()
    env = _env(tmp_path, timeout=None)  # the real deadlines
    cache = tmp_path / "cache"
    proc = subprocess.Popen([*CLI, "record", "--push", server.url("stopped"), "--every", "1",
                             "-o", str(tmp_path / "s.proftui"), str(binary), "catch"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stdout, stderr = Lines(proc.stdout), Lines(proc.stderr)
    assert server.process is not None
    stopped = False
    try:
        ready = stdout.wait(r"^ready \d+", 60)
        assert ready is not None, stderr.lines
        target = int(ready[1].split()[1])
        assert _wait_for(lambda: _marker_rows(server, "stopped") >= 1, 60)  # pushes arrive
        server.process.send_signal(signal.SIGSTOP)
        stopped = True
        # An interval waits in the spool: the loop's insert of it is in flight.
        assert _wait_for(lambda: _spool_batches(cache), 60)
        os.kill(target, signal.SIGTERM)
        ended = time.monotonic()
        summary = stderr.wait(r"^proftui: pushed", FLUSH_S + 40)
        proc.wait(timeout=60)
        exited = time.monotonic()
    finally:
        if stopped:
            server.process.send_signal(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr.join()
    text = "\n".join(line for _when, line in stderr.lines)
    assert summary is not None, text
    said_s, line = summary[0] - ended, summary[1]
    print(f"stopped server: summary {said_s:.2f} s after the target's end, exit "
          f"{exited - ended:.2f} s after")
    assert proc.returncode == 3, text  # the target's own status
    assert "Traceback" not in text, text
    assert said_s < FLUSH_S + 4.0, (said_s, text)  # + noticing the end, on a loaded machine
    kept = re.search(r"not sent \((.*)\): kept in (\S+), sent by the next push", line)
    assert kept is not None, line
    assert "no complete answer in the 10 s allowed after the run" in kept.group(1), line
    assert list(Path(kept.group(2)).glob("*.batch")), line  # the rest stays in the spool
