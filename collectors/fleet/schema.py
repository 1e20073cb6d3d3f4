"""The fleet tables, version 1 (docs/fleet.md describes them for other tools).

Written for ClickHouse 18.16 (Debian's) and current releases alike: no
LowCardinality, Map or column codecs (all newer than 18.16), plain MergeTree
families in the partition-key syntax both accept.

* `proftui_schema`  - one row per version ever created here.
* `proftui_series`  - each label set once (ReplacingMergeTree by its hash).
* `proftui_stacks`  - each stack once per hash (ReplacingMergeTree by hash; a host
  may send one another host sent, reads take any copy): frames outermost first
  as parallel arrays, then the leaf's code site.
* `proftui_samples` - cost rows: per (minute, series, thread, stack) the stack's metric
  values, one Float64 column per metric proftui knows (absent ones are 0 and cost
  nothing on disk).  A SummingMergeTree: rows of one minute, series, thread and stack
  that several intervals wrote are summed by the server's merges, so the table
  shrinks to one row per stack per minute whatever the push interval, and a query
  sums whatever the merges have reached (the same answer before and after).  Each
  batch also writes one marker row (stack 0, `batch` its id, `batch_rows` its row
  count) in the same insert block, so a retry can ask whether that insert landed;
  markers stay apart because `batch` is in the key.  A marker's `samples` holds what
  the run lost in that interval (samples its buffers dropped, or records its runtime
  could not store), 0 when nothing was: once per batch like the marker itself, and
  never in a cost query (those read `batch = 0`).  Cost rows have `batch_rows` 0:
  a row whose sums are all zero may be dropped by a merge, and it adds nothing.
  Ordered by hour, series, minute: a time range reads only its hours, a label filter
  only its series' ranges; partitioned by day.
"""

from __future__ import annotations

VERSION = 1
BUCKET_S = 60  # sample rows are summed per minute: the finest time a query resolves
# The metrics proftui's collectors produce (collectors/model/profile.py): one column each.
METRICS = ("samples", "cpu_ns", "wall_ns", "calls", "alloc_bytes", "allocs", "live_bytes",
           "live_allocs", "peak_bytes", "leaked_bytes", "leaks", "temporary")
SCHEMA, SERIES, STACKS, SAMPLES = ("proftui_schema", "proftui_series", "proftui_stacks",
                                   "proftui_samples")

COLUMNS: dict[str, list[tuple[str, str]]] = {
    SCHEMA: [("version", "UInt32"), ("created", "DateTime")],
    SERIES: [("series", "UInt64"), ("labels.key", "Array(String)"),
             ("labels.value", "Array(String)"), ("first", "DateTime")],
    STACKS: [("stack", "UInt64"), ("functions", "Array(String)"),
             ("modules", "Array(String)"), ("build_ids", "Array(String)"),
             ("files", "Array(String)"), ("lines", "Array(UInt32)"),
             ("addresses", "Array(Int64)"), ("raw_names", "Array(String)"),
             ("inlined", "Array(UInt8)"), ("site_module", "String"),
             ("site_address", "Int64"), ("site_function", "Int64"), ("site_file", "String"),
             ("site_line", "UInt32")],
    SAMPLES: [("time", "DateTime"), ("series", "UInt64"), ("thread", "String"),
              ("stack", "UInt64"), ("batch", "UInt64"), ("profile", "String"),
              ("batch_rows", "UInt32"), ("call_count", "Int64"),
              *[(name, "Float64") for name in METRICS]],
}
SUMMED = ("batch_rows", "call_count", *METRICS)
LOST_IN = "samples"  # the marker row's column that holds what its interval lost

ENGINES = {
    SCHEMA: "TinyLog",
    SERIES: "ReplacingMergeTree() ORDER BY series",
    STACKS: "ReplacingMergeTree() ORDER BY stack",
    SAMPLES: f"SummingMergeTree(({', '.join(SUMMED)})) PARTITION BY toYYYYMMDD(time) "
             "ORDER BY (toStartOfHour(time), series, time, thread, stack, batch)",
}


def bucket(when: float) -> int:
    """The minute (Unix seconds) a sample row of time `when` is summed into."""
    return int(when) - int(when) % BUCKET_S


def create_statements(database: str) -> list[str]:
    """CREATE TABLE IF NOT EXISTS for every table (`database` is a checked name)."""
    out = []
    for table, columns in COLUMNS.items():
        body = _columns_sql(columns)
        out.append(f"CREATE TABLE IF NOT EXISTS {database}.{table} ({body}) "
                   f"ENGINE = {ENGINES[table]}")
    return out


def _columns_sql(columns: list[tuple[str, str]]) -> str:
    """Column list; `labels.key`/`labels.value` are one Nested column."""
    out, nested = [], []
    for name, kind in columns:
        if "." in name:
            nested.append(f"{name.split('.')[1]} {kind.removeprefix('Array(')[:-1]}")
            if len(nested) == 2:
                out.append(f"{name.split('.')[0]} Nested({', '.join(nested)})")
            continue
        out.append(f"{name} {kind}")
    return ", ".join(out)


def distributed_name(table: str, cluster: str) -> str:
    """The Distributed table over `table` on every shard of `cluster`."""
    return f"{table}_on_{cluster}"


def distributed_statements(database: str, cluster: str) -> list[str]:
    """Distributed tables over the series, stacks and samples of every shard."""
    return [f"CREATE TABLE IF NOT EXISTS {database}.{distributed_name(t, cluster)} "
            f"AS {database}.{t} ENGINE = Distributed({cluster}, {database}, {t})"
            for t in (SERIES, STACKS, SAMPLES)]


def mismatch(found: dict[str, list[tuple[str, str]]]) -> str | None:
    """Which table of `found` (table -> its columns) is not version 1's, or None."""
    for table, columns in COLUMNS.items():
        have = found.get(table)
        if have is not None and have != columns:
            return table
    return None
