"""tui/search.py: the pattern the flat filter, tree search and flame search share."""

from __future__ import annotations

from proftui.tui.search import NameMatcher, narrows

NAMES = ["main", "Parse::run", "parse_line", "parse_line", "operator()(int)", "",
         "caf\u00e9_hash", "x" * 5000]


def test_each_agrees_with_matches_name_by_name() -> None:
    for pattern in ["parse", "Parse", "^p", "line$", "operator()(", "caf\u00e9", "x{4000}",
                    "a|main", "(", ""]:
        matcher = NameMatcher(pattern)
        assert matcher.each(NAMES) == [matcher.matches(n) for n in NAMES], pattern
    assert NameMatcher("parse").each(NAMES)[:4] == [False, True, True, True]  # smart case
    assert NameMatcher("Parse").each(NAMES)[:4] == [False, True, False, False]
    assert NameMatcher("operator()(").error and NameMatcher("operator()(").each(NAMES)[4]


def test_narrows_only_plain_lengthened_patterns() -> None:
    assert narrows("pa", "par") and narrows("pa", "paR") and narrows("", "p")
    assert not narrows("par", "pa")  # shorter: widens
    assert not narrows("pa", "pa|x") and not narrows("pa", "pa.") and not narrows("p", "p(")
    assert not narrows("pa", "xpa")
    # What narrows claims holds: every name the longer pattern matches, the shorter does.
    for before, after in [("pa", "par"), ("pa", "paR"), ("p", "pars")]:
        long, short = NameMatcher(after).each(NAMES), NameMatcher(before).each(NAMES)
        assert all(s for s, lg in zip(short, long, strict=True) if lg)
