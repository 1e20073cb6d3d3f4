"""The directories a module's debug info says its sources live in.

Each DWARF compile unit names its compile directory (DW_AT_comp_dir) and its
primary source file (DW_AT_name).  Both directories are roots under which a
source path named by that module is plausibly the module's own source (see
collectors/model/sourcefiles.py, which refuses everything else).  Read with
pyelftools, top DIEs only, and only when a source file is first read.
"""

from __future__ import annotations

import os
import stat

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

MAX_UNITS = 200_000  # a bound on the walk for hostile files


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def source_roots(debug_path: str) -> frozenset[str]:
    """Absolute compile directories and primary-source directories of `debug_path`'s
    units (empty when it has no readable DWARF)."""
    try:
        fd = os.open(debug_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return frozenset()
    roots: set[str] = set()
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return frozenset()
            dwarf = ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False)
            for count, unit in enumerate(dwarf.iter_CUs()):
                if count >= MAX_UNITS:
                    break
                attributes = unit.get_top_DIE().attributes
                comp_dir = _text(attributes["DW_AT_comp_dir"].value) \
                    if "DW_AT_comp_dir" in attributes else None
                name = _text(attributes["DW_AT_name"].value) \
                    if "DW_AT_name" in attributes else None
                if comp_dir and os.path.isabs(comp_dir):
                    roots.add(os.path.normpath(comp_dir))
                if name:
                    if not os.path.isabs(name) and comp_dir:
                        name = os.path.join(comp_dir, name)
                    if os.path.isabs(name):
                        roots.add(os.path.dirname(os.path.normpath(name)))
    except (OSError, ELFError, Exception):  # a hostile file can break pyelftools in many ways
        pass  # whatever was found before the damage still counts
    return frozenset(roots)
