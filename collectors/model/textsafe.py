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


def _control(char: str) -> str:
    return f"\\x{ord(char):02x}"


_CONTROLS = {code: _control(chr(code)) for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def display(text: str) -> str:
    """`text` for a terminal cell: `clean`, and control characters (an escape sequence
    in a metric or thread name, a newline in a function name) shown as `\\x1b`."""
    return clean(text).translate(_CONTROLS)
