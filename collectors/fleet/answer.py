"""A fleet query's answer as a Profile, broken down any way the answer allows.

The server's rows (query.py fetches them) are one per profile spec, stack, push session
and, when asked, thread: each stack's costs summed over the window.  `profile_of` builds
the calling-context tree and the flat profile's line and address costs from them, and
one part per session, per label value (`by=host`) or per thread (`by=thread`); the same
answer gives every breakdown its rows allow without asking the server again (`t` `g`).
The timeline is each part's totals per minute, from the answer's per-minute rows.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from proftui.collectors.fleet import schema
from proftui.collectors.fleet.batch import parse_spec
from proftui.collectors.fleet.url import THREAD, FleetURL
from proftui.collectors.model import core
from proftui.collectors.model.calltree import gc_paused
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
from proftui.collectors.wording import count as counted
from proftui.collectors.wording import verb

MODE = "fleet"


@dataclass(frozen=True)
class Answer:
    """What the server answered for one window: `rows` (profile spec, stack hash,
    (series, thread), costs in the spec's order, calls), `stacks` (by stack hash: the
    hash, its frames' hashes outermost first, its leaf's site: module, address,
    function, file, line), `frames` (by frame hash: function, module, build id, file,
    line, address, raw name, inlined), `labels` (series -> label keys, values),
    `minutes` (series, thread, minute, the sums of the metrics in `place`: metric name
    -> column); `threads`: rows keep their thread (else ''); `late`: rows of a profile
    pushed after the answer's first read, left out; `losses`: what runs lost."""

    rows: list[tuple]
    stacks: dict[int, tuple]
    frames: dict[int, tuple]
    labels: dict[int, tuple[list[str], list[str]]]
    minutes: list[tuple]
    start: int
    end: int
    threads: bool
    seconds: float  # the server's time for it
    place: dict[str, int]
    late: int = 0
    # What runs lost in the window: (series, label keys, label values, count), any labels
    losses: list[tuple] = field(default_factory=list)

    def gives(self, by: tuple[str, ...]) -> bool:
        """Whether breakdown `by` can be built from these rows (threads need them)."""
        return THREAD not in by or self.threads


def profile_of(answer: Answer, url: FleetURL) -> Profile:
    """The profile of `answer`, its parts per `url.by`."""
    with gc_paused(freeze=True):
        return _profile_of(answer, url)


def _profile_of(answer: Answer, url: FleetURL) -> Profile:
    part_of = {key: part_label(key[0], *answer.labels.get(key[0], ([], [])), url.by,
                               key[1] if THREAD in url.by else "")
               for key in {row[2] for row in answer.rows}}
    profile = build_profile(answer.rows, answer.stacks, answer.frames, part_of)
    profile.slices, late = _timeline(answer, profile, part_of)
    distinct = len({row[1] for row in answer.rows})
    built = profile.meta.warnings
    profile.meta = _meta(url, answer.start, answer.end, list(answer.labels.values()), distinct,
                         answer.seconds)
    profile.meta.warnings.extend(built)
    if late:
        profile.meta.warnings.append(f"{late} minute(s) of push sessions that began while the "
                                     "query ran are left out of the timeline")
    if answer.late:
        profile.meta.warnings.append(f"{answer.late} row(s) of a profile with other metrics, "
                                     "pushed while the query ran, are left out")
    profile.meta.warnings.extend(loss_notes(answer))
    if any(row[1] not in answer.stacks for row in answer.rows):
        profile.meta.warnings.append("some stacks of the samples were not found in the stacks "
                                     "table: their costs show under [unknown stack]")
    return profile


def loss_notes(answer: Answer) -> list[str]:
    """What the runs behind the answer lost in its window, said: its sessions' own losses
    in one note, each agent's of a host the answer holds in one note per host (an agent's
    rings hold every process's samples, so its losses belong to no one process)."""
    hosts = {_label(keys, values, "host") for keys, values in answer.labels.values()} - {""}
    own = 0.0
    by_host: dict[str, float] = {}
    for series, keys, values, lost in answer.losses:
        if series in answer.labels:
            own += lost
        elif (_label(keys, values, "mode") == "agent" and "program" not in keys
              and _label(keys, values, "host") in hosts):
            host = _label(keys, values, "host")
            by_host[host] = by_host.get(host, 0.0) + lost
    notes = []
    if own:
        notes.append(f"{counted(own, 'sample')} (or records) of these runs "
                     f"{verb(own, 'was', 'were')} lost in this window before they were counted "
                     "(their buffers were full): the costs shown are short by that many")
    for host, lost in sorted(by_host.items()):
        notes.append(f"the agent on {host} lost {counted(lost, 'sample')} in this window (its "
                     "rings were full, or they came after their process's last push): "
                     "each process of that host may be short by up to that many")
    return notes


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


def build_profile(rows: list[tuple], stacks: dict[int, tuple], frame_rows: dict[int, tuple],
                  parts: dict[Any, str] | None = None) -> Profile:
    """A finalized Profile from aggregated rows (profile spec, stack hash, part key,
    summed costs, summed calls), stacks and frames (as in Answer): its tree and one
    part per part key (`parts` names them; a key is a series, or a series and thread)."""
    specs = sorted({row[0] for row in rows})
    metrics: list[Metric] = []
    placed: dict[str, tuple[list[int], bool]] = {}
    for spec in specs:
        own, calls = parse_spec(spec)
        index = []
        for metric in own:
            if metric not in metrics:
                metrics.append(metric)
            index.append(metrics.index(metric))
        placed[spec] = (index, calls)
    n = len(metrics)
    # per spec: where its costs go among the metrics (None: in order, as they are), calls
    maps = {spec: (None if index == list(range(n)) else index, calls)
            for spec, (index, calls) in placed.items()}
    frames = FrameTable()
    unknown = frames.intern(Frame("[unknown stack]"))
    frame_ids: dict[int, int] = {}  # a frame's hash -> its id (stacks share frames)
    # Columns, filled once per row in this loop (70,000 rows for an hour of 60 processes);
    # the trees are then made and costed in the native core, a part at a time.
    stack_at: dict[int, int] = {}  # stack hash -> its index here
    paths, offsets = array("i"), array("q", [0])  # each stack's frame ids, outermost first
    sites: list[tuple[str, int, CodeSite] | None] = []
    row_stack = array("q")
    part_rows: list[array] = []  # per part, its rows' indices
    row_costs = [array("d") for _ in range(n)]
    # rows with calls: (stack, calls) for the merged tree; per part, (its row, calls)
    calls_of: list[tuple[int, int]] = []
    part_calls: list[list[tuple[int, int]]] = []
    labels: list[str] = []
    part_index: dict[str, int] = {}
    keyed: dict[Any, int] = {}  # part key -> part index, looked up once per key
    name_of = (parts or {}).get
    for spec, stack, key, costs, calls in rows:
        s = stack_at.get(stack)
        if s is None:
            s = stack_at[stack] = len(sites)
            record = stacks.get(stack)
            paths.extend([unknown] if record is None else
                         _frame_ids(record[1], frame_rows, frames, frame_ids, unknown))
            offsets.append(len(paths))
            sites.append(None if record is None else _site(record))
        part = keyed.get(key)
        if part is None:
            label = name_of(key) or part_label(key[0] if isinstance(key, tuple) else key, [],
                                               [])
            part = part_index.get(label)
            if part is None:
                part = part_index[label] = len(labels)
                labels.append(label)
                part_rows.append(array("q"))
                part_calls.append([])
            keyed[key] = part
        own_rows = part_rows[part]
        own_rows.append(len(row_stack))
        row_stack.append(s)
        order, has_calls = maps[spec]
        if order is None and len(costs) == n:
            values = costs
        else:
            values = [0.0] * n
            for i, value in zip(order or range(n), costs, strict=False):
                values[i] = value
        for column, value in zip(row_costs, values, strict=True):
            column.append(value)
        if has_calls and calls:
            calls_of.append((s, int(calls)))
            part_calls[part].append((len(own_rows) - 1, int(calls)))
    tree = CallTree(n)
    leaves = array("q", core.insert_paths(tree, paths, offsets, None, None, 0))
    rows_n = len(row_stack)
    row_leaf = array("q", (leaves[s] for s in row_stack))
    for column, costs_column in zip(tree.selfs, row_costs, strict=True):
        core.scatter_add(column, row_leaf, costs_column, 0, rows_n)
    # the flat profile's code costs take each stack's sum over parts, in row order
    per_stack = [array("d", bytes(8 * len(sites))) for _ in range(n)]
    for column, costs_column in zip(per_stack, row_costs, strict=True):
        core.scatter_add(column, row_stack, costs_column, 0, rows_n)
    line_costs: dict = {}
    address_costs: dict = {}
    address_sites: dict = {}
    for s, site in enumerate(sites):
        if site is not None:
            module, address, code = site
            record_code_cost(address_costs, address_sites, line_costs, module, address, code,
                             [column[s] for column in per_stack])
    part_trees = [_part_tree(n, rows_of, calls, row_stack, row_costs, paths, offsets)
                  for rows_of, calls in zip(part_rows, part_calls, strict=True)]
    for s, count in calls_of:
        tree.add_calls(leaves[s], count)
    meta = ProfileMeta(mode=MODE)
    if unknown in frame_ids.values():  # frames are read after the stacks: not expected
        meta.warnings.append("some frames of the stacks were not found in the stacks table: "
                             "they show as [unknown stack]")
    profile = Profile(meta=meta, metrics=tuple(metrics), frames=frames,
                      tree=tree, parts=dict(zip(labels, part_trees, strict=True)),
                      line_costs=line_costs, address_costs=address_costs,
                      address_sites=address_sites)
    return profile.finalize()


def _part_tree(n: int, rows: array, calls: list[tuple[int, int]], row_stack: array,
               row_costs: list[array], paths: array, offsets: array) -> CallTree:
    """The tree of a part's `rows`: their stacks, inserted in the order they first came,
    and their costs (a stack in several of its rows adds each, in row order); `calls`:
    (a position in `rows`, its calls) for the rows that count calls."""
    tree = CallTree(n)
    local: dict[int, int] = {}
    sub, sub_offsets, index = array("i"), array("q", [0]), array("q")
    for r in rows:
        s = row_stack[r]
        at = local.get(s)
        if at is None:
            at = local[s] = len(local)
            sub.extend(paths[offsets[s]:offsets[s + 1]])
            sub_offsets.append(len(sub))
        index.append(at)
    leaves = core.insert_paths(tree, sub, sub_offsets, None, None, 0)
    row_leaf = array("q", (leaves[at] for at in index))
    for column, costs in zip(tree.selfs, row_costs, strict=True):
        core.scatter_add(column, row_leaf, array("d", (costs[r] for r in rows)), 0, len(rows))
    for at, count in calls:
        tree.add_calls(row_leaf[at], count)
    return tree


def _timeline(answer: Answer, profile: Profile,
              part_of: dict[tuple[int, str], str]) -> tuple[Slices, int]:
    """Each part's costs per minute (per wider slice past MAX_SLICES minutes), and the
    minutes of sessions the first query did not see (left out)."""
    columns = [answer.place.get(metric.name) for metric in profile.metrics]
    labels = list(profile.parts)
    index = {label: i for i, label in enumerate(labels)}
    start, end = answer.start, answer.end
    minutes = max(1, (end - start) // schema.BUCKET_S)
    width = schema.BUCKET_S * -(-minutes // MAX_SLICES)
    entries, late = [], 0
    for series, thread, minute, values in answer.minutes:
        label = part_of.get((series, thread))
        if label is None:  # a session whose first rows came after the first query
            late += 1
            continue
        entries.append((minute, index[label],
                        [0.0 if c is None else values[c] for c in columns]))
    return part_totals(float(start), float(width), -(-(end - start) // width), labels,
                       entries, len(profile.metrics)), late


def _frame_ids(hashes: list[int], rows: dict[int, tuple], frames: FrameTable,
               known: dict[int, int], unknown: int) -> list[int]:
    """The frame ids of a stack's frame hashes, outermost first (`known`: hash -> id; a
    hash the frames query did not return is the unknown frame)."""
    out = []
    for key in hashes:
        fid = known.get(key)
        if fid is None:
            row = rows.get(key)
            if row is None:
                fid = unknown
            else:
                function, module, build_id, file, line, address, raw_name, inline = row
                fid = frames.intern(Frame(
                    function=function, module=module, file=file or None, line=line or None,
                    address=None if address < 0 else address, raw_name=raw_name,
                    build_id=build_id, inlined=bool(inline)))
            known[key] = fid
        out.append(fid)
    return out


def _site(row: tuple) -> tuple[str, int, CodeSite] | None:
    module, address, function, file, line = row[2:7]
    if address < 0:
        return None
    return module, address, CodeSite(None if function < 0 else function, file or None,
                                     line or None)


def _meta(url: FleetURL, start: int, end: int, series: list[tuple], stacks: int,
          seconds: float) -> ProfileMeta:
    """The profile's header facts and its note (`w`) on what the query matched."""
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
