"""One file reached under two names is one module (merged-/usr systems: the loader
says /lib/x86_64-linux-gnu/libc.so.6, /proc/PID/maps /usr/lib/x86_64-linux-gnu/libc.so.6)."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.symbols.maps import AddressSpace, Mapping


def test_a_range_seen_under_a_second_name_of_the_same_file_keeps_its_module(
        tmp_path: Path) -> None:
    real = tmp_path / "usr" / "lib" / "libx.so"
    real.parent.mkdir(parents=True)
    real.write_bytes(b"\x7fELF")
    (tmp_path / "lib").symlink_to(tmp_path / "usr" / "lib")
    alias = tmp_path / "lib" / "libx.so"
    space = AddressSpace(None)
    space.add(Mapping(0x1000, 0x2000, 0, "r-xp", str(alias)))
    space.add(Mapping(0x1000, 0x2000, 0, "r-xp", str(real)))
    assert space.modules() == [str(alias)]
    found = space.resolve(0x1800)
    assert found is not None and found[0] == str(alias)


def test_a_range_reused_by_another_file_takes_the_new_module(tmp_path: Path) -> None:
    first, second = tmp_path / "a.so", tmp_path / "b.so"
    first.write_bytes(b"\x7fELF")
    second.write_bytes(b"\x7fELF")
    space = AddressSpace(None)
    space.add(Mapping(0x1000, 0x2000, 0, "r-xp", str(first)))
    space.add(Mapping(0x1000, 0x2000, 0, "r-xp", str(second)))
    assert space.resolve(0x1800) is not None and space.resolve(0x1800)[0] == str(second)
