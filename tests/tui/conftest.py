"""Fixtures of the TUI tests."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator

import pytest

from tests.tui.test_tmux import PROFTUI, Terminal


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    """The tmux sessions a test opens, closed at its end (skips without tmux)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    if not PROFTUI.exists():
        pytest.skip(f"the proftui command is not installed beside {sys.executable}")
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()
