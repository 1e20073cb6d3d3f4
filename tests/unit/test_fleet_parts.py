"""Fleet pieces without a server: URLs, stack hashes, batches, the spool's bound and
privacy, and the push loop's exactly-once rule against a server that fails on purpose."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet import is_fleet_url
from proftui.collectors.fleet import spool as spool_module
from proftui.collectors.fleet.batch import Batch, metric_spec, parse_spec
from proftui.collectors.fleet.client import sample_columns
from proftui.collectors.fleet.intervals import SnapshotIntervals, TableIntervals
from proftui.collectors.fleet.pusher import Pusher
from proftui.collectors.fleet.schema import LOST_IN, METRICS
from proftui.collectors.fleet.spool import Spool
from proftui.collectors.fleet.stacks import StackHasher, StackRecord, series_hash
from proftui.collectors.fleet.url import parse, parse_label, parse_time
from proftui.collectors.model.profile import CPU_NS, SAMPLES, CodeSite, Frame, Profile, ProfileMeta
from proftui.collectors.stacktable.builder import StackProfile

MAIN = Frame("main", "/bin/prog", "prog.c", 10, 0x1000, build_id="ab")
WORK = Frame("work", "/bin/prog", "prog.c", 20, 0x1100, build_id="ab")
INL = Frame("helper", "/bin/prog", "h.h", 3, None, inlined=True)


# -- URLs -------------------------------------------------------------------------------


FULL_URL = ("clickhouse://me:pw@db.example:9440/prof?from=-15m&to=now&host=a&host=b&"
            "build=x1&cluster=c2")


def test_url_parts() -> None:
    url = parse(FULL_URL)
    assert (url.host, url.port, url.database, url.user, url.password) == (
        "db.example", 9440, "prof", "me", "pw")
    assert url.filters == (("host", ("a", "b")), ("build", ("x1",)))
    assert url.cluster == "c2"
    assert parse("clickhouse://h/db").port == 9000


def test_url_time_window() -> None:
    assert parse(FULL_URL).window(now=10_000.0) == (10_000 - 900, 10_001)
    assert parse("clickhouse://h/db").window(now=7200.0) == (3600, 7201)  # default: last hour


def test_url_display_hides_the_password() -> None:
    shown = parse(FULL_URL).display()
    assert "pw" not in shown and shown.startswith("clickhouse://me@db.example:9440/prof?from=")


def test_times_iso_and_relative() -> None:
    assert parse_time("2026-01-31T12:00:00Z", 0) == 1769860800
    assert parse_time("2026-01-31T13:00:00+01:00", 0) == 1769860800
    assert parse_time("-2h", 10_000) == 10_000 - 7200
    assert parse_time("-1d", 100_000) == 100_000 - 86400
    with pytest.raises(ProftuiError, match="not a time"):
        parse_time("yesterday", 0)


def test_url_breakdown_by_labels() -> None:
    url = parse("clickhouse://h/db?by=host,program&by=host&build=x1")
    assert url.by == ("host", "program") and url.filters == (("build", ("x1",)),)
    assert parse(url.display()).by == url.by
    assert parse("clickhouse://h/db").by == ()
    assert parse("clickhouse://h/db?by=host,thread").by == ("host", "thread")


@pytest.mark.parametrize("text", [
    "clickhouse://", "http://h/db", "clickhouse://h", "clickhouse://h/bad-name",
    "clickhouse://h:70000/db", "clickhouse://h/db?from=-1h&to=-2h", "clickhouse://h/db?x y=1",
    "clickhouse://h/db#frag", "clickhouse://h/db?by=a b",
    "clickhouse://h/db?by=",
])
def test_malformed_urls_are_one_line_errors(text: str) -> None:
    with pytest.raises(ProftuiError) as info:
        parse(text)
    assert "\n" not in str(info.value)


def test_credentials_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFTUI_CLICKHOUSE_USER", "envuser")
    monkeypatch.setenv("PROFTUI_CLICKHOUSE_PASSWORD", "envpw")
    url = parse("clickhouse://h/db")
    assert (url.user, url.password) == ("envuser", "envpw")
    assert "envpw" not in url.display() and "envpw" not in repr(url)
    assert parse("clickhouse://u:p@h/db").password == "p"  # the URL wins


def test_push_url_takes_no_query() -> None:
    with pytest.raises(ProftuiError, match="without a query"):
        parse("clickhouse://h/db?host=a", query=False)


def test_labels_are_key_equals_value() -> None:
    assert parse_label("team=db=x") == ("team", "db=x")
    for bad in ("novalue", "=x", "from=1", "bad key=1", "thread=x"):
        with pytest.raises(ProftuiError):
            parse_label(bad)


def test_fleet_urls_are_told_from_files() -> None:
    assert is_fleet_url("clickhouse://h/db") and not is_fleet_url("run.proftui")


# -- hashes and batches -----------------------------------------------------------------


def test_stack_hash_is_a_stable_identity() -> None:
    site = ("/bin/prog", 0x1104, CodeSite(0x1100, "prog.c", 22))
    one, two = StackHasher(), StackHasher()
    h = one.stack([MAIN, WORK], site)
    assert h == two.stack([MAIN, WORK], site)  # another process computes the same
    assert 0 <= h < 1 << 64
    assert h != one.stack([MAIN, WORK], None)
    assert h != one.stack([MAIN, WORK, INL], site)
    assert one.stack([MAIN, WORK], site) != one.stack([WORK, MAIN], site)
    # the chain a tree walk extends gives the same hash
    chain = one.extend(one.extend(b"", one.frame_digest(MAIN)), one.frame_digest(WORK))
    assert one.finish(chain, site) == h
    assert series_hash({"a": "1", "b": "2"}) == series_hash({"b": "2", "a": "1"})


def test_batch_round_trip() -> None:
    spec = metric_spec((SAMPLES, CPU_NS), calls=True)
    assert parse_spec(spec) == ((SAMPLES, CPU_NS), True)
    site = ("/bin/prog", 0x1104, CodeSite(0x1100, "prog.c", 22))
    batch = Batch(batch_id=7, time=1000, end=1010.5, series=99, labels={"host": "é"},
                  spec=spec, threads=["pid 1 tid 1", "pid 1 tid 2"])
    for i, (thread, stack) in enumerate(((0, 5), (1, 2**64 - 1))):
        batch.thread.append(thread)
        batch.stack.append(stack)
        batch.costs.extend([i + 1.0, 1e6 * (i + 1)])
        batch.calls.append(3 * i)
    batch.stacks = {5: StackRecord((MAIN, WORK, INL), site), 2**64 - 1: StackRecord((MAIN,))}
    batch.lost = 12
    back = Batch.decode(batch.encode())
    assert back == batch
    assert back.weight() == 3.0
    columns = sample_columns(back)  # cost rows, then the marker with what was lost
    samples = columns[8 + METRICS.index(LOST_IN)]
    assert columns[4] == [0, 0, 7] and samples == [1.0, 2.0, 12.0]
    with pytest.raises(ProftuiError):
        Batch.decode(batch.encode()[:-3])
    with pytest.raises(ProftuiError):
        Batch.decode(b"garbage")


def test_batch_of_an_older_proftui_still_decodes() -> None:
    """Spool files an earlier session left hold each stack's frames whole (no table)."""
    import json
    import struct

    batch = Batch(batch_id=3, time=1, end=2.0, series=1, labels={}, spec="samples:count",
                  threads=["t"])
    batch.thread.append(0)
    batch.stack.append(5)
    batch.costs.append(4.0)
    batch.stacks = {5: StackRecord((MAIN, WORK, MAIN), None)}
    data = batch.encode()
    (size,) = struct.unpack_from("<I", data, 8)
    header = json.loads(data[12:12 + size])
    assert len(header["frames"]) == 2  # MAIN once
    table = header.pop("frames")
    header["stacks"] = [[h, [table[i] for i in ids], site] for h, ids, site in header["stacks"]]
    head = json.dumps(header).encode()
    old = data[:8] + struct.pack("<I", len(head)) + head + data[12 + size:]
    assert Batch.decode(old) == batch


# -- intervals --------------------------------------------------------------------------


def test_table_intervals_hand_out_each_change_once() -> None:
    table = StackProfile((SAMPLES, CPU_NS))
    a = table.stack_of_frames("a", "pid 1 tid 1", [MAIN, WORK])
    b = table.stack_of_frames("b", "pid 1 tid 2", [MAIN, WORK])
    source = TableIntervals([table], StackHasher())
    table.set(a, (3, 3000))
    table.set(b, (1, 1000))
    rows = source.take()
    assert sorted(rows.costs.values()) == [[1.0, 1000.0], [3.0, 3000.0]]
    assert {k[0] for k in rows.costs} == {"pid 1 tid 1", "pid 1 tid 2"}
    assert len({k[1] for k in rows.costs}) == 1  # one stack, two threads
    assert source.take().costs == {}
    table.set(a, (5, 5000))
    assert list(source.take().costs.values()) == [[2.0, 2000.0]]


def test_table_interval_keys_are_each_stacks_own_hash() -> None:
    """A stack's hash is worked out from its callers' (a tree node's prefix, kept): the
    same value StackHasher gives its frames, for stacks sharing callers at any depth,
    added across intervals, in two parts, and after a rebuild renumbers the nodes."""
    import random

    rng = random.Random(7)
    names = [Frame(f"f{i}", "/bin/prog", "prog.c", i, 0x1000 + 16 * i, build_id="ab")
             for i in range(12)]
    table = StackProfile((SAMPLES, CPU_NS))
    source = TableIntervals([table], StackHasher())
    want: dict[int, tuple[Frame, ...]] = {}
    for interval in range(4):
        for n in range(60):
            frames = [MAIN, *rng.choices(names, k=rng.randint(0, 9)), rng.choice([WORK, INL])]
            site = ("/bin/prog", 0x2000 + n, CodeSite(0x1100, "prog.c", n))
            index = table.stack_of_frames((interval, n), f"pid 1 tid {1 + n % 2}", frames,
                                          site)
            table.set(index, (1, 1000))
            want[StackHasher().stack(frames, site)] = tuple(frames)
        if interval == 2:
            table.rebuild()
        rows = source.take()
        assert {stack for _thread, stack in rows.costs} <= set(want)
    assert {h: r.frames for h, r in source.records.items()} == want


def test_snapshot_intervals_are_differences_with_calls() -> None:
    def profile(work: float, calls: int) -> Profile:
        p = Profile(meta=ProfileMeta(mode="instrument"), metrics=(CPU_NS,))
        node = p.tree.add_stack([p.frames.intern(MAIN), p.frames.intern(WORK)], [work],
                                calls=calls)
        node.parent.calls = 1  # type: ignore[union-attr]
        return p.finalize()

    source = SnapshotIntervals(StackHasher())
    first = source.take(profile(10.0, 2))
    assert source.has_calls and sorted(first.costs.values()) == [[0.0], [10.0]]
    second = source.take(profile(25.0, 5))
    assert list(second.costs.values()) == [[15.0]] and list(second.calls.values()) == [3]


# -- the spool --------------------------------------------------------------------------


def _batch(n: int, weight: float) -> Batch:
    batch = Batch(batch_id=n, time=n, end=n + 1.0, series=1, labels={}, spec="samples:count",
                  threads=["t"])
    batch.thread.append(0)
    batch.stack.append(n)
    batch.costs.append(weight)
    return batch


def _full_spool(root: Path) -> Spool:
    """A spool of 600 bytes at most, given ten batches of weight 10."""
    spool = Spool("h:9000/db", max_bytes=600, root=root)
    for n in range(10):
        spool.put(_batch(n, 10.0))
        spool.write()  # each interval's send failed
    return spool


def test_spool_files_are_private(tmp_path: Path) -> None:
    spool = _full_spool(tmp_path)
    assert stat.S_IMODE(os.stat(spool.path).st_mode) == 0o700
    files = sorted(spool.path.glob("*.batch"))
    assert files and all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)


def test_spool_over_its_bound_counts_the_oldest_it_drops(tmp_path: Path) -> None:
    spool = _full_spool(tmp_path)
    assert spool.pending_bytes <= 600 and spool.dropped_batches == 10 - len(spool)
    assert spool.dropped_weight == 10.0 * spool.dropped_batches
    item = spool.oldest()
    assert item is not None and spool.load(item).batch_id == 10 - len(spool)


def test_spool_keeps_the_newest_batches_decoded_up_to_its_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interval's batches (one per process, for the agent) are sent without reading
    them back; past the bytes kept, the older ones are read from their files, equal."""
    one = len(_batch(0, 1.0).encode())
    monkeypatch.setattr(spool_module, "KEEP_DECODED_BYTES", 3 * one)
    spool = Spool("h:9000/db", root=tmp_path)
    for n in range(5):
        spool.put(_batch(n, float(n)))
        spool.write()
    kept = [item.batch is not None for item in spool.items()]
    assert kept == [False, False, True, True, True]
    while (item := spool.oldest()) is not None:
        batch = spool.load(item)
        assert batch.costs.tolist() == [float(batch.batch_id)]
        spool.done(item)
    spool.put(_batch(9, 9.0))
    assert [item.batch is not None for item in spool.items()] == [True]


def test_next_session_adopts_the_batches_left(tmp_path: Path) -> None:
    spool = _full_spool(tmp_path)
    files = sorted(spool.path.glob("*.batch"))
    assert not spool.close()  # batches left: the directory stays for the next session
    later = Spool("h:9000/db", root=tmp_path)
    assert later.adopt() == len(files) and not spool.path.exists()
    other = Spool("elsewhere:9000/db", root=tmp_path)
    assert other.adopt() == 0
    while (item := later.oldest()) is not None:
        later.done(item)
    assert later.close() and other.close()


# -- exactly once -----------------------------------------------------------------------


class FlakyClient:
    """Inserts that land but report a failure (the ack lost), or fail outright."""

    def __init__(self) -> None:
        self.rows: list[int] = []  # batch ids inserted
        self.inserts: list[list[int]] = []  # the batch ids of each insert
        self.mode = "ok"

    def has_batch(self, batch: Batch) -> bool:
        if self.mode == "down":
            raise ProftuiError("cannot reach ClickHouse")
        return batch.batch_id in self.rows

    def insert(self, batches: list[Batch]) -> None:
        if self.mode == "down":
            raise ProftuiError("cannot reach ClickHouse")
        self.rows.extend(batch.batch_id for batch in batches)
        self.inserts.append([batch.batch_id for batch in batches])
        if self.mode == "lost-ack":
            raise ProftuiError("cannot reach ClickHouse (connection reset)")

    def close(self) -> None:
        pass

    def within(self, seconds: float | None = None) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def until(self, end: float, why: str) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


def test_a_landed_insert_whose_ack_was_lost_is_not_sent_again(tmp_path: Path,
                                                               monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("proftui.collectors.fleet.pusher.FleetClient", lambda url: FlakyClient())
    pusher = Pusher(parse("clickhouse://h/db", query=False), {})
    pusher.spool = Spool("h:9000/db", root=tmp_path)
    client = pusher.client
    assert isinstance(client, FlakyClient)
    for n in range(3):
        pusher.spool.put(_batch(n, 1.0))
    client.mode = "lost-ack"
    assert not pusher.send_pending()  # landed, but the pusher cannot know
    client.mode = "down"
    assert not pusher.send_pending()
    client.mode = "ok"
    assert pusher.send_pending()
    assert client.rows == [0, 1, 2]  # each once
    assert pusher.stats.duplicates_avoided == 1 and pusher.stats.sent == 2
    pusher.spool.close()


def test_the_batches_of_one_interval_go_in_one_insert(tmp_path: Path,
                                                       monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An agent puts a batch per process each interval: they go in one insert (one
    statement per table, its rows in one partition: all or none land), each interval
    apart, at most MAX_ROWS rows; after a lost answer the group is looked up, not sent
    again."""
    monkeypatch.setattr("proftui.collectors.fleet.pusher.FleetClient", lambda url: FlakyClient())
    monkeypatch.setattr("proftui.collectors.fleet.pusher.MAX_ROWS", 3)
    pusher = Pusher(parse("clickhouse://h/db", query=False), {})
    pusher.spool = Spool("h:9000/db", root=tmp_path)
    client = pusher.client
    assert isinstance(client, FlakyClient)
    for n, start in enumerate((5, 5, 5, 5, 6, 6)):
        batch = _batch(n, 1.0)
        batch.time, batch.series = start, 100 + n
        pusher.spool.put(batch)
    client.mode = "lost-ack"
    assert not pusher.send_pending()  # the first three (MAX_ROWS) landed, unknown to it
    client.mode = "ok"
    assert pusher.send_pending()
    assert client.inserts == [[0, 1, 2], [3], [4, 5]]
    assert client.rows == [0, 1, 2, 3, 4, 5]
    assert (pusher.stats.sent, pusher.stats.duplicates_avoided) == (3, 3)
    pusher.spool.close()


def test_one_insert_of_many_batches_has_columns_of_one_length() -> None:
    """The columns of a group's insert: every batch's rows and marker, each column as
    long as the others (a batch's metric columns may share one list of zeros), each
    stack and new series once."""
    pytest.importorskip("clickhouse_driver", reason="clickhouse-driver is not installed")
    from proftui.collectors.fleet.client import FleetClient

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple[str, list[list]]] = []

        def execute(self, sql: str, params: list[list], **kwargs: object) -> None:
            self.calls.append((sql.split()[2], params))

    client = FleetClient(parse("clickhouse://h/db"))
    recorder = Recorder()
    client._client = recorder  # type: ignore[assignment]
    batches = []
    for n in range(3):
        batch = _batch(n, 1.0 + n)
        batch.series = 7 if n < 2 else 8
        batch.stacks = {n % 2: StackRecord((MAIN,))}
        batches.append(batch)
    client.insert(batches)
    client.insert([_batch(3, 1.0)])  # series 1: new; 7 and 8 known
    (t1, stacks), (t2, series), (t3, samples), (t4, later_series), (t5, _) = recorder.calls
    assert (t1, t2, t3, t4, t5) == ("db.proftui_stacks", "db.proftui_series",
                                    "db.proftui_samples", "db.proftui_series",
                                    "db.proftui_samples")
    assert stacks[0] == [0, 1] and series[0] == [7, 8] and later_series[0] == [1]
    assert {len(column) for column in samples} == {6}  # 3 rows and 3 markers
    assert samples[3] == [0, 0, 1, 0, 2, 0]  # stack hashes, then each marker's 0
    assert samples[4] == [0, 0, 0, 1, 0, 2]  # the markers carry the batch ids
    assert samples[8] == [1.0, 0.0, 2.0, 0.0, 3.0, 0.0]  # samples: costs, markers 0


def test_a_batch_is_written_to_the_spool_only_when_its_send_failed(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The server took it at once: no file.  It did not: on disk (private), sent from
    there later; what is left at the end stays for the next session."""
    monkeypatch.setattr("proftui.collectors.fleet.pusher.FleetClient", lambda url: FlakyClient())
    pusher = Pusher(parse("clickhouse://h/db", query=False), {})
    spool = pusher.spool = Spool("h:9000/db", root=tmp_path)
    client = pusher.client
    assert isinstance(client, FlakyClient)
    spool.put(_batch(0, 1.0))
    assert pusher.send_pending() and not list(spool.path.glob("*.batch"))
    client.mode = "down"
    spool.put(_batch(1, 1.0))
    assert not pusher.send_pending()
    files = list(spool.path.glob("*.batch"))
    assert len(files) == 1 and stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600
    spool.put(_batch(2, 1.0))  # the session ends before its first attempt
    assert not spool.close() and len(list(spool.path.glob("*.batch"))) == 2
    later = Spool("h:9000/db", root=tmp_path)
    assert later.adopt() == 2
    client.mode = "ok"
    pusher.spool = later
    assert pusher.send_pending() and client.rows == [0, 1, 2]
    assert later.close()


def test_what_the_run_lost_goes_once_with_its_own_series() -> None:
    pusher = Pusher(parse("clickhouse://h/db", query=False), {})
    pusher._series, pusher._labels = 1, {"host": "h", "mode": "agent"}
    source = SnapshotIntervals(StackHasher())
    other = _batch(5, 1.0)
    other.series = 2  # a process's own series (agent): its batch carries nothing lost
    batches = [other]
    pusher._add_lost(batches, 0, 0.0, 10.0, source)
    assert batches == [other]
    pusher._add_lost(batches, 30, 10.0, 20.0, source)  # lost 30 so far: a batch of its own
    alone = batches[1]
    assert (alone.series, alone.labels, alone.lost, len(alone), other.lost) == (
        1, {"host": "h", "mode": "agent"}, 30, 0, 0)
    assert sample_columns(alone)[8 + METRICS.index(LOST_IN)] == [30.0]
    own = _batch(6, 1.0)
    pusher._add_lost([own], 30, 20.0, 30.0, source)  # nothing new
    assert own.lost == 0
    pusher._add_lost([own], 45, 30.0, 40.0, source)  # 15 more: with the run's first batch
    assert own.lost == 15


def test_missing_driver_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_driver(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("clickhouse_driver"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_driver)
    from proftui.collectors.fleet.client import FleetClient

    with pytest.raises(ProftuiError, match=r"pip install 'proftui\[fleet\]'"):
        FleetClient(parse("clickhouse://h/db"))


def test_the_stacks_remembered_as_sent_stay_bounded(tmp_path: Path,
                                                    monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An agent sends new stacks for days: the hashes it remembers as on the server start
    afresh past MAX_CONFIRMED (a stack sent again is one row there)."""
    monkeypatch.setattr("proftui.collectors.fleet.pusher.FleetClient", lambda url: FlakyClient())
    monkeypatch.setattr("proftui.collectors.fleet.pusher.MAX_CONFIRMED", 5)
    pusher = Pusher(parse("clickhouse://h/db", query=False), {})
    pusher.spool = Spool("h:9000/db", root=tmp_path)
    for n in range(4):
        batch = _batch(n, 1.0)
        batch.stacks = {10 * n + k: StackRecord((MAIN,)) for k in range(2)}
        pusher.spool.put(batch)
        assert pusher.send_pending()
        assert len(pusher._confirmed) <= 5 and set(batch.stacks) <= pusher._confirmed


def test_record_without_push_loads_no_fleet_code() -> None:
    """`proftui record`'s fixed cost: the ClickHouse client loads only with --push."""
    import subprocess
    import sys

    code = ("import sys; from proftui.tui.arguments import build_parser; "
            "build_parser('record').parse_args(['-o', 'x.proftui', 'prog']); "
            "print(sorted(m for m in sys.modules if 'clickhouse' in m or '.fleet' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
