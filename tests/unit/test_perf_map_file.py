"""collectors/symbols/perfmap.py on files written here: a map read as it grows, whole
lines only; garbage, control characters and long names; the owner and mode checks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.symbols import perfmap
from proftui.collectors.symbols.perfmap import MAX_NAME, PerfMap


@pytest.fixture
def map_file(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """/tmp/perf-PID.map of this process (0600), removed afterwards; re-reads unthrottled."""
    monkeypatch.setattr(perfmap, "RECHECK_S", 0.0)
    path = Path(perfmap.PERF_MAP.format(pid=os.getpid()))
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    yield path
    path.unlink(missing_ok=True)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_read_as_it_grows_whole_lines_only(map_file: Path) -> None:
    pm = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False)
    assert pm.lookup(0x1000) is None and not pm.grew()
    append(map_file, b"1000 10 first\n2000 1")
    assert pm.lookup(0x100F) == (0x1000, "first")
    assert pm.lookup(0x2000) is None  # its line is still being written
    append(map_file, b"0 py::second:/x.py\n")
    assert pm.grew()
    assert pm.lookup(0x2005) == (0x2000, "py::second:/x.py")
    assert pm.lookup(0x2100) is None and pm.warning() is None


def test_names_a_lookup_read_are_announced_once(map_file: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup for a new stack may read the names an earlier stack missed: grew()
    still says so once (the collector looks at the earlier stacks again then), and
    reads a grown file itself even inside the re-read throttle."""
    pm = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False)
    assert pm.lookup(0x1000) is None
    append(map_file, b"1000 10 first\n")
    assert pm.lookup(0x1001) == (0x1000, "first")  # the read happened here
    assert pm.grew() and not pm.grew()
    monkeypatch.setattr(perfmap, "RECHECK_S", 3600.0)
    append(map_file, b"2000 10 second\n")
    assert pm.grew() and not pm.grew()
    assert pm.lookup(0x2001) == (0x2000, "second")


def test_garbage_lines_are_counted_once_in_one_warning(map_file: Path) -> None:
    long = b"n" * (3 * MAX_NAME)
    append(map_file, b"\x00\xff junk\nzz 10 bad\n3000 0 empty\n-10 5 neg\n"
                     b"4000 10 tab\x01name\n5000 10 " + long + b"\n6000 10\n")
    pm = PerfMap(os.getpid(), os.geteuid(), lambda start, end: 0x5000 <= start < 0x5010)
    assert pm.lookup(0x4001) == (0x4000, "tab?name")
    assert pm.lookup(0x5001) is None  # over file-backed code: never used
    warning = pm.warning()
    assert warning is not None and "5 malformed lines" in warning
    assert "1 entry over file-backed code" in warning


def test_long_names_are_cut(map_file: Path) -> None:
    append(map_file, b"7000 10 " + b"x" * (2 * MAX_NAME) + b"\n")
    found = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False).lookup(0x7000)
    assert found is not None and len(found[1]) == MAX_NAME


@pytest.mark.parametrize("mode, uid_delta, why", [
    (0o620, 0, "writable by others"), (0o602, 0, "writable by others"),
    (0o600, 1, "owned by uid"),
])
def test_untrusted_file_is_refused(map_file: Path, mode: int, uid_delta: int,
                                   why: str) -> None:
    append(map_file, b"1000 10 first\n")
    os.chmod(map_file, mode)
    pm = PerfMap(os.getpid(), os.geteuid() + uid_delta, lambda start, end: False)
    assert pm.lookup(0x1000) is None
    warning = pm.warning()
    assert warning is not None and why in warning and "not used" in warning


def test_symlink_is_refused(map_file: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.map"
    real.write_bytes(b"1000 10 first\n")
    map_file.unlink()
    map_file.symlink_to(real)
    pm = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False)
    assert pm.lookup(0x1000) is None
    assert "cannot be opened safely" in (pm.warning() or "")


def test_a_container_tmp_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """Read through a container's root, /tmp must be a real folder there: a symlink
    would be followed in our root, not the container's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "perf-7.map").write_bytes(b"1000 10 planted\n")
    os.chmod(elsewhere / "perf-7.map", 0o644)
    root = tmp_path / "root"
    root.mkdir()
    (root / "tmp").symlink_to(elsewhere)
    pm = PerfMap(4242, os.geteuid(), lambda start, end: False,
                 place=perfmap.JitPlace(str(root), 7, None))
    assert pm.path == f"{root}/tmp/perf-7.map"
    assert pm.lookup(0x1001) is None
    warning = pm.warning()
    assert warning is not None and "symlink in the target's root" in warning


def test_a_map_written_before_the_process_started_is_refused(map_file: Path) -> None:
    append(map_file, b"1000 10 old\n")
    started = map_file.stat().st_mtime + 60  # the process started a minute after
    pm = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False,
                 place=perfmap.JitPlace("", os.getpid(), started))
    assert pm.lookup(0x1001) is None
    warning = pm.warning()
    assert warning is not None and "60 s before the process started" in warning
    fresh = PerfMap(os.getpid(), os.geteuid(), lambda start, end: False,
                    place=perfmap.jit_place(os.getpid()))  # this process: started before
    assert fresh.lookup(0x1001) == (0x1000, "old")
