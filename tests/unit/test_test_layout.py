"""The tests' own layout: a test module is never imported as a library. What several
tests share lives in tests/helpers (or is a fixture of a conftest.py), so every Python
file of tests/, benchmarks/ and docs/ imports from tests only conftest and helpers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("tests.conftest", "tests.helpers")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in `path`, at any depth (imports inside functions
    too); `from tests import x` counts as importing tests.x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "tests":
                found += [(node.lineno, f"tests.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def python_files() -> list[Path]:
    files = [p for p in (ROOT / "tests").rglob("*.py") if "fixtures" not in p.parts]
    for folder in ("benchmarks", "docs"):
        files += (ROOT / folder).rglob("*.py")
    return sorted(files)


def test_imports_from_tests_are_of_conftest_or_helpers() -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}: {module}"
             for path in python_files() for line, module in imported_modules(path)
             if (module == "tests" or module.startswith("tests."))
             and not any(module == s or module.startswith(f"{s}.") for s in SHARED)]
    assert not wrong, "test modules imported as libraries (move what they share to " \
                      "tests/helpers or a conftest.py fixture):\n" + "\n".join(wrong)


def test_no_module_imports_a_test_module() -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}: {module}"
             for path in python_files() for line, module in imported_modules(path)
             if module.rsplit(".", 1)[-1].startswith("test_")]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text("def f():\n    from tests.unit.test_y import z\n\n"
                      "from tests import reference\n")
    assert sorted(imported_modules(source)) == [(2, "tests.unit.test_y"), (4, "tests.reference")]
