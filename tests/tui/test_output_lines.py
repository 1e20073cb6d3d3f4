"""The output panel's bookkeeping without a terminal: the collector's `OutputLog` read by
a follower (`read_from`, `last_lines`) and the panel's bounded lines (`OutputLines`)."""

from __future__ import annotations

import os
import random

import pytest
from proftui.collectors.runtime.output import OutputLog
from proftui.tui.widgets.output_panel import MARKER, OutputLines


def _stream(size: int) -> bytes:
    rng = random.Random(size)
    return bytes(rng.randrange(256) for _ in range(size))


def _written(data: bytes, head: int, tail: int, chunk: int = 997) -> OutputLog:
    """An OutputLog (limits `head`/`tail`) that has drained `data` written in chunks."""
    log = OutputLog(head_bytes=head, tail_bytes=tail)
    fd = log.write_fd
    writer = os.dup(fd)
    log.start()
    for i in range(0, len(data), chunk):
        os.write(writer, data[i:i + chunk])
    os.close(writer)
    assert log.settle(10.0), "the drain thread never saw EOF"
    assert log.ended
    return log


@pytest.mark.parametrize("max_bytes", [1, 100, 5000, 1 << 20])
def test_read_from_is_exact_head_first_then_newest(max_bytes: int) -> None:
    data = _stream(20_000)
    log = _written(data, head=3000, tail=7000)
    assert log.total_bytes == len(data) and log.dropped_bytes == 10_000
    offset, got = 0, []
    for _ in range(10_000):
        skipped, chunk, after = log.read_from(offset, max_bytes)
        if not chunk and not skipped:
            break
        start = offset + skipped
        assert chunk == data[start:start + len(chunk)] and after == start + len(chunk)
        got.append((start, len(chunk)))
        offset = after
    assert offset == len(data)
    # the head comes whole and in order; the tail only its newest max_bytes (or all kept)
    head_read = sum(n for s, n in got if s < 3000)
    assert head_read == 3000
    first_tail = min(s for s, _n in got if s >= 3000)
    assert first_tail == len(data) - min(7000, max_bytes) or max_bytes == 1


def test_read_from_follows_small_output_without_gaps() -> None:
    data = b"".join(b"line %d\n" % i for i in range(50))
    log = _written(data, head=1 << 20, tail=4 << 20)
    assert log.read_from(0, 1 << 20) == (0, data, len(data))
    assert log.read_from(len(data), 100) == (0, b"", len(data))
    assert log.read_from(10, 1 << 20) == (0, data[10:], len(data))


def test_last_lines_read_back_escaped() -> None:
    data = b"".join(b"line %d\n" % i for i in range(30)) + b"\x1b[2Jboom\tx\xff\n"
    log = _written(data, head=100, tail=1 << 20)
    lines = log.last_lines(5)
    assert lines == ["line 26", "line 27", "line 28", "line 29", r"\x1b[2Jboom     x\xff"]
    assert log.last_lines(0) == []


def test_lines_invariants_with_small_limits() -> None:
    model = OutputLines(head_lines=3, tail_lines=4)
    fed = 0
    for i in range(20):
        chunk = b"".join(b"L%d\n" % (i * 10 + j) for j in range(i % 4 + 1))
        model.feed(0, chunk)
        fed += len(chunk)
        if i == 7:  # two gaps in a row: one marker, which later falls out of the tail
            model.feed(12345, b"")
            model.feed(55, b"")
            fed += 12345 + 55
    model.feed(0, b"partial")
    model.finish()
    fed += len(b"partial")
    entries = model.entries()
    texts = [t for t, _g in entries]
    assert texts[:3] == ["L0", "L10", "L11"]
    assert texts[-1] == "partial" and len(entries) <= 3 + 1 + 4
    assert model.shown_bytes + model.not_kept_bytes == fed
    assert sum(g for _t, g in entries) == model.not_kept_bytes
    assert texts[3] == MARKER.format(model.not_kept_bytes)


def test_bulk_feed_equals_line_by_line() -> None:
    """The fast path (lines that would only pass through the tail are counted unread)
    ends in the same state as feeding them one by one."""
    lines = [b"row %d" % i for i in range(1000)]
    bulk, single = OutputLines(head_lines=10, tail_lines=50), OutputLines(10, 50)
    bulk.feed(0, b"\n".join(lines) + b"\n")
    for line in lines:
        single.feed(0, line + b"\n")
    assert bulk.entries() == single.entries()
    assert (bulk.shown_bytes, bulk.not_kept_bytes, bulk.lines_seen) == (
        single.shown_bytes, single.not_kept_bytes, single.lines_seen)


def test_long_line_is_cut_into_pieces_of_8192() -> None:
    model = OutputLines()
    model.feed(0, b"x" * 20_000)
    assert model.entries() and all(len(t) == 8192 for t, _g in model.entries())


def test_control_sequences_and_markup_show_as_text() -> None:
    model = OutputLines()
    model.feed(0, b"\x1b]0;title\x07[red]x[/red]\r\n")
    assert model.entries()[-1][0] == r"\x1b]0;title\x07[red]x[/red]"
