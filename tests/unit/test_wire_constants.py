"""The wire's sizes, offsets and constants, asserted on both sides: a C program built from
the runtimes' own headers prints them, and the Python decoders must agree.  A layout or
a constant changed on one side only (the salvage layout, a header field moved) fails
here, not in a user's run."""

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

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include "proftui_wire.h"
#include "proftui_wire_stacks.h"
#include "proftui_wire_sampler.h"
#include "proftui_wire_heap.h"
#include "proftui_wire_hook.h"
#include "pt_attach.h"
#define SHOW(name, value) printf("%s %llu\n", name, (unsigned long long)(value))
int main(void) {
    SHOW("version", PT_WIRE_VERSION);
    SHOW("file_header", sizeof(pt_file_header));
    SHOW("map_entry", sizeof(pt_map_entry));
    SHOW("maplog_entries", PT_MAPLOG_ENTRIES);
    SHOW("stacktab_header", sizeof(pt_stacktab_header));
    SHOW("stack_entry", sizeof(pt_stack_entry));
    SHOW("stacktab_index", PT_STACKTAB_INDEX);
    SHOW("stacktab_entries", PT_STACKTAB_ENTRIES);
    SHOW("stacktab_frames", PT_STACKTAB_FRAMES);
    SHOW("stack_ready", PT_STACK_READY);
    SHOW("stack_none", PT_STACK_NONE);
    SHOW("entry_count_at", offsetof(pt_stacktab_header, entry_count));
    SHOW("stack_dropped_at", offsetof(pt_stacktab_header, dropped));
    SHOW("entry_flags_at", offsetof(pt_stack_entry, flags));
    SHOW("entry_samples_at", offsetof(pt_stack_entry, samples));
    SHOW("sampler_header", sizeof(pt_sampler_header));
    SHOW("sampler_slot", sizeof(pt_sampler_slot));
    SHOW("sampler_slots_offset", PT_SAMPLER_SLOTS_OFFSET);
    SHOW("sampler_nslots", PT_SAMPLER_NSLOTS);
    SHOW("sampler_record_words", PT_SAMPLER_RECORD_WORDS);
    SHOW("sampler_max_frames", PT_SAMPLER_MAX_FRAMES);
    SHOW("sampler_maplog_count_at", offsetof(pt_sampler_header, maplog_count));
    SHOW("sampler_ring_lost_at", offsetof(pt_sampler_header, ring_lost));
    SHOW("slot_tail_at", offsetof(pt_sampler_slot, tail));
    SHOW("heap_header", sizeof(pt_heap_header));
    SHOW("heap_bucket", sizeof(pt_heap_bucket));
    SHOW("heap_maplog_count_at", offsetof(pt_heap_header, maplog_count));
    SHOW("hook_header", sizeof(pt_hook_header));
    SHOW("hook_thread", sizeof(pt_hook_thread));
    SHOW("hook_node", sizeof(pt_hook_node));
    SHOW("hook_pc", sizeof(pt_hook_pc));
    SHOW("hook_chunk", sizeof(pt_hook_chunk));
    SHOW("hook_module", sizeof(pt_hook_module));
    SHOW("hook_live", sizeof(pt_hook_live));
    SHOW("hook_open_entry", sizeof(pt_hook_open_entry));
    SHOW("hook_root", PT_HOOK_ROOT);
    SHOW("hook_inlined", PT_HOOK_INLINED);
    SHOW("hook_chunk_pcs", PT_HOOK_CHUNK_PCS);
    SHOW("hook_timer_signal_at", offsetof(pt_hook_header, timer_signal));
    SHOW("hook_thread_ticks_at", offsetof(pt_hook_thread, ticks));
    SHOW("hook_thread_pcs_chunk_at", offsetof(pt_hook_thread, pcs_chunk));
    SHOW("hook_node_ticks_at", offsetof(pt_hook_node, ticks));
    SHOW("hook_node_hook_ticks_at", offsetof(pt_hook_node, hook_ticks));
    SHOW("hook_timer_user_only", PT_HOOK_TIMER_USER_ONLY);
    SHOW("hook_timer_moved", PT_HOOK_TIMER_SIGNAL_MOVED);
    SHOW("attach_version", PT_ATTACH_VERSION);
    SHOW("attach_counts_ns", PT_ATTACH_COUNTS_NS);
    SHOW("attach_rec_stack", PT_ATTACH_REC_STACK);
    SHOW("attach_rec_counts", PT_ATTACH_REC_COUNTS);
    SHOW("attach_rec_buffers", PT_ATTACH_REC_BUFFERS);
    SHOW("attach_lost_table", PT_ATTACH_LOST_TABLE);
    SHOW("attach_max_frames", PT_ATTACH_MAX_FRAMES);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_side(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    work = tmp_path_factory.mktemp("wire")
    (work / "probe.c").write_text(PROBE)
    subprocess.run(["gcc", "-std=gnu11", "-o", str(work / "probe"), str(work / "probe.c"),
                    *(f"-I{ROOT / 'csrc' / d}" for d in ("common", "sampler", "heap", "hook",
                                                                 "attach"))],
                   check=True)
    out = subprocess.run([str(work / "probe")], capture_output=True, text=True, check=True)
    return {name: int(value) for name, value in (line.split() for line in out.stdout.split("\n")
                                                 if line)}


def test_common_wire_constants_match_c(c_side: dict[str, int]) -> None:
    assert c_side["version"] == wire.VERSION
    assert c_side["file_header"] == wire.HEADER_SIZE
    assert c_side["map_entry"] == wire_maplog.MAP_ENTRY.size
    assert c_side["maplog_entries"] == wire_maplog.MAPLOG_ENTRIES


def test_stack_table(c_side: dict[str, int]) -> None:
    assert c_side["stacktab_header"] == wire_stacks.STACKTAB_HEADER.size
    assert c_side["stack_entry"] == wire_stacks.STACK_ENTRY.size
    assert c_side["stacktab_index"] == wire_stacks.INDEX_CAPACITY
    assert c_side["stacktab_entries"] == wire_stacks.ENTRIES_CAPACITY
    assert c_side["stacktab_frames"] == wire_stacks.FRAMES_CAPACITY
    assert c_side["stack_ready"] == wire_stacks.STACK_READY
    assert c_side["stack_none"] == wire_stacks.STACK_NONE
    assert c_side["entry_count_at"] == wire_stacks.ENTRY_COUNT_OFFSET
    assert c_side["stack_dropped_at"] == wire_stacks.DROPPED_OFFSET
    assert c_side["entry_flags_at"] == 26 and c_side["entry_samples_at"] == 8 * 4


def test_sampler_layout(c_side: dict[str, int]) -> None:
    assert c_side["sampler_header"] == wire_sampler.SAMPLER_HEADER.size
    assert c_side["sampler_slot"] == wire_sampler.SLOT.size
    assert c_side["sampler_slots_offset"] == wire_sampler.SLOTS_OFFSET
    assert c_side["sampler_nslots"] == wire_sampler.NSLOTS
    assert c_side["sampler_record_words"] == wire_sampler.RECORD_WORDS
    assert c_side["sampler_max_frames"] == wire_stacks.MAX_FRAMES
    assert c_side["sampler_maplog_count_at"] == wire_sampler.MAPLOG_COUNT_OFFSET
    assert c_side["sampler_ring_lost_at"] == wire_sampler.RING_LOST_OFFSET
    assert c_side["slot_tail_at"] == wire_sampler.TAIL_OFFSET


def test_heap_layout(c_side: dict[str, int]) -> None:
    assert c_side["heap_header"] == wire_heap.HEAP_HEADER.size
    assert c_side["heap_bucket"] == wire_heap.BUCKET.size
    assert c_side["heap_maplog_count_at"] == wire_heap.MAPLOG_COUNT_OFFSET


def test_hook_layout(c_side: dict[str, int]) -> None:
    from proftui.collectors.runtime import clock

    assert c_side["hook_header"] == wire_hook.HOOK_HEADER_SIZE == wire_hook._HOOK.size
    assert c_side["hook_thread"] == wire_hook.THREAD_SIZE == wire_hook._THREAD.size
    assert c_side["hook_node"] == wire_hook.NODE_SIZE
    assert c_side["hook_pc"] == wire_hook.PC_SIZE
    assert c_side["hook_chunk"] == wire_hook.CHUNK_SIZE
    assert c_side["hook_module"] == wire_hook.MODULE_SIZE
    assert c_side["hook_live"] == wire_hook.LIVE.size
    assert c_side["hook_open_entry"] == wire_hook.OPEN_ENTRY.size
    assert c_side["hook_root"] == wire_hook.ROOT
    assert c_side["hook_inlined"] == wire_hook.INLINED
    assert c_side["hook_chunk_pcs"] == wire_hook.CHUNK_PCS
    assert c_side["hook_timer_signal_at"] == 128  # the first field after the v2 header
    assert c_side["hook_thread_ticks_at"] == 40 and c_side["hook_thread_pcs_chunk_at"] == 56
    assert c_side["hook_node_ticks_at"] == 8 * 5 and c_side["hook_node_hook_ticks_at"] == 8 * 6
    assert c_side["hook_timer_user_only"] == clock.TIMER_USER_ONLY == wire_hook.TIMER_USER_ONLY
    assert c_side["hook_timer_moved"] == clock.TIMER_SIGNAL_MOVED
    assert wire_hook.LAYOUT_THREADS_OFFSET == wire.HEADER_SIZE + wire_hook.HOOK_HEADER_SIZE


def test_attach_stream(c_side: dict[str, int]) -> None:
    from proftui.collectors.attach.collector import MAX_FRAMES

    assert c_side["attach_version"] == wire_attach.VERSION
    assert c_side["attach_counts_ns"] == round(wire_attach.COUNTS_INTERVAL_S * 1e9)
    assert c_side["attach_rec_stack"] == wire_attach.REC_STACK
    assert c_side["attach_rec_counts"] == wire_attach.REC_COUNTS
    assert c_side["attach_rec_buffers"] == wire_attach.REC_BUFFERS
    assert c_side["attach_lost_table"] == wire_attach.LOST_TABLE
    assert c_side["attach_max_frames"] == MAX_FRAMES
