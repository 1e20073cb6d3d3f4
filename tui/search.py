"""How a typed pattern matches names: the flat filter and the tree search share it.

A pattern is a regular expression, case-insensitive when it has no capital
letter (smart case, as in less and ripgrep).  An invalid expression (a C++
name typed as is: `operator()`, `vector<int>`) still matches, as a plain
substring, and `error` says why the expression was not used.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, repeat
from operator import contains
from typing import Protocol

REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


def narrows(before: str, after: str) -> bool:
    """Whether every name `after` matches also matches `before`: both plain text (no
    regex syntax) and `after` lengthens `before` (smart case keeps the subset: a
    capital letter only makes the match stricter)."""
    return after.startswith(before) and not REGEX_SYNTAX.intersection(after)


class NameMatcher:
    """`NameMatcher("push_back").matches(name)`; `error` is set for an invalid regex.
    `found(name)` is truthy where `matches` is True, without the bool (for map())."""

    __slots__ = ("_ascii_only", "_fold", "_needle", "error", "found", "matches", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.error = ""
        flags = 0 if any(c.isupper() for c in pattern) else re.IGNORECASE
        self.matches: Callable[[str], bool]
        self.found: Callable[[str], object]
        # A plain substring test does the same as the expression (`each` runs it in C):
        # `_needle` is that substring, `_fold` whether names are lowered first, and
        # `_ascii_only` whether that holds only for ASCII names (IGNORECASE folds some
        # non-ASCII letters that lower() does not).
        self._fold = bool(flags)
        self._needle: str | None = None
        self._ascii_only = True
        try:
            search = re.compile(pattern, flags).search
        except (re.error, RecursionError, OverflowError) as exc:
            self.error = str(getattr(exc, "msg", exc))
            needle = pattern.lower() if flags else pattern
            self._needle, self._ascii_only = needle, False  # a substring, by definition
            if flags:
                self.matches = lambda name: needle in name.lower()
            else:
                self.matches = lambda name: pattern in name
            self.found = self.matches
            return
        self.found = search
        self.matches = lambda name: search(name) is not None
        if pattern.isascii() and not REGEX_SYNTAX.intersection(pattern):
            self._needle = pattern

    def each(self, names: Sequence[str]) -> list[bool]:
        """The verdict on every name; the loops run in C (map, compress): a plain word
        is a substring test (50,000 names in ~8 ms), an expression runs once per
        distinct name (~30 ms)."""
        needle = self._needle
        if needle is not None and (not self._ascii_only or all(map(str.isascii, names))):
            folded = map(str.lower, names) if self._fold else names
            return list(map(contains, folded, repeat(needle)))
        unique = list(dict.fromkeys(names))
        hits = set(compress(unique, map(self.found, unique)))
        return list(map(hits.__contains__, names))


class Named(Protocol):
    """What FrameMatcher reads of a frame (the model's Frame; this module imports nothing)."""

    @property
    def function(self) -> str: ...


class FrameMatcher:
    """A search pattern as a test on frame ids (one regex call per frame, remembered):
    `table` lists the frames by id (the model's FrameTable)."""

    def __init__(self, pattern: str, table: Iterable[Named]) -> None:
        self.matcher = NameMatcher(pattern)
        self.table = table
        self.frames = list(table)
        self.verdict: dict[int, bool] = {}

    def __call__(self, frame_id: int) -> bool:
        hit = self.verdict.get(frame_id)
        if hit is None:
            hit = self.verdict[frame_id] = frame_id >= 0 and self.matcher.matches(
                self.frames[frame_id].function)
        return hit

    def every_frame(self) -> list[bool]:
        """The verdict of every frame id at once (NameMatcher.each), remembered for
        later calls."""
        verdicts = self.matcher.each([frame.function for frame in self.frames])
        self.verdict = dict(enumerate(verdicts))
        return verdicts

    def mask(self) -> bytearray:
        """Every frame id's verdict as bytes (1: a match), not remembered: for one
        native walk over a tree."""
        return bytearray(self.matcher.each([frame.function for frame in self.frames]))
