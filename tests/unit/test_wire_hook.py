"""The hook-file decoder on exact bytes: a tiny Python twin of the C writer
(csrc/hook/pt_hook_file.c + proftui_hook.c) builds files, including corrupt ones."""

from __future__ import annotations

import struct

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.wire import FLAG_COUNT_ONLY
from proftui.collectors.runtime.wire_hook import (
    INLINED,
    ROOT,
    calibrated,
    compensated_self_ns,
    decode_hook,
    is_published,
    sampled,
    timed,
)

from tests.helpers.hook_file import CHUNKS, SIZE, THREADS_OFF, TREE, encode


def test_decodes_what_is_published() -> None:
    data = decode_hook(bytes(encode(TREE, chunks=[(0, 3), (0, 1)])))
    assert data.header.pid == 77 and data.header.exited and data.header.dropped == 5
    assert data.nodes.index == [0, 1, 2, 4]
    assert data.nodes.fn == [0x400100, 0x400200, 0x400300, 0x400400]
    assert data.nodes.parent == [ROOT, 0, 0, 1]
    assert data.nodes.calls == [1, 10, 20, 5]
    assert data.nodes.module == [1, 1, 1, 0]
    assert data.threads[0].tid == 77 and data.threads[0].name == "main"
    assert data.modules[0] is not None and data.modules[0].path == "/bin/prog"
    assert data.modules[0].bias == 0x3FF000
    assert data.modules[1] is None  # not ready


def test_only_counts_below_the_published_count_are_trusted() -> None:
    raw = encode(TREE, chunks=[(0, 2), (0, 0)])
    assert decode_hook(bytes(raw)).nodes.index == [0, 1]
    raw = encode(TREE, chunks=[(1, 3)])  # owner slot 1 has no tid yet
    assert decode_hook(bytes(raw)).nodes.index == []


def test_compensation_formula() -> None:
    data = decode_hook(bytes(encode(TREE, chunks=[(0, 3), (0, 1)])))
    # node 0: 300 - 1*2 - (10+20)*1 = 268 ticks; node 1: 400 - 10*2 - 5*1 = 375;
    # node 2: 300 - 20*2 = 260; node 4: 50 - 5*2 = 40; times 0.5 ns per tick.
    assert compensated_self_ns(data) == [134.0, 187.5, 130.0, 20.0]
    tiny = decode_hook(bytes(encode([(0, 0x400100, ROOT, 1, 100, 10, 10)], chunks=[(0, 1)])))
    assert compensated_self_ns(tiny) == [0.0]  # never negative


def test_inlined_bit_is_a_flag_not_part_of_the_module_index() -> None:
    tree = [(0, 0x400100, ROOT, 1, 1, 1000, 300), (1, 0x400200, 0, 1 | INLINED, 10, 400, 400),
            (2, 0x400300, 0, INLINED, 20, 300, 300)]
    data = decode_hook(bytes(encode(tree, chunks=[(0, 3)])))
    assert data.nodes.module == [1, 1, 0]
    assert data.nodes.inlined == [False, True, True]


def test_calibration_failure_is_visible() -> None:
    assert calibrated(decode_hook(bytes(encode(TREE, chunks=[(0, 3)]))))
    failed = decode_hook(bytes(encode(TREE, chunks=[(0, 3)], inner=0.0, outer=0.0)))
    assert not calibrated(failed)
    assert compensated_self_ns(failed)[1] == 200.0  # nothing subtracted: 400 ticks * 0.5


def test_unpublished_file_is_skipped_not_an_error() -> None:
    raw = encode(TREE, chunks=[])
    raw[0:8] = b"\0" * 8
    assert not is_published(bytes(raw))
    assert is_published(bytes(encode(TREE, chunks=[])))


@pytest.mark.parametrize(("damage", "message"), [
    (lambda raw: struct.pack_into("<I", raw, 128, 40), "node size 40"),
    (lambda raw: struct.pack_into("<Q", raw, 128 + 56, SIZE), "outside"),
    (lambda raw: struct.pack_into("<d", raw, 128 + 64, 0.0), "ns_per_tick"),
    (lambda raw: struct.pack_into("<I", raw, 8, 99), "version 99"),
    (lambda raw: struct.pack_into("<I", raw, 12, 2), "expected a hook file"),
])
def test_corrupt_files_are_clear_errors(damage, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = encode(TREE, chunks=[(0, 3)])
    damage(raw)
    with pytest.raises(ProftuiError, match=message):
        decode_hook(bytes(raw), "hook.77.ptw")


def test_truncated_file_is_a_clear_error() -> None:
    raw = encode(TREE, chunks=[(0, 3)])
    with pytest.raises(ProftuiError, match=r"hook\.77\.ptw"):
        decode_hook(bytes(raw[:SIZE // 2]), "hook.77.ptw")


def test_sampled_file_has_ticks_per_node_thread_and_pc() -> None:
    tree = [(0, 0x400100, ROOT, 1, 1, 0, 0, 30, 5), (1, 0x400200, 0, 1, 10, 0, 0, 60, 40)]
    pcs = [(0x400210, 1, 50), (0x7F0000001000, 1, 10), (0x400105, 0, 30)]
    data = decode_hook(bytes(encode(tree, chunks=[(0, 2)], period_ns=250_000,
                                    thread_ticks=(3, 1), pcs=pcs)))
    assert sampled(data) and not timed(data)
    assert data.header.period_ns == 250_000 and data.hook.timer_signal == 27
    assert data.nodes.ticks == [30, 60] and data.nodes.hook_ticks == [5, 40]
    assert data.threads[0].ticks == 3 and data.threads[0].hook_ticks == 1
    assert sorted(data.pcs[0]) == sorted(pcs)
    assert data.nodes.index == [0, 1]  # the pc table's chunk holds no nodes


def test_timed_and_count_only_files_are_told_apart() -> None:
    timed_file = decode_hook(bytes(encode(TREE, chunks=[(0, 3)])))
    assert timed(timed_file) and not sampled(timed_file) and timed_file.pcs == {}
    raw = encode(TREE, chunks=[(0, 3)])
    struct.pack_into("<I", raw, 28, FLAG_COUNT_ONLY)
    counted = decode_hook(bytes(raw))
    assert not timed(counted) and not sampled(counted)


def test_pc_table_outside_the_pool_is_ignored() -> None:
    raw = encode(TREE, chunks=[(0, 3)], period_ns=1_000_000, pcs=[(0x400210, 1, 5)])
    struct.pack_into("<I", raw, THREADS_OFF + 56, CHUNKS)  # first chunk past the pool
    assert decode_hook(bytes(raw)).pcs == {0: []}
