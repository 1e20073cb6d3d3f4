"""The terminal driver: Textual's Linux driver, with a lone Esc delivered when its delay
ends rather than at the input thread's next 100 ms poll.

A terminal sends Esc as the byte that also starts every arrow key's sequence, so the
parser holds a lone Esc until ESCAPE_DELAY passes with nothing after it.  Textual's
input thread looks at that deadline only when its select() returns, after 100 ms
when no other byte comes: every Esc key (back, zoom out, clear a filter) took
100-150 ms to reach the screen whatever the delay.  This thread waits in short
slices while an Esc may still be pending and in 100 ms ones otherwise, so an idle
app wakes no more often than before.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import time
from codecs import getincrementaldecoder
from collections.abc import Mapping

import textual.constants
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

# Textual waits 100 ms for a lone Esc.  A terminal writes a sequence at once (one read
# locally, one packet over ssh), so 25 ms is enough, as for ncurses programs run with
# ESCDELAY=25; the user's ESCDELAY (milliseconds, read by Textual) wins.
ESCAPE_DELAY_S = 0.025
IDLE_WAIT_S = 0.1  # no Esc pending: look at the exit flag this often, as Textual does
READ_BYTES = 4096


def escape_wait(now: float, pending_until: float) -> float:
    """How long the input thread may block: a slice of the escape delay while an Esc
    read before `pending_until` may still be waiting for its deadline."""
    if now >= pending_until:
        return IDLE_WAIT_S
    return min(IDLE_WAIT_S, max(0.002, textual.constants.ESCAPE_DELAY / 4))


class QuickEscapeDriver(LinuxDriver):
    """LinuxDriver whose input thread checks a pending Esc's deadline in time."""

    def run_input_thread(self) -> None:
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        pending_until = 0.0
        with selectors.DefaultSelector() as selector:
            selector.register(self.fileno, selectors.EVENT_READ)
            while not self.exit_event.is_set():
                ready = selector.select(escape_wait(time.monotonic(), pending_until))
                if ready:
                    chunk = os.read(self.fileno, READ_BYTES)
                    if not chunk:  # end of file (a hung-up terminal): no key will come
                        break
                    text = decode(chunk)
                    if "\x1b" in text:
                        pending_until = time.monotonic() + 2 * textual.constants.ESCAPE_DELAY
                    for event in parser.feed(text):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        with contextlib.suppress(EOFError, ParseError):
            for event in parser.feed(""):
                self.process_message(event)


def quick_escape(environ: Mapping[str, str]) -> float:
    """Take a lone Esc after ESCAPE_DELAY_S unless `environ` sets ESCDELAY (Textual
    reads that itself); the delay in force, in seconds."""
    if "ESCDELAY" not in environ:
        textual.constants.ESCAPE_DELAY = ESCAPE_DELAY_S  # type: ignore[misc]
    return textual.constants.ESCAPE_DELAY


def terminal_driver(chosen: type[Driver]) -> type[Driver]:
    """QuickEscapeDriver where Textual chose its Linux driver; `chosen` otherwise (the
    headless driver of tests, a driver named by TEXTUAL_DRIVER)."""
    return QuickEscapeDriver if chosen is LinuxDriver else chosen
