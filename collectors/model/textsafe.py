"""Text that is safe to write: strings that carry undecodable bytes, escaped.

Paths and names travel as `str` with surrogateescape (a program path with the
byte 0xff in it holds U+DCFF), and a loaded JSON profile may hold any lone
surrogate.  Neither can be encoded as UTF-8, so every text format escapes them
the same way: an escaped byte becomes `\\xff`, any other lone surrogate
`\\udXXX`.  Valid text is unchanged.
"""

from __future__ import annotations

import codecs

ERRORS = "proftui-escape"  # codecs error handler name, registered below


def _escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for char in error.object[error.start:error.end]:
        code = ord(char)
        out.append(f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}")
    return "".join(out), error.end


codecs.register_error(ERRORS, _escape)


def encode_text(text: str) -> bytes:
    """`text` as UTF-8 bytes, undecodable bytes and lone surrogates escaped."""
    return text.encode("utf-8", ERRORS)


def clean(text: str) -> str:
    """`text` with undecodable bytes and lone surrogates escaped (printable anywhere)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return encode_text(text).decode("utf-8")
    return text


def display(text: str) -> str:
    """`text` for a terminal cell: `clean`, and every character that does not print
    (controls such as ESC or a newline, DEL, C1, bidi overrides and other format
    characters) shown as `\\x1b` / `\\u202e`: an escape sequence in a function,
    metric or thread name must not reach the terminal."""
    text = clean(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_code(ord(ch)) for ch in text)


def _escape_code(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
