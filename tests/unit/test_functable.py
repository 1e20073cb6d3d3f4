"""collectors/symbols/functable.py: a function table kept compact reads back the very
names and addresses it was built from."""

from __future__ import annotations

import pytest
from proftui.collectors.symbols.functable import Names, compact


def test_names_read_back_as_built() -> None:
    built = ["main", "", "_ZN2ns1fEv", "caf\udcc3", "x" * 300, "last"]  # an undecodable byte too
    names = Names.of(built)
    assert len(names) == len(built)
    assert [names[i] for i in range(len(built))] == built
    assert [names[i] for i in range(-len(built), 0)] == built
    assert list(names) == built and names[1:3] == built[1:3]
    assert names == built and names == Names.of(list(built))
    assert names != built[:-1]
    with pytest.raises(IndexError):
        names[len(built)]


@pytest.mark.parametrize("built", [[], [""], ["only"]])
def test_tables_of_none_or_one_name(built: list[str]) -> None:
    names = Names.of(built)
    assert list(names) == built and len(names) == len(built)


def test_another_count_of_names_is_refused() -> None:
    with pytest.raises(ValueError, match="3 names where 2"):
        Names(b"a\0b\0c", 2)


def test_compact_keeps_starts_sizes_and_names() -> None:
    starts, sizes, names = compact([0x10, 0x20], [16, 0], ["f", "g"])
    assert list(starts) == [0x10, 0x20] and list(sizes) == [16, 0] and names == ["f", "g"]
