"""Reading the file an importer was given."""

from __future__ import annotations

from pathlib import Path

from proftui.collectors.errors import ProftuiError


def read_profile(path: Path) -> bytes:
    """All the bytes of profile file `path` (ProftuiError, one line, when it cannot be read)."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
