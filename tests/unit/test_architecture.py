"""The dependency contract of DESIGN.md: tui -> collectors, never back; no Textual in collectors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "collectors").rglob("*.py")), ids=str)
def test_collectors_never_import_the_front_end(path: Path) -> None:
    forbidden = imported_modules(path) & {"tui", "textual", "rich"}
    assert not forbidden, f"{path.relative_to(ROOT)} imports {forbidden}"
