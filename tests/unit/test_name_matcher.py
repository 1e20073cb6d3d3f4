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


def test_plain_words_agree_with_the_expression_on_letters_that_fold() -> None:
    """A plain word is matched as a lowered substring; on names with letters that
    IGNORECASE folds and lower() does not (long s, Kelvin sign, dotted I), the
    expression decides, so the verdicts stay the expression's."""
    names = ["\u017ftd::move", "std::move", "\u212aernel", "kernel", "\u0130nit", "init",
             "INIT", "vector<int>", "a.b", "x\u0131y"]
    for pattern in ["st", "k", "i", "in", "vector<int>", "a.b", "xiy", "\u017f", "\u212a",
                    "\u0130", "\u0131", "INIT", ""]:
        matcher = NameMatcher(pattern)
        for subset in (names, [n for n in names if n.isascii()], names[:1]):
            assert matcher.each(subset) == [matcher.matches(n) for n in subset], pattern
    assert NameMatcher("st").each(names[:2]) == [True, True]  # IGNORECASE: long s is s
    assert NameMatcher("k").each(names[2:4]) == [True, True]  # and Kelvin is k


def test_narrows_only_plain_lengthened_patterns() -> None:
    assert narrows("pa", "par") and narrows("pa", "paR") and narrows("", "p")
    assert not narrows("par", "pa")  # shorter: widens
    assert not narrows("pa", "pa|x") and not narrows("pa", "pa.") and not narrows("p", "p(")
    assert not narrows("pa", "xpa")
    # What narrows claims holds: every name the longer pattern matches, the shorter does.
    for before, after in [("pa", "par"), ("pa", "paR"), ("p", "pars")]:
        long, short = NameMatcher(after).each(NAMES), NameMatcher(before).each(NAMES)
        assert all(s for s, lg in zip(short, long, strict=True) if lg)
