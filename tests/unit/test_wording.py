"""Counts in notes agree with their nouns and verbs (collectors/wording.py)."""

from __future__ import annotations

from proftui.collectors.attach.notes import cut_warnings, lost_warnings
from proftui.collectors.wording import count, verb


def test_one_is_singular_and_the_rest_plural() -> None:
    assert [count(n, "sample") for n in (0, 1, 2, 12345, 1.0)] == [
        "0 samples", "1 sample", "2 samples", "12,345 samples", "1 sample"]
    assert count(3, "process", "processes") == "3 processes"
    assert (verb(1, "was", "were"), verb(0, "was", "were"), verb(2, "was", "were")) == (
        "was", "were", "were")


def test_notes_of_one_sample_read_as_english() -> None:
    lost = lost_warnings(2, 1, None)
    assert lost[0].startswith("1 sample was lost in the kernel's perf ring buffers: ")
    assert lost[1].startswith("1 sample was dropped because the attach helper's stack table")
    cut = cut_warnings(1, 1997, 0)[0]
    assert cut.startswith("1 of 1,997 samples (0.1%) has an incomplete stack (no unwind rule")
    assert "): it starts at a [stack cut...]" in cut
