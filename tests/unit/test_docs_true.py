"""docs/architecture.md and the README's folder table stay true: every file and folder
they name exists, and every layer folder of the package is named in the table."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
# A path as the docs write one: words joined by slashes, ending in a known file suffix or
# a slash (a folder).  `runtime/native/` is built by the install, not kept in git.
PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+"
                  r"(?:\.(?:py|c|h|md|tcss|sh|toml)\b|/(?![\w.])))")
BUILT = {"native/"}


def _tracked() -> list[str]:
    skip = {".git", ".venv", "build", "__pycache__", "node_modules"}
    out = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if skip & set(rel.parts):
            continue
        out.append(rel.as_posix() + ("/" if path.is_dir() else ""))
    return out


def _named(text: str) -> set[str]:
    names = set()
    for match in PATH.finditer(text):
        name = match[1]
        if "://" in text[match.start():match.end() + 3] or name.startswith(("http", "www.")):
            continue
        if name.endswith("/") and len(name) <= 2:
            continue
        names.add(name)
    return names


def _missing(names: set[str]) -> list[str]:
    tracked = _tracked()
    missing = []
    for name in sorted(names):
        if name in BUILT or any(name.endswith(b) for b in BUILT):
            continue
        if not any(t == name or t.endswith("/" + name) for t in tracked):
            missing.append(name)
    return missing


def test_every_file_architecture_names_exists() -> None:
    names = _named(ARCHITECTURE.read_text())
    assert len(names) > 30, sorted(names)  # the pattern still reads the page
    assert not _missing(names), _missing(names)


def test_every_folder_of_the_readme_table_exists() -> None:
    text = README.read_text()
    table = text[text.index("| folder | layer |"):]
    table = table[:table.index("\n\n")]
    names = _named(table)
    assert not _missing(names), _missing(names)


def test_the_readme_table_names_every_layer_folder() -> None:
    """Every package folder and C runtime folder has a row (or shares one)."""
    text = README.read_text()
    table = text[text.index("| folder | layer |"):]
    table = table[:table.index("\n\n")]
    folders = [f"collectors/{p.name}/" for p in (ROOT / "collectors").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()]
    folders += [f"csrc/{p.name}/" for p in (ROOT / "csrc").iterdir() if p.is_dir()]
    folders += [f"tui/{p.name}/" for p in (ROOT / "tui").iterdir()
                if p.is_dir() and (p / "__init__.py").exists()]
    unnamed = [f for f in folders
               if f"`{f}`" not in table and f"`{f.split('/', 1)[1]}`" not in table]
    assert not unnamed, unnamed
