"""The agent's bookkeeping on exact stream bytes: each address space its own table (a
process before and after exec, a tid reused by another process), a process that exited
kept until its last changes were taken, the filter, and a stream that names what it
never announced."""

from __future__ import annotations

import struct

import pytest
from proftui.collectors.agent import collector as agent_module
from proftui.collectors.agent import process as process_module
from proftui.collectors.agent.collector import AgentCollector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire_attach import (
    PROCESS_GONE,
    PROCESS_NEW,
    REC_BUFFERS,
    REC_FORGET,
    REC_PROCESS,
    REC_TASK,
    THREAD_GONE,
    THREAD_NEW,
)

from tests.helpers.attach_stream import counts, header, record, stack
from tests.helpers.fleet import flat_by_name, tree_paths

PID = 2_000_000_001  # no such process: everything comes from the stream


def process(pid: int, flags: int, exe: str = "", maps: str = "") -> bytes:
    body = struct.pack("=IIIIQ", pid, flags, len(exe), len(maps), 0)
    return record(REC_PROCESS, body + exe.encode() + maps.encode())


def task(serial: int, pid: int, tid: int, flags: int, comm: bytes = b"t") -> bytes:
    return record(REC_TASK, struct.pack("=IIII16s", serial, pid, tid, flags, comm))


START = header(method=3, pid=0) + record(REC_BUFFERS, struct.pack("=QIIQQ", 0, 2, 8192, 0, 0))


def feed(collector: AgentCollector, data: bytes) -> None:
    collector._consume(data)


def by_program(collector: AgentCollector) -> dict[str, float]:
    return {p.program: sum(p.table.costs[0]) for p in collector.take()}


def test_exec_and_reused_tids_start_new_address_spaces(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    agent = AgentCollector([])
    feed(agent, START
         + process(PID, PROCESS_NEW, "/bin/sh") + task(1, PID, PID, THREAD_NEW)
         + stack(0, 1, [0x1000, 0x2000]) + counts(1, (0, 5, 5_000_000))
         # the same pid after exec: a new program, a new serial for the same tid
         + process(PID, PROCESS_NEW, "/usr/bin/prog") + task(2, PID, PID, THREAD_NEW)
         + stack(1, 2, [0x1000, 0x2000]) + counts(2, (1, 3, 3_000_000))
         # another process reuses a tid of the first: its own serial, its own process
         + task(1, PID, PID, THREAD_GONE)
         + process(PID + 1, PROCESS_NEW, "/usr/bin/other") + task(3, PID + 1, PID, THREAD_NEW)
         + stack(2, 3, [0x1000]) + counts(3, (2, 2, 2_000_000), (1, 1, 1_000_000)))
    assert by_program(agent) == {"sh": 5.0, "prog": 4.0, "other": 2.0}
    gone = {p.program: p for p in agent.take()}
    assert gone["sh"].gone and not gone["prog"].gone
    assert {p.labels()["pid"] for p in gone.values()} == {str(PID), str(PID + 1)}
    # The host profile (-o, --all) has one process per pid: said.
    assert f"1 pid ran two programs in turn, by exec or reuse (pid {PID}: sh then prog)" \
        in " ".join(agent.collect().meta.warnings)


def test_an_exited_process_is_kept_until_its_last_counts(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    monkeypatch.setattr(agent_module, "RELEASE_AFTER_S", 0.0)
    agent = AgentCollector([])
    feed(agent, START + process(PID, PROCESS_NEW, "/bin/prog") + task(1, PID, PID, THREAD_NEW)
         + stack(0, 1, [0x1000]) + counts(1, (0, 5, 5_000_000))
         + process(PID, PROCESS_GONE) + counts(2, (0, 2, 2_000_000)))
    (part,) = agent.take()
    assert part.gone and sum(part.table.costs[0]) == 7.0  # counts after GONE still count
    assert not agent.release(part)  # its last changes are not taken yet (by a pusher)
    assert [delta for _index, delta in part.table.changes()] == [[7.0, 7_000_000.0]]
    assert agent.release(part)
    assert agent.take() == []
    feed(agent, counts(3, (0, 1, 1_000_000)))  # after its end was pushed: said, not lost
    assert "1 sample came after their process's last push" in " ".join(agent.notes())
    # The host profile keeps what the released process had.
    profile = agent.collect()
    assert profile.total(0) == 7.0


def test_the_filter_leaves_other_programs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    agent = AgentCollector([], programs=("prog",))
    feed(agent, START + process(PID, PROCESS_NEW, "/bin/prog") + task(1, PID, PID, THREAD_NEW)
         + process(PID + 1, PROCESS_NEW, "/bin/sh") + task(2, PID + 1, PID + 1, THREAD_NEW)
         + stack(0, 1, [0x1000]) + stack(1, 2, [0x1000])
         + counts(1, (0, 4, 4_000_000), (1, 6, 6_000_000)))
    assert by_program(agent) == {"prog": 4.0}
    assert "6 samples of processes outside the filter (prog)" in " ".join(agent.notes())


def test_a_stack_of_an_unknown_task_is_a_clear_error() -> None:
    agent = AgentCollector([])
    with pytest.raises(ProftuiError, match="stack of unknown task 9"):
        feed(agent, START + stack(0, 9, [0x1000]))


def test_one_stack_sent_again_under_a_new_serial_is_one_row(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """A tid reused by a new thread of the same process gets a new serial, so the
    helper sends a stack it already sent under another id: the process's table keeps
    one row for it, with both ids' samples, before and after the counts are applied."""
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    agent = AgentCollector([])
    feed(agent, START + process(PID, PROCESS_NEW, "/bin/prog") + task(1, PID, PID + 5, THREAD_NEW)
         + stack(0, 1, [0x1000, 0x2000]) + counts(1, (0, 5, 5_000_000))
         + task(1, PID, PID + 5, THREAD_GONE) + task(2, PID, PID + 5, THREAD_NEW)
         + stack(1, 2, [0x1000, 0x2000]) + counts(2, (1, 3, 3_000_000)))
    (part,) = agent.take()
    assert len(part.table) == 1 and list(part.table.costs[0]) == [8.0]
    feed(agent, counts(3, (1, 2, 2_000_000), (0, 1, 1_000_000)))
    (part,) = agent.take()
    assert len(part.table) == 1 and list(part.table.costs[0]) == [11.0]
    assert agent.collect().total(0) == 11.0


def test_one_shared_table_gives_the_profile_the_fold_gives(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Without a pusher (-o, --all), stacks go straight into the host profile: the same
    profile (parts, thread names, costs) as folding per-process tables in, collected
    between counts and at the end."""
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    first = (START + process(PID, PROCESS_NEW, "/bin/sh") + task(1, PID, PID, THREAD_NEW)
             + task(2, PID, PID + 7, THREAD_NEW, b"worker")
             + stack(0, 1, [0x1000, 0x2000]) + stack(1, 2, [0x1000, 0x3000])
             + counts(1, (0, 5, 5_000_000), (1, 2, 2_000_000)))
    then = (process(PID, PROCESS_NEW, "/usr/bin/prog") + task(3, PID, PID, THREAD_NEW)
            + stack(2, 3, [0x1000, 0x2000]) + counts(2, (2, 3, 3_000_000), (0, 1, 1_000_000))
            + process(PID + 1, PROCESS_NEW, "/usr/bin/other")
            + task(4, PID + 1, PID + 1, THREAD_NEW) + stack(3, 4, [0x1000])
            + counts(3, (3, 4, 4_000_000), (2, 1, 1_000_000))
            # known from its TASK first (its own table until its maps come), then filled in
            + task(5, PID + 2, PID + 2, THREAD_NEW) + stack(4, 5, [0x1000, 0x4000])
            + counts(4, (4, 2, 2_000_000))
            + process(PID + 2, PROCESS_NEW, "/usr/bin/late") + counts(5, (4, 1, 1_000_000)))
    profiles = []
    for pushed in (True, False):
        agent = AgentCollector([], pushed=pushed)
        assert agent._shared is not pushed
        feed(agent, first)
        middle = agent.collect()
        feed(agent, then)
        profiles.append((middle, agent.collect()))
    (folded_middle, folded), (shared_middle, shared) = profiles
    for a, b in ((folded_middle, shared_middle), (folded, shared)):
        assert {label: tree_paths(a, tree) for label, tree in a.parts.items()} == \
            {label: tree_paths(b, tree) for label, tree in b.parts.items()}
        assert tree_paths(a) == tree_paths(b) and flat_by_name(a) == flat_by_name(b)
        assert a.meta.threads == b.meta.threads
        assert sorted(a.meta.warnings) == sorted(b.meta.warnings)
    assert shared.total(0) == 19.0 and set(shared.parts) == {
        f"pid {PID} tid {PID}", f"pid {PID} tid {PID + 7}", f"pid {PID + 1} tid {PID + 1}",
        f"pid {PID + 2} tid {PID + 2}"}
    assert shared.meta.threads[PID + 2] == "late"
    assert AgentCollector([], pushed=False, programs=("prog",))._shared is False


class FakeHelper:
    """Records what the collector asks of its helper."""

    def __init__(self) -> None:
        self.forgets = 0

    def forget(self) -> bool:
        self.forgets += 1
        return True


def forget(stacks: int) -> bytes:
    return record(REC_FORGET, struct.pack("=I", stacks))


def test_a_forgotten_table_is_renewed_once_pushed_and_nothing_is_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--max-stacks: at that many stacks the helper is asked to forget them; after its
    FORGET its ids start at 0 again and each stack comes again.  Every sample counts
    once: those before the FORGET in the old table (renewed only once a pusher took
    its changes), those after in a new one, even when both ids of one stack are applied
    together."""
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    agent = AgentCollector([], keep_profile=False, max_stacks=2)
    helper = agent._helper = FakeHelper()  # type: ignore[assignment]
    feed(agent, START + process(PID, PROCESS_NEW, "/bin/prog") + task(1, PID, PID, THREAD_NEW)
         + stack(0, 1, [0x1000, 0x2000]) + stack(1, 1, [0x1000, 0x3000])
         + counts(1, (0, 5, 5_000_000), (1, 1, 1_000_000)))
    (part,) = agent.take()
    old = part.table
    assert helper.forgets == 1 and list(old.costs[0]) == [5.0, 1.0]
    assert agent.take() == [part] and helper.forgets == 1  # asked once, until FORGET
    # Counts of the old id 0 and, after the FORGET, of the same stack as id 0 again.
    feed(agent, counts(2, (0, 2, 2_000_000)) + forget(2)
         + stack(0, 1, [0x1000, 0x2000]) + counts(3, (0, 3, 3_000_000)))
    (part,) = agent.take()  # the old table's costs were not taken yet: kept
    assert part.table is old and list(old.costs[0]) == [10.0, 1.0]
    assert sorted(d[0] for _i, d in old.changes()) == [1.0, 10.0]  # a pusher takes them
    feed(agent, counts(4, (0, 4, 4_000_000)))
    (part,) = agent.take()
    assert part.table is not old and list(part.table.costs[0]) == [4.0]
    assert set(part.keys) == {2}  # the old ids' stacks are forgotten
    assert agent.counted() == (1, 15) and helper.forgets == 1
    assert "forgot the stacks it held 1 time (at 2, --max-stacks)" in " ".join(agent.notes())


def test_a_kept_profile_never_forgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """-o keeps the whole run: no --max-stacks."""
    monkeypatch.setattr(process_module, "executable_build_id", lambda _pid, _exe: "")
    agent = AgentCollector([], keep_profile=True, max_stacks=100)
    assert agent.max_stacks == 0
