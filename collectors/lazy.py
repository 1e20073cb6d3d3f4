"""A mapping whose values are made on first lookup: keys known up front, modules
imported only when a command uses them (the registry of collectors, the exporters)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

V = TypeVar("V")


class LazyMapping(Mapping[str, V]):
    """key -> loader(); each loader runs at most once."""

    def __init__(self, loaders: dict[str, Callable[[], V]]) -> None:
        self._loaders = loaders
        self._values: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = self._loaders[key]()
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)
