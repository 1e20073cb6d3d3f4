"""The fleet client's deadlines at their real values (25 s for a query or a push's start,
10 s after the run), on a simulated clock: a server dripping a byte every 0.5 s or
sending progress forever is cut exactly there, whatever the socket's own timeout; a
deadline brought forward by another thread wakes a blocked read; a server's message is
one printable line."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet import guard
from proftui.collectors.fleet.client import server_message
from proftui.collectors.fleet.guard import Deadline, DeadlinePassed, DeadlineSocket

DOCS = Path(__file__).resolve().parents[2] / "docs" / "fleet.md"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeSocket:
    """A socket whose peer behaves as `step` says, on a simulated clock: each call
    returns (seconds it took, bytes it gave), None meaning it waited out its timeout."""

    def __init__(self, clock: Clock, step: tuple[float, int] | None) -> None:
        self.clock, self.step = clock, step
        self.timeout: float | None = 60.0
        self.calls = 0
        self.slices: list[float] = []

    def gettimeout(self) -> float | None:
        return self.timeout

    def settimeout(self, value: float | None) -> None:
        self.timeout = value
        assert value is not None
        self.slices.append(value)

    def recv_into(self, buffer: bytearray, nbytes: int = 0, flags: int = 0) -> int:
        self.calls += 1
        if self.step is None:
            assert self.timeout is not None
            self.clock.now += self.timeout
            raise TimeoutError("timed out")
        seconds, size = self.step
        self.clock.now += seconds
        return size


def _read_until_cut(step: tuple[float, int] | None, budget: float,
                    idle: float = 60.0) -> tuple[float, FakeSocket, type[BaseException]]:
    clock = Clock()
    deadline = Deadline(clock=clock)
    fake = FakeSocket(clock, step)
    sock = DeadlineSocket(fake, deadline)
    sock.settimeout(idle)  # the driver's send_receive_timeout
    start = clock.now
    buffer = bytearray(1 << 20)
    with deadline.until(clock.now + budget, "within budget"), \
            pytest.raises((DeadlinePassed, TimeoutError)) as caught:
        while True:
            sock.recv_into(buffer)
    return clock.now - start, fake, caught.type


def test_the_real_deadlines() -> None:
    assert guard.timeout_s() == 25.0 and guard.FLUSH_S == 10.0
    from proftui.collectors.fleet.pusher import FLUSH_TIMEOUT_S

    assert FLUSH_TIMEOUT_S == 10.0
    docs = DOCS.read_text()
    assert "PROFTUI_FLEET_TIMEOUT" in docs and "25 s" in docs and "10 s" in docs


def test_the_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guard.ENV, "90")
    assert guard.timeout_s() == 90.0
    for bad in ("0", "-1", "soon", "nan", "inf"):
        monkeypatch.setenv(guard.ENV, bad)
        with pytest.raises(ProftuiError, match="PROFTUI_FLEET_TIMEOUT"):
            guard.timeout_s()


def test_a_byte_every_half_second_is_cut_at_25_s() -> None:
    took, fake, kind = _read_until_cut((0.5, 1), guard.timeout_s())
    assert kind is DeadlinePassed and took == 25.0 and fake.calls == 50
    assert max(fake.slices) <= guard.SLICE_S


def test_progress_forever_is_cut_at_25_s() -> None:
    took, fake, kind = _read_until_cut((0.01, 4096), guard.timeout_s())
    assert kind is DeadlinePassed and 25.0 <= took < 25.02 and fake.calls >= 2499


def test_silence_ends_at_the_deadline_or_the_socket_timeout() -> None:
    took, _fake, kind = _read_until_cut(None, guard.timeout_s())
    assert kind is DeadlinePassed and took == pytest.approx(25.0)
    took, _fake, kind = _read_until_cut(None, guard.timeout_s(), idle=3.0)
    assert kind is TimeoutError and took == pytest.approx(3.0)  # the driver's own timeout
    took, _fake, kind = _read_until_cut(None, guard.FLUSH_S)
    assert kind is DeadlinePassed and took == pytest.approx(10.0)


def test_nested_deadlines_and_limits() -> None:
    clock = Clock()
    deadline = Deadline(clock=clock)
    with deadline.until(clock.now + 25, "outer"):
        with deadline.until(clock.now + 40, "inner, later"):
            assert deadline.left() == 25 and deadline.why() == "outer"
        with deadline.until(clock.now + 5, "inner"):
            assert deadline.left() == 5 and deadline.why() == "inner"
        assert deadline.left() == 25
        deadline.limit(clock.now + 10, "after the run")
        assert deadline.left() == 10 and deadline.why() == "after the run"
    assert deadline.left() == 10  # a limit holds for good
    clock.now += 10
    assert deadline.passed()


def test_a_limit_set_by_another_thread_wakes_a_blocked_read() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(60.0)
        deadline = Deadline()
        sock = DeadlineSocket(a, deadline)
        outcome: list[object] = []

        def read() -> None:
            with deadline.until(time.monotonic() + 60, "a minute"):
                try:
                    sock.recv_into(bytearray(16))
                except BaseException as exc:
                    outcome.append(exc)
                outcome.append(time.monotonic())

        reader = threading.Thread(target=read)
        reader.start()
        began = time.monotonic()
        deadline.limit(began + 0.2, "after the run")
        reader.join(timeout=30)
        assert not reader.is_alive()
        assert isinstance(outcome[0], DeadlinePassed)
        waited = float(outcome[1]) - began  # type: ignore[arg-type]
        assert 0.2 <= waited < 0.2 + guard.SLICE_S + 2.0, waited


def test_a_peer_that_never_reads_cannot_hold_a_write() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        deadline = Deadline()
        sock = DeadlineSocket(a, deadline)
        sock.settimeout(60.0)
        began = time.monotonic()
        with deadline.until(began + 0.3, "0.3 s"), pytest.raises(DeadlinePassed):
            sock.sendall(b"x" * (16 << 20))
        assert time.monotonic() - began < 0.3 + 2.0


def test_a_server_message_is_one_printable_line() -> None:
    from clickhouse_driver.errors import ServerException

    exc = ServerException("Code: 60. DB::Exception: table \r\x1b[2Jgone\u2028now\x85"
                          + "x" * 1000 + "\nsecond line. Stack trace:\n\n0. f", 60)
    text = server_message(exc)
    assert text.isprintable() and len(text.splitlines()) == 1 and len(text) <= 303
    assert text.startswith("table ??[2Jgone?now?x")
