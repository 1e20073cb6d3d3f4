"""A call-tree node's costs as a sequence: views of one row of the tree's cost columns
(`CallTree.selfs`, `CallTree.totals`; collectors/model/calltree.py), made per access,
never stored."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from proftui.collectors.model.calltree import CallNode


class Costs(Sequence[float]):
    """One node's costs across metrics, read and written through the tree's columns."""

    __slots__ = ("_columns", "_index")

    def __init__(self, columns: list[array], index: int) -> None:
        self._columns = columns
        self._index = index

    def __len__(self) -> int:
        return len(self._columns)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> list[float]: ...

    def __getitem__(self, i: int | slice) -> float | list[float]:
        if isinstance(i, slice):
            return [c[self._index] for c in self._columns[i]]
        return self._columns[i][self._index]

    def __setitem__(self, i: int, value: float) -> None:
        self._columns[i][self._index] = value

    def __iter__(self) -> Iterator[float]:
        index = self._index
        return (c[index] for c in self._columns)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(list(self))


class CostRow:
    """A `CallNode` attribute: the node's row of the tree's `selfs` or `totals` columns,
    read as `Costs` and assigned one value per metric."""

    __slots__ = ("_columns",)

    def __init__(self, columns: str) -> None:
        self._columns = attrgetter(columns)

    def __get__(self, node: CallNode, owner: type | None = None) -> Costs:
        return Costs(self._columns(node.tree), node.index)

    def __set__(self, node: CallNode, values: Sequence[float]) -> None:
        for column, value in zip(self._columns(node.tree), values, strict=True):
            column[node.index] = value
