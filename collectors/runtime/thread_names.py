"""Thread and process names as safe display text: the one rule for every place they enter.

A thread's name (prctl(PR_SET_NAME), /proc/PID/task/TID/comm, the runtimes' 16-byte
copies) is up to 15 arbitrary bytes chosen by the target: not necessarily UTF-8, and
possibly terminal control sequences.  They are decoded once, where they are read, into
plain printable text: invalid UTF-8 bytes become `\\xff`, control characters (C0, DEL,
C1) and bidirectional overrides become `\\x1b` / `\\u202e` escapes.

Why at the entry rather than carried as surrogateescape and escaped at render: the
names go into the saved profile (JSON, which cannot hold lone surrogates), the text
report, five export formats and several TUI widgets; one decode at the entry leaves
no renderer that can forget to escape, and no writer that can fail on a surrogate.
The cost is that the original bytes are not recoverable (a name that really contains
the text `\\xff` reads the same), acceptable for a label of at most 15 bytes.
"""

from __future__ import annotations

from proftui.collectors.model.textsafe import display


def printable_name(raw: bytes | str) -> str:
    """`raw` as display text: UTF-8 with undecodable bytes and control characters escaped
    (`textsafe.display`).  A str is taken as already decoded (surrogateescape'd bytes,
    as psutil returns them, come out as `\\xff`)."""
    text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
    return display(text)


def read_comm(path: str) -> str | None:
    """A /proc comm file (`/proc/PID/comm`, `/proc/PID/task/TID/comm`) as display text.

    None when it cannot be read (the thread or process is gone).  Only the kernel's
    trailing newline is removed: the name's own bytes are kept, escaped.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return printable_name(raw.removesuffix(b"\n"))
