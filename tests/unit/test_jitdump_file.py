"""collectors/symbols/jitdump.py on files written here: records read as the file grows,
whole records only; a load moved; garbage, a bad magic, another pid's header, every
truncation of a good file: at most one warning, never an exception."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.symbols import perfmap
from proftui.collectors.symbols.jitdump import JitDump


def header(pid: int | None = None) -> bytes:
    return struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0,
                       os.getpid() if pid is None else pid, 0, 0)


def load(start: int, size: int, name: bytes, index: int = 0) -> bytes:
    body = struct.pack("<IIQQQQ", 1, 1, start, start, size, index) + name + b"\0" + b"\x90" * size
    return struct.pack("<IIQ", 0, 16 + len(body), 0) + body


def move(old: int, new: int, size: int) -> bytes:
    body = struct.pack("<IIQQQQQ", 1, 1, new, old, new, size, 0)
    return struct.pack("<IIQ", 1, 16 + len(body), 0) + body


@pytest.fixture
def dump_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setattr(perfmap, "RECHECK_S", 0.0)
    path = tmp_path / f"jit-{os.getpid()}.dump"
    path.write_bytes(b"")
    path.chmod(0o600)
    yield path


def opened(path: Path, pid: int | None = None) -> JitDump:
    return JitDump(str(path), os.geteuid(), lambda start, end: 0x5000 <= start < 0x5010, pid=pid)


def test_read_as_it_grows_whole_records_only(dump_file: Path) -> None:
    whole = header() + load(0x7000, 0x20, b"first") + load(0x8000, 0x10, b"second")
    dump = opened(dump_file, os.getpid())
    with open(dump_file, "ab") as f:
        f.write(whole[:60])  # the header and part of a record
        f.flush()
        assert dump.lookup(0x7004) is None
        f.write(whole[60:])
    assert dump.lookup(0x7004) == (0x7000, "first")
    assert dump.lookup(0x8008) == (0x8000, "second")
    with open(dump_file, "ab") as f:
        f.write(move(0x7000, 0x9000, 0x20))
    assert dump.lookup(0x9010) == (0x9000, "first")
    assert dump.lookup(0x7004) is None
    assert dump.warning() is None


def test_entries_over_file_backed_code_and_cut_records_warn_once(dump_file: Path) -> None:
    good = load(0x7000, 0x20, b"jit_spin")
    dump_file.write_bytes(header() + load(0x5000, 0x10, b"evil") + good
                          + struct.pack("<IIQ", 0, 5000, 0))
    dump = opened(dump_file)
    assert dump.lookup(0x7004) == (0x7000, "jit_spin")
    assert dump.lookup(0x5004) is None
    warning = dump.warning()
    assert warning is not None and "1 entry over file-backed code" in warning, warning
    assert "cut short" in warning, warning


@pytest.mark.parametrize("data, why", [
    (b"\x7fELF" + b"\0" * 60, "not a jitdump"),
    (struct.pack(">IIIIIIQQ", 0x4A695444, 1, 40, 62, 0, 1, 0, 0), "another byte order"),
    (header(pid=1) + load(0x7000, 0x20, b"x"), "written by pid 1"),
    (header() + struct.pack("<IIQ", 0, 3, 0) + load(0x7000, 0x20, b"x"), "claims 3 bytes"),
])
def test_garbage_is_one_warning(dump_file: Path, data: bytes, why: str) -> None:
    dump_file.write_bytes(data)
    dump = opened(dump_file, os.getpid())
    assert dump.lookup(0x7004) is None
    warning = dump.warning()
    assert warning is not None and why in warning, warning


def test_every_truncation_and_corruption_never_raises(dump_file: Path) -> None:
    whole = header() + load(0x7000, 0x20, b"first") + move(0x7000, 0x9000, 0x20)
    for cut in range(len(whole) + 1):
        dump_file.write_bytes(whole[:cut])
        dump = opened(dump_file)
        dump.lookup(0x9004)
        dump.warning()
    for at in range(len(whole)):
        dump_file.write_bytes(whole[:at] + bytes([whole[at] ^ 0xFF]) + whole[at + 1:])
        dump = opened(dump_file)
        dump.lookup(0x9004)
        assert dump.warning() is None or dump.warning().count("\n") == 0
