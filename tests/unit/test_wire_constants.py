"""The wire's sizes, offsets and constants, asserted on both sides: a C program built from
the runtimes' own headers (tests/fixtures/wire_probe.c) prints them, and the Python
decoders must agree.  A layout or a constant changed on one side only (the salvage
layout, a header field moved) fails here, not in a user's run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.runtime import (
    wire,
    wire_attach,
    wire_heap,
    wire_hook,
    wire_maplog,
    wire_sampler,
    wire_stacks,
)

from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def c_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    work = tmp_path_factory.mktemp("wire")
    # Built here, not cached by build_fixture: the headers it includes change too.
    subprocess.run(["gcc", "-std=gnu11", "-o", str(work / "probe"),
                    str(FIXTURES / "wire_probe.c"),
                    *(f"-I{ROOT / 'csrc' / d}" for d in ("common", "sampler", "heap", "hook",
                                                                 "attach"))],
                   check=True)
    out = subprocess.run([str(work / "probe")], capture_output=True, text=True, check=True)
    return {name: int(value) for name, value in (line.split() for line in out.stdout.split("\n")
                                                 if line)}


def agree(c_side: dict[str, int], names: str, *python: object) -> None:
    """The C side's values of `names` (space-separated) are `python`, in that order."""
    keys = names.split()
    assert {k: c_side[k] for k in keys} == dict(zip(keys, python, strict=True))


def test_common_wire_constants_match_c(c_side: dict[str, int]) -> None:
    agree(c_side, "version file_header map_entry maplog_entries",
          wire.VERSION, wire.HEADER_SIZE, wire_maplog.MAP_ENTRY.size, wire_maplog.MAPLOG_ENTRIES)


def test_stack_table(c_side: dict[str, int]) -> None:
    s = wire_stacks
    agree(c_side, "stacktab_header stack_entry stacktab_index stacktab_entries stacktab_frames",
          s.STACKTAB_HEADER.size, s.STACK_ENTRY.size, s.INDEX_CAPACITY, s.ENTRIES_CAPACITY,
          s.FRAMES_CAPACITY)
    agree(c_side, "stack_ready stack_none entry_count_at stack_dropped_at", s.STACK_READY,
          s.STACK_NONE, s.ENTRY_COUNT_OFFSET, s.DROPPED_OFFSET)
    agree(c_side, "entry_flags_at entry_samples_at", 26, 8 * 4)


def test_sampler_layout(c_side: dict[str, int]) -> None:
    s = wire_sampler
    agree(c_side, "sampler_header sampler_slot sampler_slots_offset sampler_nslots",
          s.SAMPLER_HEADER.size, s.SLOT.size, s.SLOTS_OFFSET, s.NSLOTS)
    agree(c_side, "sampler_record_words sampler_max_frames sampler_maplog_count_at "
          "sampler_ring_lost_at slot_tail_at", s.RECORD_WORDS, wire_stacks.MAX_FRAMES,
          s.MAPLOG_COUNT_OFFSET, s.RING_LOST_OFFSET, s.TAIL_OFFSET)


def test_heap_layout(c_side: dict[str, int]) -> None:
    agree(c_side, "heap_header heap_bucket heap_maplog_count_at", wire_heap.HEAP_HEADER.size,
          wire_heap.BUCKET.size, wire_heap.MAPLOG_COUNT_OFFSET)


def test_hook_layout(c_side: dict[str, int]) -> None:
    from proftui.collectors.runtime import clock

    h = wire_hook
    assert (h._HOOK.size, h._THREAD.size) == (h.HOOK_HEADER_SIZE, h.THREAD_SIZE)
    agree(c_side, "hook_header hook_thread hook_node hook_pc hook_chunk hook_module",
          h.HOOK_HEADER_SIZE, h.THREAD_SIZE, h.NODE_SIZE, h.PC_SIZE, h.CHUNK_SIZE,
          h.MODULE_SIZE)
    agree(c_side, "hook_live hook_open_entry hook_root hook_inlined hook_chunk_pcs",
          h.LIVE.size, h.OPEN_ENTRY.size, h.ROOT, h.INLINED, h.CHUNK_PCS)
    # the timer signal is the first field after the v2 header
    agree(c_side, "hook_timer_signal_at hook_thread_ticks_at hook_thread_pcs_chunk_at "
          "hook_node_ticks_at hook_node_hook_ticks_at", 128, 40, 56, 8 * 5, 8 * 6)
    assert clock.TIMER_USER_ONLY == h.TIMER_USER_ONLY
    agree(c_side, "hook_timer_user_only hook_timer_moved", clock.TIMER_USER_ONLY,
          clock.TIMER_SIGNAL_MOVED)
    assert h.LAYOUT_THREADS_OFFSET == wire.HEADER_SIZE + h.HOOK_HEADER_SIZE


def test_attach_stream(c_side: dict[str, int]) -> None:
    from proftui.collectors.attach.notes import MAX_FRAMES

    a = wire_attach
    agree(c_side, "attach_version attach_counts_ns attach_max_frames", a.VERSION,
          round(a.COUNTS_INTERVAL_S * 1e9), MAX_FRAMES)
    agree(c_side, "attach_rec_stack attach_rec_counts attach_rec_buffers attach_lost_table",
          a.REC_STACK, a.REC_COUNTS, a.REC_BUFFERS, a.LOST_TABLE)
    agree(c_side, "attach_flag_kernel_time attach_flag_target_timer", a.FLAG_KERNEL_TIME,
          a.FLAG_TARGET_TIMER)
    agree(c_side, "attach_rec_task attach_rec_process attach_process_new attach_process_maps "
          "attach_process_gone attach_rec_forget", a.REC_TASK, a.REC_PROCESS, a.PROCESS_NEW,
          a.PROCESS_MAPS, a.PROCESS_GONE, a.REC_FORGET)
    assert a.METHODS[c_side["attach_method_system"]] == "system"
