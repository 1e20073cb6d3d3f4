"""Remembered choices (theme, sort column, metric, name shortening, % of parent).

They live in `$XDG_CONFIG_HOME/proftui/settings.json` (`~/.config/proftui/...`
when the variable is unset or not absolute, as the XDG base directory spec
says), are read once at start and written whenever one changes, both through
collectors/safefile.py: written atomically (a private temporary file renamed
over the old one) and readable by the owner only (0600, directory 0700); read
without blocking, and only from a regular file (a FIFO there must not stop the
TUI from drawing).  A file that cannot be read or parsed is ignored and
reported once; a value of the wrong type or out of range is dropped on its
own, so one bad entry does not lose the others.  Nothing here raises.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.safefile import read_regular, write_output

MAX_BYTES = 64 * 1024  # a settings file is a few hundred bytes; more is not ours
NAME_MODES = ("full", "templates", "params")
SORTS = ("self", "total", "calls", "name")


@dataclass
class Settings:
    """What is remembered; None: not chosen yet (the app's default applies)."""

    theme: str | None = None
    sort: str | None = None  # a flat-profile sort column (tui.panes.flat.SORTS)
    descending: bool | None = None
    metric: str | None = None  # a metric name ("cpu_ns"); used when the profile has it
    names: str = "templates"  # tui.names.MODES
    percent_of_parent: bool = False
    flame_icicle: bool = False  # the flame pane draws the root at the top


def config_path() -> Path:
    """`$XDG_CONFIG_HOME/proftui/settings.json`, or under ~/.config."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "proftui" / "settings.json"


def _valid(name: str, value: object) -> bool:
    if name in ("theme", "metric"):
        return isinstance(value, str) and 0 < len(value) <= 100 and value.isprintable()
    if name == "sort":
        return value in SORTS
    if name == "names":
        return value in NAME_MODES
    return isinstance(value, bool)  # descending, percent_of_parent, flame_icicle


def load(path: Path | None = None) -> tuple[Settings, str]:
    """The remembered settings and "" , or defaults and why the file was ignored.

    A missing file is not an error (the first run)."""
    path = path or config_path()
    settings = Settings()
    try:
        data = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        return settings, ""
    except ProftuiError as exc:
        return settings, f"settings file ignored: {exc}"
    if len(data) > MAX_BYTES:
        return settings, f"settings file {path} ignored: larger than {MAX_BYTES} bytes"
    try:
        values = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return settings, f"settings file {path} ignored: not valid JSON ({exc})"
    if not isinstance(values, dict):
        return settings, f"settings file {path} ignored: not a JSON object"
    for field in fields(Settings):
        value = values.get(field.name)
        if value is not None and _valid(field.name, value):
            setattr(settings, field.name, value)
    return settings, ""


def save(settings: Settings, path: Path | None = None) -> str:
    """Write `settings` atomically with mode 0600; "" or why it could not be written."""
    path = path or config_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps(asdict(settings), indent=2, sort_keys=True) + "\n"
        write_output(path, text.encode("utf-8"), regular_only=True)
    except OSError as exc:
        return f"settings not saved to {path}: {exc.strerror or exc}"
    except ProftuiError as exc:
        return f"settings not saved: {exc}"
    return ""
