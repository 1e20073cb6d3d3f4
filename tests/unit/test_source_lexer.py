"""The source view's lexer: pygments' choice for the file, without importing every
lexer module pygments has (the first source view waited 0.3 s for that)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from proftui.tui.widgets.source_view import _lexer
from pygments.lexers import get_lexer_by_name, guess_lexer_for_filename  # type: ignore[import-untyped]
from pygments.lexers._mapping import LEXERS  # type: ignore[import-untyped]
from pygments.util import ClassNotFound  # type: ignore[import-untyped]

CASES = [("a.c", "int main(void) { return 0; }"), ("a.h", "#include <x>\nclass A {};"),
         ("b.h", "int f(void);"), ("m.h", "@interface A\n@end"), ("a.cpp", "int x;"),
         ("x.cc", "template <class T> T f();"), ("x.hpp", "namespace a {}"),
         ("x.lua", "local x = 1"), ("x.s", "mov %eax, %ebx"), ("x.S", ".globl f"),
         ("x.f90", "program x"), ("x.rs", "fn main() {}"), ("x.go", "package main"),
         ("m.m", "@interface A @end"), ("Makefile", "all:"), ("CMakeLists.txt", "project(x)"),
         ("x.py", "import os"), ("x.unknown-ext", "int x;")]


def pattern_names() -> list[str]:
    """A file name for every primary pattern pygments knows ("*.c" -> "x.c")."""
    names = set()
    for _module, _name, _aliases, patterns, _mimes in LEXERS.values():
        for pattern in patterns:
            if not any(c in pattern[1:] for c in "*?["):
                names.add(pattern.replace("*", "x", 1))
    return sorted(names)


def pygments_choice(name: str, code: str) -> type:
    """What the view used pygments' guess for: its lexer, or C when it finds none."""
    try:
        return type(guess_lexer_for_filename(name, code))
    except ClassNotFound:
        return type(get_lexer_by_name("c"))


@pytest.mark.parametrize("name, code", CASES)
def test_the_same_lexer_as_pygments_guess(name: str, code: str) -> None:
    assert type(_lexer(name, code)) is pygments_choice(name, code)


def test_every_file_pattern_gets_the_same_lexer() -> None:
    wrong = [(name, type(_lexer(name, "int x;")).__name__)
             for name in pattern_names()
             if type(_lexer(name, "int x;")) is not pygments_choice(name, "int x;")]
    assert not wrong


def test_lexing_a_c_file_loads_only_its_lexer() -> None:
    code = ("import sys\n"
            "from proftui.tui.widgets.source_view import _lexer\n"
            "_lexer('/src/prog.c', 'int main(void) { return 0; }')\n"
            "print(sum(m.startswith('pygments.lexers.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert int(out.stdout) < 10  # pygments' guess imports some 250
