"""A fleet query: the server sums each stack's costs over the hosts, labels and time
range asked for, per push session (GROUP BY stack, series; and thread for `by=thread`),
so what comes back is one row per distinct stack and session however many sample rows
matched; the stacks' frames come in a second query, the sessions' labels in a third.
answer.py makes the Profile: each session is a part (`t` picks one), named by its
host, program and pid; with the URL's `by=KEY,..` the sessions sharing those labels'
values share a part instead, and `FleetQuery.broken_down` regroups an answer shown.

A fourth query reads each session's totals per minute (GROUP BY series, minute: a row
per session and minute), which the timeline draws; a range picked there is a new
query of that window (`load_window`).  Costs per stack and minute are not read: that
made the hour of 10 hosts 277,000 rows and 6.4 s (bench_fleet.py).  A fifth reads
what the runs lost in the window (their batch markers' counts), which the notes say.

With `cluster=NAME` both queries read through Distributed tables over the cluster's
shards: each shard aggregates its own rows, the server asked merges them.  The label
and stack subqueries name the local tables, so each shard answers them from its own
data (a host pushes its series, stacks and samples to one node).
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet import schema
from proftui.collectors.fleet.answer import Answer, profile_of
from proftui.collectors.fleet.batch import parse_spec
from proftui.collectors.fleet.client import FleetClient
from proftui.collectors.fleet.url import THREAD, FleetURL, parse
from proftui.collectors.model.calltree import gc_paused
from proftui.collectors.model.profile import Profile


def _where(url: FleetURL, start: int, end: int) -> tuple[str, dict[str, Any]]:
    """The samples' WHERE clause for the window and the label filters."""
    params: dict[str, Any] = {"start": start, "end": end}
    clauses = ["toStartOfHour(time) >= toStartOfHour(toDateTime(%(start)s))",
               "time >= toDateTime(%(start)s)", "time < toDateTime(%(end)s)", "batch = 0"]
    if url.filters:
        conditions = []
        for i, (key, values) in enumerate(url.filters):
            params[f"k{i}"], params[f"v{i}"] = key, tuple(values)
            conditions.append(f"labels.value[indexOf(labels.key, %(k{i})s)] IN %(v{i})s")
        clauses.append(f"series IN (SELECT series FROM {url.database}.{schema.SERIES} "
                       f"WHERE {' AND '.join(conditions)})")
    return " AND ".join(clauses), params


def _table(url: FleetURL, table: str) -> str:
    name = schema.distributed_name(table, url.cluster) if url.cluster else table
    return f"{url.database}.{name}"


def load(source: str | FleetURL, now: float | None = None) -> Profile:
    """The profile of fleet URL `source` (ProftuiError in one line on any failure, an
    empty result and a server that has not answered within timeout_s() included)."""
    url = parse(source) if isinstance(source, str) else source
    return load_window(url, *url.window(now))


def load_window(source: str | FleetURL, start: float, end: float) -> Profile:
    """As `load`, over [start, end) in Unix seconds instead of the URL's own from and to
    (a range of its timeline)."""
    url = parse(source) if isinstance(source, str) else source
    return profile_of(fetch(url, start, end, THREAD in url.by), url)


def fetch(url: FleetURL, start: float, end: float, threads: bool) -> Answer:
    """The server's answer for [start, end) (widened to whole minutes), its rows per
    stack and push session, and per thread when `threads`."""
    start, end = schema.bucket(start), -schema.bucket(-end)  # rows are summed per minute
    client = FleetClient(url)
    try:
        with client.within():  # the whole query: PROFTUI_FLEET_TIMEOUT, 25 s by default
            client.ensure_schema(create=False)
            if url.cluster:
                client.ensure_distributed(url.cluster)
            with gc_paused(freeze=True):  # many small objects, none in a cycle, kept
                return _fetch(client, url, start, end, threads)
    finally:
        client.close()


# The breakdowns `t` offers a fleet profile (g cycles them): per push session (a process:
# host, program, pid), then per value of a label, then per thread of each session.
BREAKDOWNS: tuple[tuple[str, ...], ...] = ((), ("host",), ("program",), ("build",), (THREAD,))


def breakdown_name(by: tuple[str, ...]) -> str:
    """What the picker calls breakdown `by`."""
    return ", ".join(by) if by else "process (host, program, pid)"


@dataclass(frozen=True)
class FleetQuery:
    """A fleet URL as a view asks it again: the whole window (`r`), a range of its
    timeline, or the answer shown broken down another way (`t`, `g`)."""

    url: FleetURL
    # the last whole-window answer (a list of at most one: the query itself is frozen)
    last: list[Answer] = field(default_factory=list, compare=False, repr=False)

    def load(self) -> Profile:
        """The URL's window as of now, asked again."""
        answer = fetch(self.url, *self.url.window(), THREAD in self.url.by)
        self.last[:] = [answer]
        return profile_of(answer, self.url)

    def load_window(self, start: float, end: float) -> Profile:
        return load_window(self.url, start, end)

    def broken_down(self, by: tuple[str, ...]) -> tuple[FleetQuery, Profile]:
        """This query by `by`, and the profile it shows: the last answer regrouped when
        its rows allow (no server asked), else that answer's window asked again."""
        query = FleetQuery(replace(self.url, by=by), self.last)
        answer = self.last[0] if self.last else None
        if answer is None:
            return query, query.load()
        if not answer.gives(by):
            answer = fetch(query.url, answer.start, answer.end, True)
            self.last[:] = [answer]
        return query, profile_of(answer, query.url)

    def next_breakdown(self) -> tuple[str, ...]:
        """The breakdown after this query's in BREAKDOWNS (the first after any other)."""
        order = list(BREAKDOWNS)
        at = order.index(self.url.by) if self.url.by in order else -1
        return order[(at + 1) % len(order)]


def _fetch(client: FleetClient, url: FleetURL, start: int, end: int,
           threads: bool) -> Answer:
    """The server's answer for [start, end): rows per stack and session (and thread)."""
    where, params = _where(url, start, end)
    samples = _table(url, schema.SAMPLES)
    began = time.monotonic()
    # Only the metrics the window's profiles have are summed and sent (two of twelve for
    # a CPU profile: 0.07 s less for 96,000 rows); `place` is each one's column in a row.
    specs = [spec for (spec,) in client.execute(
        f"SELECT DISTINCT profile FROM {samples} WHERE {where}", params,
        doing="reading the profiles' metrics")]
    names = [name for name in schema.METRICS
             if any(name == m.name for spec in specs for m in parse_spec(spec)[0])]
    place = {name: i for i, name in enumerate(names)}
    sums = ", ".join(f"sum({name})" for name in names) or "0"  # "0": no metric known
    # rows are keyed by (series, thread), thread '' unless the threads are asked for
    thread = "thread" if threads else "''"
    group = "thread, " if threads else ""
    columns = {spec: _columns(spec, place) for spec in specs}
    late = 0  # rows of a profile spec pushed after the first read: their sums not asked
    rows = []
    # The stacks, frames, labels and timeline are asked on a second connection meanwhile:
    # the server answers both while this thread reads the rows (0.48 -> 0.30 s here).
    pool = ThreadPoolExecutor(1, thread_name_prefix="proftui-fleet-query")
    side = pool.submit(_rest_of_answer, url, where, params, thread, group, sums,
                       client.deadline.end, client.deadline.why())
    pool.shutdown(wait=False)
    try:
        for spec, stack, series, thread_, calls, *sums_ in client.execute(
                f"SELECT profile, stack, series, {thread}, sum(call_count), {sums} "
                f"FROM {samples} WHERE {where} GROUP BY profile, stack, {group}series",
                params, doing="aggregating samples"):
            where_in = columns.get(spec)
            if where_in is None:
                late += 1
                continue
            rows.append((spec, stack, (series, thread_), [sums_[c] for c in where_in], calls))
        if not rows:
            raise ProftuiError(f"no fleet samples in {url.display()} between "
                               f"{_iso(start)} and {_iso(end)} (wrong labels or time range?)")
    except Exception:
        # Its connection ends too before this one's error is raised, never left running
        # behind: by the same deadline at the latest.
        with contextlib.suppress(Exception):
            side.exception(timeout=max(0.0, client.deadline.left()) + 1.0)
        raise
    stacks, frames, labels, minutes, losses = side.result()
    return Answer(rows, stacks, frames, labels, minutes, start, end, threads,
                  time.monotonic() - began, place, late, losses)


def _rest_of_answer(url: FleetURL, where: str, params: dict, thread: str, group: str,
                    sums: str, end: float, why: str
                    ) -> tuple[dict[int, tuple], dict[int, tuple], dict, list[tuple],
                               list[tuple]]:
    """The stacks, frames, labels, per-minute rows and losses of the window, on a
    connection of their own that ends by monotonic time `end` (the whole query's
    deadline)."""
    client = FleetClient(url)
    try:
        with client.until(end, why):
            return (*_stacks_and_frames(client, url, where, params),
                    _labels(client, url, where, params),
                    _minutes(client, url, where, params, thread, group, sums),
                    _losses(client, url, params))
    finally:
        client.close()


def _losses(client: FleetClient, url: FleetURL, params: dict) -> list[tuple]:
    """What every run of the window lost (its batch markers' counts), whatever its labels:
    (series, label keys, label values, lost).  answer.py keeps the runs that matter: the
    answer's own sessions, and the agents of its hosts (their losses are per host)."""
    lost = client.execute(
        f"SELECT series, sum({schema.LOST_IN}) FROM {_table(url, schema.SAMPLES)} "
        "WHERE toStartOfHour(time) >= toStartOfHour(toDateTime(%(start)s)) "
        "AND time >= toDateTime(%(start)s) AND time < toDateTime(%(end)s) AND batch != 0 "
        f"AND {schema.LOST_IN} > 0 GROUP BY series", params, doing="reading what runs lost")
    if not lost:
        return []
    labels = {series: (keys, values) for series, keys, values in client.execute(
        f"SELECT DISTINCT series, labels.key, labels.value FROM {_table(url, schema.SERIES)} "
        "WHERE series IN %(lost)s", {"lost": tuple(s for s, _n in lost)},
        doing="reading the labels of runs that lost samples")}
    return [(series, *labels.get(series, ([], [])), n) for series, n in lost]


def _stacks_and_frames(client: FleetClient, url: FleetURL, where: str, params: dict
                       ) -> tuple[dict[int, tuple], dict[int, tuple]]:
    """Each stack of the window as its frames' hashes, then each distinct frame once: an
    hour of 60 processes has ~10,000 stacks of ~50 frames but ~1,200 distinct frames
    (0.33 -> 0.09 + 0.14 s).  Frames second: they then cover every stack read."""
    in_window = f"stack IN (SELECT stack FROM {url.database}.{schema.SAMPLES} WHERE {where})"
    table = _table(url, schema.STACKS)
    stacks: dict[int, tuple] = {}
    for row in client.execute(
            f"SELECT stack, arrayMap(({_FRAME_ARGS}) -> cityHash64({_FRAME_ARGS}), "
            f"{_FRAME_COLUMNS}), site_module, site_address, site_function, site_file, "
            f"site_line FROM {table} WHERE {in_window}", params, doing="reading stacks"):
        stacks.setdefault(row[0], row)
    joined = ", ".join(f"{column} AS {arg}" for column, arg in
                       zip(_FRAME_COLUMNS.split(", "), _FRAME_ARGS.split(", "), strict=True))
    frames = {row[0]: row[1:] for row in client.execute(
        f"SELECT DISTINCT cityHash64({_FRAME_ARGS}), {_FRAME_ARGS} FROM {table} "
        f"ARRAY JOIN {joined} WHERE {in_window}", params, doing="reading frames")}
    return stacks, frames


def _labels(client: FleetClient, url: FleetURL, where: str, params: dict
            ) -> dict[int, tuple[list[str], list[str]]]:
    """Each series of the window: its label keys and values."""
    return {series: (keys, values) for series, keys, values in client.execute(
        f"SELECT DISTINCT series, labels.key, labels.value FROM {_table(url, schema.SERIES)} "
        f"WHERE series IN (SELECT series FROM {url.database}.{schema.SAMPLES} "
        f"WHERE {where})", params, doing="reading labels")}


def _minutes(client: FleetClient, url: FleetURL, where: str, params: dict, thread: str,
             group: str, sums: str) -> list[tuple]:
    """The timeline: each series' (and thread's) sums per minute."""
    return [(series, thread_, minute, values) for series, thread_, minute, *values in
            client.execute(
                f"SELECT series, {thread}, toUInt32(toStartOfMinute(time)), {sums} "
                f"FROM {_table(url, schema.SAMPLES)} WHERE {where} GROUP BY series, "
                f"{group}toStartOfMinute(time)", params, doing="reading the timeline")]


# A frame's columns in the stacks table, and their names in a row of the frames query
# (the order answer.py reads them in).
_FRAME_COLUMNS = "functions, modules, build_ids, files, lines, addresses, raw_names, inlined"
_FRAME_ARGS = "fn, md, bi, fl, ln, ad, rn, il"


def _columns(spec: str, place: dict[str, int]) -> list[int]:
    """Where a row of profile spec `spec` has its metrics' sums (`place`: a metric's
    column), in the spec's order."""
    metrics, _calls = parse_spec(spec)
    return [place[m.name] for m in metrics if m.name in place]


def _iso(when: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(when))
