"""Function tables kept between runs (collectors/symbols/tablecache.py): read back
they equal a fresh build; a changed file, another name for a stripped file, or a
damaged entry is never believed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.symbols.symbolizer import Symbolizer

from tests.conftest import build_fixture


def table(path: Path, cache: Path | None) -> tuple[list[int], list[int], list[str]]:
    symbols = Symbolizer(cache, use_cache=cache is not None).module(str(path))
    return symbols._starts, symbols._sizes, symbols._raw_names


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.functions"))


@pytest.fixture
def stripped(tmp_path: Path) -> Path:
    """A stripped copy of a fixture: its table comes from .dynsym and .eh_frame."""
    if shutil.which("strip") is None:
        pytest.skip("strip (binutils) is not installed")
    binary = tmp_path / "prog"
    shutil.copy(build_fixture("line_hot.c", ["-O2", "-g"]), binary)
    subprocess.run(["strip", str(binary)], check=True)
    return binary


def test_a_cached_table_equals_a_fresh_one(stripped: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fresh = table(stripped, None)
    assert any(name.startswith("prog+0x") for name in fresh[2]), fresh[2]
    assert table(stripped, cache) == fresh  # built, then saved
    [entry] = entries(cache)
    assert entry.stat().st_mode & 0o777 == 0o600
    before = entry.stat().st_mtime_ns
    assert table(stripped, cache) == fresh  # read back
    assert entry.stat().st_mtime_ns == before, "a good entry was written again"


def test_a_changed_file_is_read_again(stripped: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    table(stripped, cache)
    [entry] = entries(cache)
    entry.write_bytes(entry.read_bytes().replace(b"prog+0x", b"evil+0x"))
    assert any(n.startswith("evil+0x") for n in table(stripped, cache)[2])  # it is read
    stat = stripped.stat()
    os.utime(stripped, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert table(stripped, cache) == table(stripped, None)


def test_another_name_for_the_same_file_gets_its_own_names(stripped: Path,
                                                           tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    table(stripped, cache)
    other = tmp_path / "renamed"
    os.link(stripped, other)
    names = table(other, cache)[2]
    assert any(n.startswith("renamed+0x") for n in names)
    assert not any(n.startswith("prog+0x") for n in names)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "huge-header",
                                    "a-name-split"])
def test_a_damaged_entry_is_rebuilt(stripped: Path, tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    fresh = table(stripped, cache)
    [entry] = entries(cache)
    data = entry.read_bytes()
    entry.write_bytes({"truncate": data[:len(data) // 2],
                       "garbage": data[:8] + os.urandom(len(data) - 8),
                       "empty": b"",
                       "huge-header": data[:8] + b"\xff\xff\xff\x7f" + data[12:],
                       # a NUL inside the last name: one name more than the header says
                       "a-name-split": data[:-2] + b"\0" + data[-1:]}[damage])
    assert table(stripped, cache) == fresh


def test_alias_tables_are_kept_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The names each address of libc has (memcpy and its aliases), read back from the
    cache directory equal to a fresh read, and the file's symbols not read again."""
    from proftui.collectors.symbols import symbolizer

    libc = next((line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                 if "/libc.so" in line or "/libc-" in line), None)
    if libc is None:
        pytest.skip("this process maps no libc.so (a static or musl Python)")
    cache = tmp_path / "cache"
    module = Symbolizer(cache).module(libc)
    read = module.debug_path or module.readable  # its debug file's .symtab, if installed
    fresh = symbolizer._alias_table(read)
    assert fresh, "libc has no function with two names?"
    assert module._alias_table() == fresh  # read, then saved
    reads = []
    monkeypatch.setattr(symbolizer, "_alias_table", lambda path: reads.append(path) or {})
    assert Symbolizer(cache).module(libc)._alias_table() == fresh  # from the cache
    assert reads == []
    assert Symbolizer(None, use_cache=False).module(libc)._alias_table() == {}  # no cache
    assert reads == [read]
