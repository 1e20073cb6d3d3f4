"""A fleet query as a Profile: the server sums each stack's costs over the hosts, labels
and time range asked for, per push session (GROUP BY stack, series), so what comes back
is one row per distinct stack and session however many sample rows matched; the
stacks' frames come in a second query, the sessions' labels in a third.  Each session
is a part of the profile (`t` picks one), named by its host, program and pid; with the
URL's `by=KEY,..` the sessions sharing those labels' values share a part instead.

A fourth query reads each session's totals per minute (GROUP BY series, minute: a row
per session and minute), which the timeline draws; a range picked there is a new
query of that window (`load_window`).  Costs per stack and minute are not read: that
made the hour of 10 hosts 277,000 rows and 6.4 s (bench_fleet.py).

With `cluster=NAME` both queries read through Distributed tables over the cluster's
shards: each shard aggregates its own rows, the server asked merges them.  The label
and stack subqueries name the local tables, so each shard answers them from its own
data (a host pushes its series, stacks and samples to one node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet import schema
from proftui.collectors.fleet.batch import parse_spec
from proftui.collectors.fleet.client import FleetClient
from proftui.collectors.fleet.url import THREAD, FleetURL, parse
from proftui.collectors.model.lines import record_code_cost
from proftui.collectors.model.profile import (
    CallTree,
    CodeSite,
    Frame,
    FrameTable,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.model.slices import MAX_SLICES, Slices, part_totals

MODE = "fleet"


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
    # rows are summed per minute: the window widens to whole minutes
    start, end = schema.bucket(start), -schema.bucket(-end)
    client = FleetClient(url)
    try:
        with client.within():  # the whole query: PROFTUI_FLEET_TIMEOUT, 25 s by default
            client.ensure_schema(create=False)
            if url.cluster:
                client.ensure_distributed(url.cluster)
            return _load(client, url, start, end)
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
    timeline, or the same query broken down another way (`t`, `g`)."""

    url: FleetURL

    def load(self) -> Profile:
        return load(self.url)

    def load_window(self, start: float, end: float) -> Profile:
        return load_window(self.url, start, end)

    def broken_down(self, by: tuple[str, ...]) -> FleetQuery:
        return FleetQuery(replace(self.url, by=by))

    def next_breakdown(self) -> tuple[str, ...]:
        """The breakdown after this query's in BREAKDOWNS (the first after any other)."""
        order = list(BREAKDOWNS)
        at = order.index(self.url.by) if self.url.by in order else -1
        return order[(at + 1) % len(order)]


def _load(client: FleetClient, url: FleetURL, start: int, end: int) -> Profile:
    where, params = _where(url, start, end)
    samples = _table(url, schema.SAMPLES)
    local_samples = f"{url.database}.{schema.SAMPLES}"
    began = time.monotonic()
    sums = ", ".join(f"sum({name})" for name in schema.METRICS)
    # a part per session (or label values), or per session and thread: rows are keyed
    # by (series, thread), thread '' unless by= names it
    thread = "thread" if THREAD in url.by else "''"
    columns: dict[str, list[int]] = {}  # a profile spec -> its metrics' columns
    rows = [(spec, stack, (series, thread_),
             [sums_[c] for c in columns.get(spec) or columns.setdefault(spec, _columns(spec))],
             calls)
            for spec, stack, series, thread_, calls, *sums_ in client.execute(
                f"SELECT profile, stack, series, {thread}, sum(call_count), {sums} "
                f"FROM {samples} WHERE {where} GROUP BY profile, stack, series"
                + (", thread" if thread == "thread" else ""), params,
                doing="aggregating samples")]
    if not rows:
        raise ProftuiError(f"no fleet samples in {url.display()} between "
                           f"{_iso(start)} and {_iso(end)} (wrong labels or time range?)")
    stacks: dict[int, tuple] = {}
    for row in client.execute(
            f"SELECT stack, functions, modules, build_ids, files, lines, addresses, raw_names, "
            f"inlined, site_module, site_address, site_function, site_file, site_line "
            f"FROM {_table(url, schema.STACKS)} WHERE stack IN "
            f"(SELECT stack FROM {local_samples} WHERE {where})", params,
            doing="reading stacks"):
        stacks.setdefault(row[0], row)
    labels = {series: (keys, values) for series, keys, values in client.execute(
        f"SELECT DISTINCT series, labels.key, labels.value FROM {_table(url, schema.SERIES)} "
        f"WHERE series IN (SELECT series FROM {local_samples} WHERE {where})", params,
        doing="reading labels")}
    part_of = {key: part_label(key[0], *labels.get(key[0], ([], [])), url.by, key[1])
               for key in {row[2] for row in rows}}
    profile = build_profile(rows, stacks, part_of)
    profile.slices, late = _timeline(client, url, where, params, start, end, profile, part_of)
    distinct = len({row[1] for row in rows})
    profile.meta = _meta(url, start, end, list(labels.values()), distinct,
                         time.monotonic() - began)
    if late:
        profile.meta.warnings.append(f"{late} minute(s) of push sessions that began while the "
                                     "query ran are left out of the timeline")
    if any(row[1] not in stacks for row in rows):
        profile.meta.warnings.append("some stacks of the samples were not found in the stacks "
                                     "table: their costs show under [unknown stack]")
    return profile


def _columns(spec: str) -> list[int]:
    """Where a row of profile spec `spec` has its metrics' sums, in the spec's order."""
    metrics, _calls = parse_spec(spec)
    return [_COLUMN[m.name] for m in metrics if m.name in _COLUMN]


_COLUMN = {name: i for i, name in enumerate(schema.METRICS)}


def part_label(series: int, keys: list[str], values: list[str], by: tuple[str, ...] = (),
               thread: str = "") -> str:
    """The part a push session's rows go to: "HOST PROGRAM pid N" from its labels (the
    session id in hex where none is set); with `by` (the URL's by=), "KEY=VALUE ..." of
    those labels, so every session with the same values shares one part.  `thread` in
    `by` is the rows' own thread: alone, "HOST PROGRAM THREAD" (a part per thread of
    each session); beside labels, "KEY=VALUE ... THREAD"."""
    labels = tuple(key for key in by if key != THREAD)
    if labels:
        text = " ".join(f"{key}={_label(keys, values, key) or '(none)'}" for key in labels)
        return f"{text} {thread}" if THREAD in by else text
    if THREAD in by:
        head = " ".join(n for n in (_label(keys, values, "host"),
                                    _label(keys, values, "program")) if n)
        return " ".join(t for t in (head or f"series {series:016x}", thread or "(no thread)"))
    pid = _label(keys, values, "pid")
    program = _label(keys, values, "program")
    if program == f"pid {pid}":  # the agent's name for a process whose program it never saw
        program = ""
    named = [_label(keys, values, "host"), program]
    text = " ".join([*(n for n in named if n), *([f"pid {pid}"] if pid else [])])
    return text or f"series {series:016x}"


def build_profile(rows: list[tuple], stacks: dict[int, tuple],
                  parts: dict[Any, str] | None = None) -> Profile:
    """A finalized Profile from aggregated rows (profile spec, stack hash, part key,
    summed costs, summed calls) and stack rows (the stacks table's columns, by hash): its
    tree and one part per part key (`parts` names them; a key is a series, or a series
    and thread)."""
    specs = sorted({row[0] for row in rows})
    metrics: list[Metric] = []
    any_calls = False
    maps: dict[str, tuple[list[int], bool]] = {}
    for spec in specs:
        own, calls = parse_spec(spec)
        any_calls = any_calls or calls
        index = []
        for metric in own:
            if metric not in metrics:
                metrics.append(metric)
            index.append(metrics.index(metric))
        maps[spec] = (index, calls)
    n = len(metrics)
    frames = FrameTable()
    tree = CallTree(n)
    line_costs: dict = {}
    address_costs: dict = {}
    address_sites: dict = {}
    unknown = frames.intern(Frame("[unknown stack]"))
    frame_ids: dict[tuple, int] = {}  # a frame's columns -> its id (stacks share frames)
    # per stack: its frame ids, its leaf's site, its leaf in the merged tree
    paths: dict[int, tuple[list[int], tuple[str, int, CodeSite] | None, int]] = {}
    # the merged tree and the code costs take a stack's sum over parts, once
    merged: dict[int, list[float]] = {}
    merged_calls: dict[int, int] = {}
    labels: list[str] = []
    part_index: dict[str, int] = {}
    part_trees: list[CallTree] = []
    for spec, stack, series, costs, calls in rows:
        found = paths.get(stack)
        if found is None:
            record = stacks.get(stack)
            path = [unknown] if record is None else _frame_ids(record, frames, frame_ids)
            found = paths[stack] = (path, None if record is None else _site(record),
                                    tree.walk(path))
        path = found[0]
        label = (parts or {}).get(series) or part_label(
            series[0] if isinstance(series, tuple) else series, [], [])
        p = part_index.get(label)
        if p is None:
            p = part_index[label] = len(labels)
            labels.append(label)
            part_trees.append(CallTree(n))
        part_leaf = part_trees[p].walk(path)
        index, has_calls = maps[spec]
        values = [0.0] * n
        for i, value in zip(index, costs, strict=False):
            values[i] = value
        part_trees[p].add_self(part_leaf, values)
        total = merged.get(stack)
        if total is None:
            merged[stack] = values
        else:
            for i, value in enumerate(values):
                total[i] += value
        if has_calls and calls:
            part_trees[p].add_calls(part_leaf, int(calls))
            merged_calls[stack] = merged_calls.get(stack, 0) + int(calls)
    for stack, values in merged.items():
        _path, site, leaf = paths[stack]
        tree.add_self(leaf, values)
        if stack in merged_calls:
            tree.add_calls(leaf, merged_calls[stack])
        if site is not None:
            module, address, code = site
            record_code_cost(address_costs, address_sites, line_costs, module, address, code,
                             values)
    profile = Profile(meta=ProfileMeta(mode=MODE), metrics=tuple(metrics), frames=frames,
                      tree=tree, parts=dict(zip(labels, part_trees, strict=True)),
                      line_costs=line_costs, address_costs=address_costs,
                      address_sites=address_sites)
    return profile.finalize()


def _timeline(client: FleetClient, url: FleetURL, where: str, params: dict[str, Any],
              start: int, end: int, profile: Profile,
              part_of: dict[tuple[int, str], str]) -> tuple[Slices, int]:
    """Each part's costs per minute (per wider slice past MAX_SLICES minutes), and the
    minutes of sessions the first query did not see (left out)."""
    sums = ", ".join(f"sum({name})" for name in schema.METRICS)
    columns = [_COLUMN.get(metric.name) for metric in profile.metrics]
    labels = list(profile.parts)
    index = {label: i for i, label in enumerate(labels)}
    minutes = max(1, (end - start) // schema.BUCKET_S)
    width = schema.BUCKET_S * -(-minutes // MAX_SLICES)
    entries, late = [], 0
    thread = "thread" if THREAD in url.by else "''"
    for series, thread_, minute, *values in client.execute(
            f"SELECT series, {thread}, toUInt32(toStartOfMinute(time)), {sums} "
            f"FROM {_table(url, schema.SAMPLES)} WHERE {where} GROUP BY series, "
            + ("thread, " if thread == "thread" else "") + "toStartOfMinute(time)", params,
            doing="reading the timeline"):
        label = part_of.get((series, thread_))
        if label is None:  # a session whose first rows came after the first query
            late += 1
            continue
        entries.append((minute, index[label],
                        [0.0 if c is None else values[c] for c in columns]))
    return part_totals(float(start), float(width), -(-(end - start) // width), labels,
                       entries, len(profile.metrics)), late


def _frame_ids(row: tuple, frames: FrameTable, known: dict[tuple, int]) -> list[int]:
    """The frame ids of a stacks-table row, outermost first (`known`: columns -> id)."""
    _stack, functions, modules, build_ids, files, lines, addresses, raw_names, inlined = row[:9]
    out = []
    for key in zip(functions, modules, files, lines, addresses, raw_names, build_ids, inlined,
                   strict=True):
        fid = known.get(key)
        if fid is None:
            function, module, file, line, address, raw_name, build_id, inline = key
            fid = known[key] = frames.intern(Frame(
                function=function, module=module, file=file or None, line=line or None,
                address=None if address < 0 else address, raw_name=raw_name,
                build_id=build_id, inlined=bool(inline)))
        out.append(fid)
    return out


def _site(row: tuple) -> tuple[str, int, CodeSite] | None:
    module, address, function, file, line = row[9:14]
    if address < 0:
        return None
    return module, address, CodeSite(None if function < 0 else function, file or None,
                                     line or None)


def _meta(url: FleetURL, start: int, end: int, series: list[tuple], stacks: int,
          seconds: float) -> ProfileMeta:
    hosts = sorted({_label(keys, values, "host") for keys, values in series} - {""})
    programs = sorted({_label(keys, values, "program") for keys, values in series} - {""})
    modes = sorted({_label(keys, values, "mode") for keys, values in series} - {""})
    shown = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
    note = (f"fleet query {url.display()}: {_iso(start)} to {_iso(end)}, {len(series)} series "
            f"from {len(hosts)} host{'s' if len(hosts) != 1 else ''} ({shown}); programs: "
            f"{', '.join(programs) or '?'}; modes: {', '.join(modes) or '?'}; {stacks:,} "
            f"distinct stacks, aggregated by the server in {seconds:.2f} s")
    return ProfileMeta(mode=MODE, argv=[url.display()], start_time=float(start),
                       end_time=float(min(end, time.time())), complete=True,
                       warnings=[note], clock="fleet intervals")


def _label(keys: list[str], values: list[str], key: str) -> str:
    return values[keys.index(key)] if key in keys else ""


def _iso(when: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(when))
