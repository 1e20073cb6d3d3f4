"""CI's static checks: `ruff check .` and `mypy` (config in pyproject.toml) report nothing.

mypy checks the package as it installs (proftui.collectors, proftui.tui); it
reads the link tree build/mypy/proftui/{collectors,tui} made here, and keeps
its cache in build/mypy-cache so a rerun takes a few seconds.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(module: str) -> list[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return [sys.executable, "-m", module]


def link_tree() -> Path:
    """build/mypy/proftui/{collectors,tui} -> the repository's folders (idempotent)."""
    package = ROOT / "build" / "mypy" / "proftui"
    package.mkdir(parents=True, exist_ok=True)
    for name in ("collectors", "tui"):
        link = package / name
        if not (link.is_symlink() and link.resolve() == ROOT / name):
            if link.is_symlink() or link.exists():
                link.unlink()
            os.symlink(os.path.relpath(ROOT / name, package), link)
    return package.parent


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_reports_nothing() -> None:
    result = run([*_tool("ruff"), "check", "--no-cache", "."])
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_reports_nothing() -> None:
    link_tree()
    result = run(_tool("mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
    modules = sum(1 for name in ("collectors", "tui") for _ in (ROOT / name).rglob("*.py"))
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    assert checked is not None and int(checked[1]) >= modules, result.stdout  # every module


def test_mypy_resolves_the_package_imports() -> None:
    """A type error against a package module is caught: imports of proftui resolve to the
    link tree, not to Any (so the check above cannot pass vacuously)."""
    tree = link_tree()
    bad = "from proftui.collectors.model.profile import Frame\nFrame(function=1)\n"
    result = subprocess.run(
        [*_tool("mypy"), "--config-file", "", "--no-incremental", "--cache-dir", os.devnull,
         "-c", bad], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MYPYPATH": str(tree)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Argument "function" to "Frame" has incompatible type "int"' in result.stdout
