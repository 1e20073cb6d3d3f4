"""Fleet profiles: push intervals of a run to ClickHouse, read any hosts and time range back.

url.py parses `clickhouse://HOST[:PORT]/DATABASE?...`; schema.py creates and checks the
tables (docs/fleet.md); client.py is the one place that talks to the server (through
clickhouse-driver, an optional dependency: `pip install proftui[fleet]`); stacks.py
hashes symbolized stacks; intervals.py takes what a collector added since the last
interval; spool.py keeps batches on disk until the server has them; pusher.py runs the
push loop; query.py turns a server-side aggregation into a Profile.
"""

from __future__ import annotations

SCHEME = "clickhouse://"


def is_fleet_url(text: str) -> bool:
    """Whether `text` names a fleet query or push target rather than a file."""
    return text.startswith(SCHEME)
