"""How a typed pattern matches names: the flat filter and the tree search share it.

A pattern is a regular expression, case-insensitive when it has no capital
letter (smart case, as in less and ripgrep).  An invalid expression (a C++
name typed as is: `operator()`, `vector<int>`) still matches, as a plain
substring, and `error` says why the expression was not used.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class NameMatcher:
    """`NameMatcher("push_back").matches(name)`; `error` is set for an invalid regex."""

    __slots__ = ("error", "matches", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.error = ""
        flags = 0 if any(c.isupper() for c in pattern) else re.IGNORECASE
        self.matches: Callable[[str], bool]
        try:
            search = re.compile(pattern, flags).search
        except (re.error, RecursionError, OverflowError) as exc:
            self.error = str(getattr(exc, "msg", exc))
            if flags:
                needle = pattern.lower()
                self.matches = lambda name: needle in name.lower()
            else:
                self.matches = lambda name: pattern in name
            return
        self.matches = lambda name: search(name) is not None
