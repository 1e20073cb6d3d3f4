"""The private per-run directory shared with the C runtime (docs/architecture.md section 3)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path


class RunDirectory:
    """A fresh directory, mode 0700, with an unpredictable name; removed on close.

    The runtime creates one file per process in it with
    O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600; its path reaches the target as
    PROFTUI_DIR.
    """

    def __init__(self, keep: bool = False) -> None:
        # mkdtemp creates the directory 0700 with a random name: never predictable.
        self.path = Path(tempfile.mkdtemp(prefix="proftui-"))
        self.keep = keep

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> RunDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
