"""A module's function table as the symbolizer keeps it: starts and sizes as machine
words, raw names as one UTF-8 blob read a name at a time.

A big stripped C++ library has ~100,000 functions (libclickhouse.so: 104,637); as lists
of Python ints and strs its table held 15.5 MiB for as long as the module was known,
7.0 MiB here.  Names are read only for the functions samples land in.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

ENCODING = ("utf-8", "surrogateescape")  # ELF names are bytes; any byte survives
_NUL = re.compile(b"\0")


class Names(Sequence[str]):
    """Raw names `0..n-1`, kept NUL-joined (a name holds no NUL: ELF strings end there)."""

    def __init__(self, blob: bytes, count: int) -> None:
        """`blob`: `count` names joined by NUL."""
        self.blob = blob
        # ends[i]: the offset just past name i (its NUL, or the blob's end), found in
        # place: no list of every name, which was most of a big table's peak
        ends = array("Q", (found.end() for found in _NUL.finditer(blob)))
        if count:
            ends.append(len(blob) + 1)
        self._ends = ends
        if len(ends) != count:
            raise ValueError(f"{len(ends)} names where {count} were expected")

    @classmethod
    def of(cls, names: Sequence[str]) -> Names:
        return cls("\0".join(names).encode(*ENCODING), len(names))

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        ends = self._ends
        end = ends[i] - 1  # IndexError past the end, as a list's
        start = ends[i - 1] if i % len(ends) else 0
        return self.blob[start:end].decode(*ENCODING)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Names):
            return self.blob == other.blob and len(self) == len(other)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # equal to lists, as a list: unhashable

    def __repr__(self) -> str:
        return f"Names({list(self)!r})"

    def __iter__(self) -> Iterator[str]:
        return iter(self.blob.decode(*ENCODING).split("\0") if len(self) else ())


Table = tuple[list[int], list[int], list[str]]  # starts, sizes, raw names, as built
CompactTable = tuple[array, array, Names]  # the same, as kept


def compact(starts: Sequence[int], sizes: Sequence[int], names: Sequence[str]) -> CompactTable:
    """A table built as lists, in the form the symbolizer keeps."""
    return array("Q", starts), array("Q", sizes), Names.of(names)
