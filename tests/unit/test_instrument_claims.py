"""What instrument mode's options say about themselves stays true: `--count-only` is not
sold as cheaper than the default (its hooks are the same; the clock is not the cost), and
where `--timed` is offered (help, README, the profile's note) it says its clock is wall
time, pre-emption included, and that uninstrumented code's time stays in its caller."""

from __future__ import annotations

from pathlib import Path

import pytest
from proftui.collectors.instrument.collector import TIMED_NOTE
from proftui.tui.arguments import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def _help(option: str) -> str:
    action = next(a for a in build_parser("run")._actions if option in a.option_strings)
    return " ".join(str(action.help).split())


def _readme_paragraph(option: str) -> str:
    text = " ".join(README.read_text().split())
    start = text.index(f"`{option}` times every call" if option == "--timed" else
                       f"`{option}` counts only")
    return text[start:start + 600]


def test_count_only_is_not_called_lowest_overhead() -> None:
    for text in (_help("--count-only"), _readme_paragraph("--count-only")):
        assert "lowest" not in text
        assert "costs about what the default" in text


@pytest.mark.parametrize("where", ["help", "readme", "note"])
def test_timed_says_its_clock_counts_preemption_and_libc_goes_to_callers(where: str) -> None:
    text = {"help": _help("--timed"), "readme": _readme_paragraph("--timed"),
            "note": TIMED_NOTE}[where]
    assert "pre-empted" in text
    assert "libc" in text and "caller's self time" in text
