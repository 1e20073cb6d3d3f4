"""A lone Esc is taken after 25 ms, not Textual's 100 ms, unless the user's ESCDELAY says
otherwise: every Esc key (back, zoom out, clear) waits for this before it is a key."""

from __future__ import annotations

import inspect

import textual._xterm_parser as xterm_parser
import textual.constants
from proftui.tui.input_driver import ESCAPE_DELAY_S, quick_escape


def test_a_lone_esc_waits_25_ms_unless_escdelay_is_set() -> None:
    before = textual.constants.ESCAPE_DELAY
    try:
        textual.constants.ESCAPE_DELAY = 0.1  # Textual's own default
        assert quick_escape({"TERM": "xterm"}) == ESCAPE_DELAY_S == 0.025
        textual.constants.ESCAPE_DELAY = 0.3  # what Textual made of ESCDELAY=300
        assert quick_escape({"ESCDELAY": "300"}) == 0.3
    finally:
        textual.constants.ESCAPE_DELAY = before


def test_textual_reads_the_delay_when_it_parses() -> None:
    # The setting works only while the parser looks the constant up at each read;
    # a Textual that copied it at import would silently bring back 100 ms.
    assert "constants.ESCAPE_DELAY" in inspect.getsource(xterm_parser)
