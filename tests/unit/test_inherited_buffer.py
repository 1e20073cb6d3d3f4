"""PROFTUI_BUFFER_BYTES in proftui's own environment (issue 26): held to --buffer's
range with one warning, as --buffer is (10^14 stalled the target and wrote gigabytes)."""

from __future__ import annotations

import pytest
from proftui.collectors.runtime.launch import (
    BUFFER_MAX_BYTES,
    BUFFER_MIN_BYTES,
    inherited_buffer,
)


def test_a_budget_in_range_passes_unchanged() -> None:
    assert inherited_buffer("33554432") == ("33554432", "")


@pytest.mark.parametrize(("value", "used"), [("100000000000000", BUFFER_MAX_BYTES),
                                             ("1", BUFFER_MIN_BYTES)])
def test_out_of_range_is_capped_with_one_line(value: str, used: int) -> None:
    kept, warning = inherited_buffer(value)
    assert kept == str(used)
    assert warning.startswith(f"PROFTUI_BUFFER_BYTES={value} in the environment is outside "
                              "--buffer's range") and "\n" not in warning


@pytest.mark.parametrize("value", ["abc", "-5", "1e14", ""])
def test_not_a_number_is_dropped(value: str) -> None:
    kept, warning = inherited_buffer(value)
    assert kept is None and "is not a number of bytes: ignored" in warning
