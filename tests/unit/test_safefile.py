"""collectors/safefile.py (issue 26): symlinks another user planted in a sticky
directory, FIFOs with no reader, devices, in one place every writer calls."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.safefile import check_output, read_regular, write_output

NOBODY = 65534


def sticky_dir(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # /tmp's mode
    return shared


def test_another_users_symlink_in_a_sticky_directory_is_not_followed(tmp_path: Path) -> None:
    """The attack: uid N plants /tmp/victim.proftui -> a file of ours; our write must
    not land in that file (nor replace it: the old code renamed over the target)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a symlink to another user (lchown)")
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    link = sticky_dir(tmp_path) / "victim.proftui"
    link.symlink_to(precious)
    os.lchown(link, NOBODY, NOBODY)
    for call in (lambda: check_output(link), lambda: write_output(link, b"profile")):
        with pytest.raises(ProftuiError, match="refusing to follow a symlink owned by uid "
                                               f"{NOBODY} in the sticky"):
            call()
    assert precious.read_text() == "keep me\n" and link.is_symlink()
    assert sorted(p.name for p in link.parent.iterdir()) == ["victim.proftui"]


def test_our_own_symlink_in_a_sticky_directory_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = sticky_dir(tmp_path) / "mine"
    link.symlink_to(target)
    assert write_output(link, b"new") == link
    assert target.read_bytes() == b"new" and link.is_symlink()
    assert sorted(p.name for p in link.parent.iterdir()) == ["mine"]  # no temporary left


def test_the_temporary_file_is_made_where_the_user_said(tmp_path: Path) -> None:
    """A new file or a regular one is replaced from beside the name given, never from the
    directory a symlinked parent leads to (realpath)."""
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    named = tmp_path / "named"
    named.symlink_to(real_dir)
    seen: list[str] = []
    original = os.replace

    def spy(src: str, dst: str) -> None:
        seen.append(os.fspath(dst))
        original(src, dst)

    os.replace = spy  # type: ignore[assignment]
    try:
        write_output(named / "run.proftui", b"x")
    finally:
        os.replace = original  # type: ignore[assignment]
    assert seen == [str(named / "run.proftui")]
    assert (real_dir / "run.proftui").read_bytes() == b"x"


def test_a_fifo_with_no_reader_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ProftuiError, match="a FIFO with no reader"):
        write_output(fifo, b"data")
    with pytest.raises(ProftuiError, match="not a regular file"):
        write_output(fifo, b"data", regular_only=True)
    assert time.monotonic() - start < 2
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_with_a_reader_gets_the_bytes(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first
    reader = threading.Thread(target=lambda: got.append(_read_all(fd)))
    try:
        reader.start()
        write_output(fifo, b"x" * 200_000)  # more than a pipe holds: the write waits
    finally:
        reader.join(timeout=30)
        os.close(fd)
    assert got == [b"x" * 200_000]


def _read_all(fd: int) -> bytes:
    """Everything until the writer closes (polling: the writer may not have opened yet)."""
    chunks, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        if not chunk:
            if chunks:
                break  # the writer closed
            time.sleep(0.01)  # no writer yet
            continue
        chunks.append(chunk)
    return b"".join(chunks)


def test_dev_stdout_as_a_pipe_is_written(tmp_path: Path) -> None:
    """`export -o /dev/stdout | cat`: /dev/stdout is a symlink to the pipe."""
    read_end, write_end = os.pipe()
    saved = os.dup(1)
    os.dup2(write_end, 1)
    try:
        write_output("/dev/stdout", b"to the pipe\n")
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(write_end)
    assert os.read(read_end, 100) == b"to the pipe\n"
    os.close(read_end)


def test_reading_a_fifo_does_not_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "settings.json"
    os.mkfifo(fifo)
    with pytest.raises(ProftuiError, match="not a regular file"):
        read_regular(fifo, 100)
    (tmp_path / "ok").write_bytes(b"0123456789")
    assert read_regular(tmp_path / "ok", 4) == b"01234"  # limit + 1: "too big" is visible
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing", 4)
