"""The target's output, live and bounded: a scrollable log of its stdout and stderr.

The collector keeps the first MiB and the last 4 MiB of what the target wrote
(collectors/runtime/output.py).  The panel follows that stream from a byte
offset and keeps fewer lines still: the first HEAD_LINES (banners, the first
errors) and the last TAIL_LINES, with a "… N bytes not kept …" line wherever
bytes are missing, so a target that floods its output costs a bounded amount
of memory and drawing.  Every line goes through `textsafe.display` (an escape
sequence the target prints must not reach the terminal) and is drawn by
Textual's `Log`, which never reads Rich markup.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Protocol

from proftui.collectors.model.textsafe import display
from textual.widgets import Log

HEAD_LINES = 200  # the start of the output stays visible however much follows
TAIL_LINES = 5000  # the rolling end
READ_BYTES = 64 << 10  # at most this much is read per poll: a flood skips ahead
LINE_BYTES = 8 << 10  # a longer line (no newline for 8 KiB) is shown in pieces
MARKER = "… {:,} bytes not kept …"


class OutputSource(Protocol):
    """What the panel reads (collectors' `OutputLog`)."""

    def read_from(self, offset: int, max_bytes: int, keep_head: bool = True
                  ) -> tuple[int, bytes, int]: ...

    @property
    def ended(self) -> bool: ...

    @property
    def total_bytes(self) -> int: ...

    @property
    def total_lines(self) -> int: ...


Entry = tuple[str, int]  # (line, bytes not kept: >0 makes it a marker)


class OutputLines:
    """Head lines, a bounded tail, and markers for the bytes in between (no widgets)."""

    def __init__(self, head_lines: int = HEAD_LINES, tail_lines: int = TAIL_LINES) -> None:
        self.head_limit = head_lines
        self.head: list[Entry] = []
        self.tail: deque[Entry] = deque()
        self.tail_limit = tail_lines
        self.evicted_bytes = 0  # bytes of lines that fell out of the tail (and markers')
        self.evictions = 0  # changes at the top of the tail: a redraw is needed
        self.appended = 0  # entries added so far
        self.lines_seen = 0
        self.shown_bytes = 0  # bytes behind the lines shown (newlines included)
        self.not_kept_bytes = 0  # bytes behind the markers (what `entries` says is missing)
        self._partial = bytearray()
        self._tail_sizes: deque[int] = deque()  # bytes each tail entry stands for

    def feed(self, skipped: int, data: bytes) -> None:
        """`data` written after `skipped` bytes that are not available."""
        if skipped:
            if self._partial:  # the line was cut by the gap: show what there is
                self._add(bytes(self._partial), newline=False)
                self._partial.clear()
            self.not_kept_bytes += skipped
            self._marker(skipped)
        if not data:
            return
        self._partial += data
        *lines, rest = self._partial.split(b"\n")
        room = self.head_limit - len(self.head) if not self.tail else 0
        doomed = len(lines) - max(0, room) - self.tail_limit
        if doomed > 0:  # these would only pass through the tail: count them, unread
            for raw in lines[:max(0, room)]:
                self._add(raw)
            middle = lines[max(0, room):max(0, room) + doomed]
            size = sum(map(len, middle)) + len(middle)
            self.lines_seen += len(middle)
            self.not_kept_bytes += size
            self.evicted_bytes += size
            self.evictions += 1
            lines = lines[max(0, room) + doomed:]
        for raw in lines:
            self._add(raw)
        while len(rest) > LINE_BYTES:
            self._add(rest[:LINE_BYTES], newline=False)
            rest = rest[LINE_BYTES:]
        self._partial = bytearray(rest)

    def finish(self) -> None:
        """The output ended: a last line without a newline is a line."""
        if self._partial:
            self._add(bytes(self._partial), newline=False)
            self._partial.clear()

    def entries(self) -> list[Entry]:
        """Everything to show, in order; the bytes that fell out of the tail as one marker
        (merged with a marker that now leads the tail)."""
        out = list(self.head)
        tail = list(self.tail)
        gap = self.evicted_bytes
        if tail and tail[0][1]:
            gap += tail.pop(0)[1]
        if gap:
            out.append((MARKER.format(gap), gap))
        return out + tail

    @property
    def partial(self) -> str:
        """The line being written (no newline yet), for display."""
        return _text(bytes(self._partial)) if self._partial else ""

    def _marker(self, skipped: int) -> None:
        last = self.tail[-1] if self.tail else None
        if last is not None and last[1]:  # two gaps in a row: one marker
            self.tail[-1] = (MARKER.format(last[1] + skipped), last[1] + skipped)
            self._tail_sizes[-1] = last[1] + skipped
            self.evictions += 1  # an entry already drawn changed
            return
        self._push((MARKER.format(skipped), skipped))

    def _add(self, raw: bytes | bytearray, newline: bool = True) -> None:
        self.lines_seen += 1
        entry = (_text(raw), 0)
        size = len(raw) + newline
        self.shown_bytes += size
        if len(self.head) < self.head_limit and not self.tail:
            self.head.append(entry)
            self.appended += 1
            return
        self._push(entry, size)

    def _push(self, entry: Entry, size: int = 0) -> None:
        self.tail.append(entry)
        self._tail_sizes.append(entry[1] or size)
        self.appended += 1
        while len(self.tail) > self.tail_limit:
            _text, gap = self.tail.popleft()
            size = self._tail_sizes.popleft()
            self.evicted_bytes += size
            if not gap:  # a line's bytes move from shown to not kept
                self.shown_bytes -= size
                self.not_kept_bytes += size
            self.evictions += 1


_PLAIN = re.compile(rb"[\x20-\x7e]*")  # printable ASCII: shown as it is (the common case)


def _text(raw: bytes | bytearray) -> str:
    if _PLAIN.fullmatch(raw):
        return raw.decode("ascii")
    """Like collectors.runtime.output.terminal_line (which panes may not import)."""
    text = raw.decode("utf-8", "surrogateescape").rstrip("\r")
    return "\t".join(display(part) for part in text.split("\t")).expandtabs()


class OutputLog(Log):
    """A `Log` that follows an `OutputSource`; call `poll()` to pull what is new."""

    DEFAULT_CSS = """
    OutputLog { height: 1fr; min-height: 3; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(highlight=False, auto_scroll=True, **kwargs)  # type: ignore[arg-type]
        self.lines_model = OutputLines()
        self.source: OutputSource | None = None
        self._read_offset = 0
        self.finished = False
        self._drawn = 0  # entries of lines_model written to the Log
        self._drawn_evictions = 0
        self._drawn_partial = ""
        self._at_end = True  # the view shows the last line: keep it so when resized

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._at_end = self.is_vertical_scroll_end

    def on_resize(self) -> None:
        if self._at_end:  # e.g. `o` gave the panel more or fewer rows
            self.call_after_refresh(self.scroll_end, animate=False, x_axis=False)

    def follow(self, source: OutputSource | None) -> None:
        """Show `source` from its first byte (None: nothing to follow)."""
        self.source = source
        self._read_offset = 0
        self.finished = source is None
        self.lines_model = OutputLines()
        self._drawn = self._drawn_evictions = 0
        self._drawn_partial = ""
        self.clear()

    def poll(self) -> bool:
        """Read what the target wrote since the last poll; True when something changed."""
        source = self.source
        if source is None or self.finished:
            return False
        ended = source.ended  # read before the data: what came before EOF is all there
        model = self.lines_model
        head_wanted = not model.tail and len(model.head) < model.head_limit
        skipped, data, self._read_offset = source.read_from(self._read_offset, READ_BYTES,
                                                            keep_head=head_wanted)
        changed = bool(skipped or data)
        self.lines_model.feed(skipped, data)
        if ended and self._read_offset >= source.total_bytes:
            self.lines_model.finish()
            self.finished = True
            changed = True
        return changed

    def draw(self) -> None:
        """Bring the widget up to date with `lines_model` (appends when it can)."""
        model = self.lines_model
        partial = model.partial
        if model.evictions != self._drawn_evictions or self._drawn_partial:
            at_end = self.is_vertical_scroll_end or not self.line_count
            y = self.scroll_y
            self.clear()
            lines = [text for text, _gap in model.entries()]
            if partial:
                lines.append(partial)
            self.write_lines(lines, scroll_end=at_end)
            if not at_end:
                self.scroll_to(y=y, animate=False)
            self._drawn_evictions = model.evictions
        else:
            new = model.appended - self._drawn
            if new > 0:  # nothing left the tail: the new entries are the last `new`
                in_tail = min(new, len(model.tail))
                fresh = model.head[len(model.head) - (new - in_tail):] if new > in_tail else []
                fresh += [model.tail[i] for i in range(len(model.tail) - in_tail,
                                                       len(model.tail))]
                self.write_lines([text for text, _gap in fresh])
            if partial:
                self.write_lines([partial])
        self._drawn = model.appended
        self._drawn_partial = partial
