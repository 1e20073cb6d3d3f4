"""The name shortener (tui/names.py) on real libstdc++ names, taken with `nm -C` from the
names_cxx.cpp fixture compiled -O2 here, and on fixed hard cases."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from proftui.tui.names import (
    ELLIPSIS,
    Fitter,
    Labeler,
    components,
    distinct_labels,
    fit,
    fit_distinct,
    next_mode,
    shorten,
)

from tests.conftest import build_fixture

OPERATOR = re.compile(r"operator(\(\)|\[\]|<<=|>>=|<=>|->\*?|<<|>>|<=|>=|<|>)")
HARD_CASES = [  # (demangled, templates mode, params mode)
    ("std::vector<int, std::allocator<int> >::push_back(int const&)",
     "std::vector<…>::push_back(int const&)", "std::vector<…>::push_back(…)"),
    ("bool (anonymous namespace)::Point::operator<((anonymous namespace)::Point const&) const",
     "(anon)::Point::operator<((anon)::Point const&) const",
     "(anon)::Point::operator<(…) const"),
    ("std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
     "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, "
     "char const*)",
     "std::operator<< <…>(std::basic_ostream<…>&, char const*)", "std::operator<< <…>(…)"),
    ("Foo::operator()(int) const", "Foo::operator()(int) const", "Foo::operator()(…) const"),
    ("Foo::operator>(Foo const&)", "Foo::operator>(Foo const&)", "Foo::operator>(…)"),
    ("Foo::operator>>=(int)", "Foo::operator>>=(int)", "Foo::operator>>=(…)"),
    ("Foo::operator<=>(Foo const&) const", "Foo::operator<=>(Foo const&) const",
     "Foo::operator<=>(…) const"),
    ("std::shared_ptr<int>::operator->() const", "std::shared_ptr<…>::operator->() const",
     "std::shared_ptr<…>::operator->() const"),
    ("operator new(unsigned long)", "operator new(unsigned long)", "operator new(…)"),
    ("operator delete[](void*)", "operator delete[](void*)", "operator delete[](…)"),
    ("Foo::operator bool() const", "Foo::operator bool() const", "Foo::operator bool() const"),
    ("main::{lambda(int)#1}::operator()(int) const [clone .constprop.0]",
     "main::{lambda(int)#1}::operator()(int) const [.constprop.0]",
     "main::{lambda(…)#1}::operator()(…) const [.constprop.0]"),
    ("apply_twice(long (*)(long), long)", "apply_twice(long (*)(long), long)",
     "apply_twice(…)"),
    ("f() [clone .isra.0] [clone .cold]", "f() [.isra.0.cold]", "f() [.isra.0.cold]"),
    ("main [clone .cold]", "main [.cold]", "main [.cold]"),
    ("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
     "::basic_string[abi:cxx11](char const*)",
     "std::__cxx11::basic_string<…>::basic_string(char const*)",
     "std::__cxx11::basic_string<…>::basic_string(…)"),
    ("std::function<void (int)>::operator()(int) const",
     "std::function<…>::operator()(int) const", "std::function<…>::operator()(…) const"),
    ("void std::vector<long, std::allocator<long> >::_M_realloc_insert<long>("
     "__gnu_cxx::__normal_iterator<long*, std::vector<long, std::allocator<long> > >, long&&)",
     "std::vector<…>::_M_realloc_insert<…>(__gnu_cxx::__normal_iterator<…>, long&&)",
     "std::vector<…>::_M_realloc_insert<…>(…)"),
    ("unsigned long g<(char)62>(int)", "g<…>(int)", "g<…>(…)"),
    ("typeinfo for char32_t const*", "typeinfo for char32_t const*",
     "typeinfo for char32_t const*"),
    ("non-virtual thunk to std::basic_stringstream<char, std::char_traits<char>, "
     "std::allocator<char> >::~basic_stringstream()",
     "non-virtual thunk to std::basic_stringstream<…>::~basic_stringstream()",
     "non-virtual thunk to std::basic_stringstream<…>::~basic_stringstream()"),
    ("transaction clone for std::runtime_error::runtime_error(char const*)",
     "transaction clone for std::runtime_error::runtime_error(char const*)",
     "transaction clone for std::runtime_error::runtime_error(…)"),
    ("guard variable for f<int>()::cache",
     "guard variable for f<…>()::cache", "guard variable for f<…>()::cache"),
    ("luaV_execute", "luaV_execute", "luaV_execute"),
    ("f(void)", "f(void)", "f(void)"),
    ("memcpy@GLIBC_2.14", "memcpy@GLIBC_2.14", "memcpy@GLIBC_2.14"),
]


@pytest.mark.parametrize(("full", "templates", "params"), HARD_CASES)
def test_hard_cases(full: str, templates: str, params: str) -> None:
    assert shorten(full, "full") == full
    assert shorten(full, "templates") == templates
    assert shorten(full, "params") == params


def test_modes_cycle() -> None:
    assert [next_mode(m) for m in ("full", "templates", "params", "bogus")] == [
        "templates", "params", "full", "full"]


def _nm_names() -> list[str]:
    if shutil.which("g++") is None or shutil.which("nm") is None:
        pytest.skip("g++ or nm is not installed")
    binary = build_fixture("names_cxx.cpp", ["-O2", "-g"], compiler="g++")
    out = subprocess.run(["nm", "-C", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTW":
            names.append(parts[2])
    return names


def test_real_libstdcxx_names() -> None:
    names = _nm_names()
    long_ones = [n for n in names if len(n) > 150]
    assert len(long_ones) >= 8, names  # std::map/std::vector members: the point of the test
    for name in names:
        for mode in ("templates", "params"):
            short = shorten(name, mode)
            assert len(short) <= len(name)
            # Brackets stay balanced; the method's own name is kept.
            bare = OPERATOR.sub("operator", short)
            for a, b in ("<>", "()", "{}"):
                assert bare.count(a) == bare.count(b), short
            if "::" in name and "(" in name:
                method = components(shorten(name, "params").split("(")[0])[-1]
                assert method.split("<")[0] in name
    # Every long libstdc++ name shrinks to at most a few dozen characters in params mode.
    shortened = {n: shorten(n, "params") for n in long_ones}
    assert all(len(s) <= 70 for s in shortened.values()), shortened
    assert "std::_Rb_tree<…>::_M_get_insert_unique_pos(…)" in shortened.values()
    assert "std::vector<…>::_M_realloc_insert<…>(…)" in shortened.values()
    lambdas = [n for n in names if "{lambda(int)#1}" in n]
    assert lambdas and shorten(lambdas[0], "params").startswith("main::{lambda(…)#1}::operator()")
    anon = [n for n in names if "(anonymous namespace)::Point" in n and "_M_get_insert" in n]
    assert anon and shorten(anon[0], "templates") == (
        "std::_Rb_tree<…>::_M_get_insert_unique_pos((anon)::Point const&)")


def test_overloads_stay_distinct() -> None:
    """The fixture's two Grid::fill overloads collide in params mode: both fall back to
    templates mode, where their parameters tell them apart; other names stay short."""
    names = _nm_names()
    fills = [n for n in names if "::fill(" in n]
    assert len(fills) == 2
    assert shorten(fills[0], "params") == shorten(fills[1], "params") == (
        "shapes::Grid<…>::fill(…)")
    labels = distinct_labels(names, "params")
    assert len(set(labels.values())) == len(set(names))
    assert {labels[f] for f in fills} == {"shapes::Grid<…>::fill(std::map<…> const&)",
                                          "shapes::Grid<…>::fill(std::vector<…> const&, long)"}
    assert labels["square_mod(long)"] == "square_mod(…)"


@pytest.mark.parametrize(("name", "width", "expected"), [
    ("std::_Rb_tree<…>::_M_insert_unique(…)", 30, "std::…::_M_insert_unique(…)"),
    ("std::_Rb_tree<…>::_M_insert_unique(…)", 24, "…::_M_insert_unique(…)"),
    ("a::b::c::d::method(…)", 17, "a::…::method(…)"),
    ("std::_Rb_tree<…>::_M_insert_unique(…)", 21, "…_M_insert_unique(…)"),
    ("short", 10, "short"),
    ("a_very_long_c_function_name", 12, "a_very_l…ame"),
])
def test_fit_keeps_the_last_component(name: str, width: int, expected: str) -> None:
    out = fit(name, width)
    assert out == expected
    assert len(out) <= width


def test_fit_never_exceeds_width() -> None:
    name = "std::_Rb_tree<…>::_M_emplace_hint_unique<…>(std::_Rb_tree_const_iterator<…>)"
    for width in range(0, len(name) + 2):
        out = fit(name, width)
        assert len(out) <= width
        if width >= 20:
            assert out.startswith("_M_emplace") or "_M_emplace" in out
        if 0 < width < len(name):
            assert ELLIPSIS in out


def test_instantiations_that_still_collide_are_numbered() -> None:
    a = "std::vector<int, std::allocator<int> >::size() const"
    b = "std::vector<long, std::allocator<long> >::size() const"
    c = "std::vector<long, std::allocator<long> >::push_back(long const&)"
    for mode in ("templates", "params"):
        labels = distinct_labels([a, b, c, a], mode)
        assert labels[a] == "std::vector<…>::size() const #1"
        assert labels[b] == "std::vector<…>::size() const #2"
        assert labels[c] == shorten(c, mode)
    assert distinct_labels([a, b], "full") == {a: a, b: b}


def test_labeler_matches_distinct_labels_as_names_arrive() -> None:
    names = [n for n, _t, _p in HARD_CASES] + [
        "std::vector<int, std::allocator<int> >::size() const",
        "std::vector<long, std::allocator<long> >::size() const",
        "a::f(int)", "a::f(long)"]
    for mode in ("templates", "params"):
        labeler = Labeler(mode)
        labeler.add(names[:5])
        labeler.add(names)  # a later snapshot: old names again, and new ones
        expected = distinct_labels(names, mode)
        assert {n: labeler.label(n) for n in names} == expected
        assert labeler.label("a::f(int)") == "a::f(int)"  # the overloads show parameters
    assert Labeler("params").label("b::g(int)") == "b::g(…)"  # added on first use


@pytest.mark.parametrize(("width", "calls", "name_at_least", "module"), [
    (80, True, 29, True), (80, False, 37, True), (70, True, 29, False),
    (150, True, 60, True), (200, False, 110, True)])
def test_flat_columns_give_way_to_the_name(width: int, calls: bool, name_at_least: int,
                                           module: bool) -> None:
    """At 80 columns the function column had 16 characters; numbers shrink first."""
    from proftui.tui.widgets.flat_table import COLUMNS, MODULE, NAME, FlatTable

    table = FlatTable()
    table.has_calls = calls
    widths = table._widths(width)
    assert sum(widths) == width - 1
    assert widths[NAME] >= name_at_least, widths
    assert (widths[MODULE] > 0) == module
    assert (widths[4] > 0) == calls
    assert all(w >= 6 for w, (_k, label, _) in zip(widths, COLUMNS, strict=True)
               if label in ("Self%", "Total%"))


def test_status_line_cut() -> None:
    from proftui.tui.widgets.status_line import middle_cut

    assert middle_cut("abcdefghij", 10) == "abcdefghij"
    assert middle_cut("abcdefghij", 7) == "abc…hij"
    assert middle_cut("abcdefghij", 1) == "…"


def test_every_libstdcxx_export() -> None:
    """Every dynamic symbol of the installed libstdc++ (thousands of real names: thunks,
    typeinfo, operators, versioned): shortened names stay balanced, never grow, are
    stable when shortened again, and fit any width."""
    if shutil.which("g++") is None or shutil.which("nm") is None:
        pytest.skip("g++ or nm is not installed")
    library = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], capture_output=True,
                             text=True).stdout.strip()
    out = subprocess.run(["nm", "-DC", library], capture_output=True, text=True).stdout
    names = [line[19:] for line in out.splitlines() if len(line) > 19 and line[17] in "TtWV"]
    if len(names) < 1000:
        pytest.skip(f"libstdc++ not found or without symbols ({library})")
    specials = 0
    for name in names:
        for mode in ("templates", "params"):
            short = shorten(name, mode)
            bare = OPERATOR.sub("operator", short)
            assert all(bare.count(a) == bare.count(b) for a, b in ("<>", "()", "{}")), name
            assert len(short) <= len(name), name
            assert shorten(short, mode) == short, name
            assert len(fit(short, 30)) <= 30
        if name.startswith(("typeinfo for ", "vtable for ", "non-virtual thunk to ")):
            specials += 1
            assert shorten(name, "params").startswith(name.split(" ")[0]), name
    assert specials > 50


MAP_LB = "std::map<…>::lower_bound(long const&)"
TREE_LB = "std::_Rb_tree<…>::lower_bound(long const&)"


@pytest.mark.parametrize("width", range(12, 44))
def test_cut_labels_stay_distinct(width: int) -> None:
    """One cut made both `std::…::lower_bound(long const&)`: cut otherwise, or numbered."""
    other = "std::…::lower_bound(…)"  # a label already showing what the fallback would be
    shown = fit_distinct([MAP_LB, TREE_LB, other], width)
    assert len(set(shown.values())) == 3, shown
    assert all(len(v) <= width for v in shown.values()), shown


def test_fitter_separates_a_label_that_arrives_later() -> None:
    fitter = Fitter()
    assert fitter.add([MAP_LB], 32) is False
    assert fitter.get(MAP_LB, 32) == "std::…::lower_bound(long const&)"
    assert fitter.add([TREE_LB], 32) is True  # the first label is now cut another way
    assert fitter.get(MAP_LB, 32) != fitter.get(TREE_LB, 32)
    assert fitter.get(MAP_LB, 32) == "std::map<…>::lower_bound(…)"


def test_a_cut_scope_is_marked() -> None:
    name = ("std::__unguarded_partition<…>(__gnu_cxx::__normal_iterator<…>, "
            "__gnu_cxx::__ops::_Iter_less_iter)")
    assert fit(name, 32) == "std::__unguarded_partition<…>(…)"  # parameters go first
    for width in range(4, 32):
        out = fit(name, width)
        assert out.startswith(ELLIPSIS) and len(out) <= width, out
