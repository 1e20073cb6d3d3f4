"""`clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?from=..&to=..&KEY=VALUE..]`.

Credentials come from the URL or from PROFTUI_CLICKHOUSE_USER / _PASSWORD (then
CLICKHOUSE_USER / _PASSWORD); `display()` never shows a password.  `from`/`to` take
ISO times (a time without a zone is local time) or times relative to now (`-15m`,
`-2h`, `-1d`, `now`); `cluster=NAME` reads through Distributed tables over the
server's cluster NAME; `by=KEY[,KEY..]` makes the profile's parts (`t`) one per
value of those labels (host, program, build, ...) instead of one per push session
(`thread` is the rows' own thread, not a label); every other parameter filters on a
label (repeat a key to accept any of several values).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from proftui.collectors.errors import ProftuiError

DEFAULT_PORT = 9000  # ClickHouse's native protocol
DEFAULT_FROM = "-1h"
RESERVED = ("from", "to", "cluster", "by")  # query parameters that are not label filters
THREAD = "thread"  # in by=: the sample rows' thread ("pid P tid T"), not a label
LABEL_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,63}\Z")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")  # database and cluster names
_RELATIVE = re.compile(r"-(\d+(?:\.\d+)?)(s|m|h|d|w)\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class FleetURL:
    """A parsed fleet URL; `filters` are (label, accepted values) in URL order."""

    host: str
    port: int
    database: str
    user: str = "default"
    password: str = field(default="", repr=False)
    start: str = DEFAULT_FROM  # as written: resolved by `window()` at each query
    end: str = "now"
    cluster: str = ""
    filters: tuple[tuple[str, tuple[str, ...]], ...] = ()
    explicit_window: bool = False  # from or to were given
    by: tuple[str, ...] = ()  # label keys the parts are per (empty: per push session)

    def display(self) -> str:
        """The URL as a user would write it, without the password (for headers, notes)."""
        user = "" if self.user == "default" else f"{quote(self.user)}@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PORT else f":{self.port}"
        params = [("from", self.start), ("to", self.end)] if self.explicit_window else []
        if self.cluster:
            params.append(("cluster", self.cluster))
        if self.by:
            params.append(("by", ",".join(self.by)))
        params += [(k, v) for k, values in self.filters for v in values]
        query = "&".join(f"{k}={quote(v, safe=':+-.')}" for k, v in params)
        return f"clickhouse://{user}{host}{port}/{self.database}" + (f"?{query}" if query
                                                                       else "")

    def server(self) -> str:
        """HOST:PORT/DATABASE, for one-line messages."""
        return f"{self.host}:{self.port}/{self.database}"

    def window(self, now: float | None = None) -> tuple[int, int]:
        """[from, to) in Unix seconds, relative times taken from `now`."""
        now = time.time() if now is None else now
        start, end = parse_time(self.start, now), parse_time(self.end, now)
        if end <= start:
            raise ProftuiError(f"fleet query: from ({self.start}) is not before to "
                               f"({self.end})")
        return start, end


def parse_time(text: str, now: float) -> int:
    """Unix seconds of an ISO time or a time relative to `now` ("-15m", "now")."""
    text = text.strip()
    if text == "now":
        return int(now) + 1  # `to=now` includes the interval that started this second
    relative = _RELATIVE.match(text)
    if relative:
        return int(now - float(relative.group(1)) * _UNITS[relative.group(2)])
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z")
                                      else text)
    except ValueError:
        raise ProftuiError(f"fleet URL: {text!r} is not a time (use ISO, e.g. "
                           "2026-01-31T12:00, or relative: -15m, -2h, -1d, now)") from None
    return int(when.timestamp())  # naive: local time, as datetime.timestamp() takes it


def parse(text: str, *, query: bool = True) -> FleetURL:
    """Parse a fleet URL; `query=False` (push targets) refuses query parameters.
    Malformed input is a ProftuiError naming what is wrong (never the password)."""
    try:
        parts = urlsplit(text)
        port = parts.port
        host = parts.hostname or ""
    except ValueError as exc:
        # urlsplit's messages name the port or the brackets, never the password
        raise ProftuiError(f"fleet URL: {exc} (expected clickhouse://HOST[:PORT]/DATABASE)") \
            from None
    if parts.scheme != "clickhouse":
        raise ProftuiError("fleet URL must start with clickhouse://")
    if not host:
        raise ProftuiError("fleet URL names no host (expected clickhouse://HOST[:PORT]/DATABASE)")
    database = unquote(parts.path.strip("/"))
    if not _NAME.match(database):
        raise ProftuiError("fleet URL needs a database name of letters, digits and _ after the "
                           "host (clickhouse://HOST[:PORT]/DATABASE)")
    if parts.fragment:
        raise ProftuiError("fleet URL: unexpected '#' part")
    user = unquote(parts.username) if parts.username else (
        os.environ.get("PROFTUI_CLICKHOUSE_USER") or os.environ.get("CLICKHOUSE_USER")
        or "default")
    password = unquote(parts.password) if parts.password is not None else (
        os.environ.get("PROFTUI_CLICKHOUSE_PASSWORD") or os.environ.get("CLICKHOUSE_PASSWORD")
        or "")
    start, end, cluster = DEFAULT_FROM, "now", ""
    by: list[str] = []
    explicit = False
    filters: dict[str, list[str]] = {}
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ProftuiError("fleet URL: malformed query (use ?from=-1h&to=now&KEY=VALUE)") \
            from None
    if pairs and not query:
        raise ProftuiError("--push takes clickhouse://HOST[:PORT]/DATABASE without a query "
                           "(labels go in --label KEY=VALUE)")
    for key, value in pairs:
        if key == "from":
            start, explicit = value, True
        elif key == "to":
            end, explicit = value, True
        elif key == "cluster":
            if not _NAME.match(value):
                raise ProftuiError(f"fleet URL: cluster name {value!r} is not a name")
            cluster = value
        elif key == "by":
            by += _breakdown(value)
        elif LABEL_KEY.match(key):
            filters.setdefault(key, []).append(value)
        else:
            raise ProftuiError(f"fleet URL: {key!r} is not a label name (letters, digits, _ "
                               "and .)")
    url = FleetURL(host=host, port=port or DEFAULT_PORT, database=database, user=user,
                   password=password, start=start, end=end, cluster=cluster,
                   filters=tuple((k, tuple(v)) for k, v in filters.items()),
                   explicit_window=explicit, by=tuple(dict.fromkeys(by)))
    if query:
        url.window()  # a bad time is an error now, not at the first query
    return url


def _breakdown(value: str) -> list[str]:
    """The label keys of `by=KEY[,KEY..]`."""
    keys = [key.strip() for key in value.split(",")]
    for key in keys:
        if not LABEL_KEY.match(key):
            raise ProftuiError(f"fleet URL: by={value!r}: {key!r} is not a label name "
                               "(letters, digits, _ and .; several: by=host,program)")
    return keys


def parse_label(text: str) -> tuple[str, str]:
    """`KEY=VALUE` of --label."""
    key, sep, value = text.partition("=")
    if not sep or not LABEL_KEY.match(key):
        raise ProftuiError(f"--label {text!r}: expected KEY=VALUE, KEY of letters, digits, "
                           "_ and .")
    if key in (*RESERVED, THREAD):
        raise ProftuiError(f"--label: {key!r} is reserved for queries (from, to, cluster, "
                           "by, thread)")
    return key, value
