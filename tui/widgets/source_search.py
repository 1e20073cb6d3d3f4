"""Search in a listing, as `less` does: a regex, case-insensitive when all lower case.

Pure functions of the rows' text (no Textual): the source view keeps a
`Search` and asks it for the next or previous matching row and for the spans
to highlight.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """`pattern` as a regex; case-insensitive unless it has an upper-case letter
    (less's and vim's "smart case").  Raises re.error on a bad pattern."""
    flags = 0 if any(c.isupper() for c in pattern) else re.IGNORECASE
    return re.compile(pattern, flags)


@dataclass
class Search:
    """One pattern over one list of row texts: the matching rows, in order."""

    pattern: str
    regex: re.Pattern[str]
    rows: list[int] = field(default_factory=list)  # indexes of matching rows, ascending

    @classmethod
    def over(cls, pattern: str, texts: Sequence[str]) -> Search:
        """The rows of `texts` matching `pattern` (re.error when it is not a regex)."""
        regex = compile_pattern(pattern)
        return cls(pattern, regex, [i for i, t in enumerate(texts) if regex.search(t)])

    def again(self, texts: Sequence[str]) -> Search:
        """The same pattern over new texts (a refreshed listing)."""
        return Search(self.pattern, self.regex,
                      [i for i, t in enumerate(texts) if self.regex.search(t)])

    def next_row(self, row: int, step: int, include: bool = False) -> tuple[int, bool] | None:
        """The matching row after (`step` 1) or before (-1) `row`, or at it when
        `include`; wraps around the ends.  (row, wrapped), or None without matches."""
        if not self.rows:
            return None
        if step > 0:
            i = bisect_left(self.rows, row) if include else bisect_right(self.rows, row)
            return (self.rows[i], False) if i < len(self.rows) else (self.rows[0], True)
        i = bisect_right(self.rows, row) if include else bisect_left(self.rows, row)
        return (self.rows[i - 1], False) if i > 0 else (self.rows[-1], True)

    def rank(self, row: int) -> int | None:
        """1-based rank of `row` among the matching rows, None when it does not match."""
        i = bisect_left(self.rows, row)
        return i + 1 if i < len(self.rows) and self.rows[i] == row else None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of every non-empty match in `text`."""
        return [m.span() for m in self.regex.finditer(text) if m.end() > m.start()]

    def status(self, row: int) -> str:
        """"match k of n" at a matching `row`, "n matches" elsewhere, or "no match"."""
        if not self.rows:
            return f"/{self.pattern}: no match"
        rank = self.rank(row)
        if rank is None:
            return f"/{self.pattern}: {len(self.rows)} matches"
        return f"/{self.pattern}: match {rank} of {len(self.rows)}"
