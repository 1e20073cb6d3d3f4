"""The one exception type that reaches the user as a one-line message."""

from __future__ import annotations


class ProftuiError(Exception):
    """A failure to explain in one line (no traceback), with an exit status.

    Raise it for bad input the user can fix: missing program, not ELF, corrupt
    gmon.out or stream, pid gone.  The CLI prints `proftui: <message>`.
    """

    def __init__(self, message: str, exit_status: int = 2) -> None:
        super().__init__(message)
        self.exit_status = exit_status
