"""A tiny Python twin of the hook runtime's writer (csrc/hook/pt_hook_file.c,
proftui_hook.c): hook files as exact bytes, including corrupt ones, for the decoder's
tests. The file has THREADS thread slots, MODULES module slots and CHUNKS chunks of
CHUNK_NODES nodes."""

from __future__ import annotations

import struct

from proftui.collectors.runtime.wire import FLAG_COUNT_ONLY, KIND_HOOK, FileHeader, encode_header
from proftui.collectors.runtime.wire_hook import CHUNK_PCS, ROOT

CHUNK_NODES = 4
THREADS, MODULES, CHUNKS = 2, 2, 4
THREADS_OFF = 128 + 192
MODULES_OFF = THREADS_OFF + THREADS * 72
CHUNKS_OFF = MODULES_OFF + MODULES * 256
NODES_OFF = (CHUNKS_OFF + CHUNKS * 8 + 63) & ~63
SIZE = NODES_OFF + CHUNKS * CHUNK_NODES * 64
PC_CHUNK = 3  # the last chunk: main's pc table (4 nodes x 64 bytes = 16 entries)


def encode(nodes: list[tuple[int, ...]], *, chunks: list[tuple[int, int]],
           node_size: int = 64, ns_per_tick: float = 0.5, inner: float = 2.0,
           outer: float = 1.0, state: int = 1, period_ns: int = 0,
           thread_ticks: tuple[int, int] = (0, 0),
           pcs: list[tuple[int, int, int]] | None = None) -> bytearray:
    """A hook file; nodes are (global index, fn, parent, module, calls, incl, self[,
    ticks, hook_ticks]).  `period_ns` > 0 makes it a sampled file; `pcs` fills main's
    pc table (pc, node, ticks) in chunk PC_CHUNK."""
    data = bytearray(SIZE)
    flags = FLAG_COUNT_ONLY if period_ns else 0
    data[0:128] = encode_header(FileHeader(KIND_HOOK, 77, 1, flags, 0, period_ns, 128, SIZE, 5,
                                           0, state, "perf task-clock" if period_ns else "tsc"))
    struct.pack_into("<IIIIIIIIQQQQdddQQIIIIQIIQ48x", data, 128, node_size, CHUNK_NODES, CHUNKS,
                     len(chunks) + (pcs is not None), THREADS, 1, MODULES, 2, THREADS_OFF,
                     CHUNKS_OFF, MODULES_OFF, NODES_OFF, ns_per_tick, inner, outer, 0, 0, 0, 0,
                     0, 1 << 20, 0, 27 if period_ns else 0, 1 if period_ns else 0, 0)
    table = (PC_CHUNK, CHUNK_NODES * 64 // 16) if pcs is not None else (0xFFFFFFFF, 0)
    struct.pack_into("<II16sQQQQIIQ", data, THREADS_OFF, 77, 1, b"main", 3, 0, *thread_ticks,
                     *table, 0)
    struct.pack_into("<QQQ232s", data, MODULES_OFF, 0x400000, 0x401000, 0x3FF000, b"/bin/prog")
    # Module 1 is reserved but not published yet (start 0).
    for i, (owner, count) in enumerate(chunks):
        struct.pack_into("<II", data, CHUNKS_OFF + 8 * i, owner, count)
    if pcs is not None:
        struct.pack_into("<II", data, CHUNKS_OFF + 8 * PC_CHUNK, CHUNK_PCS, 0)
        for k, (pc, node, ticks) in enumerate(pcs):
            struct.pack_into("<QII", data, NODES_OFF + PC_CHUNK * CHUNK_NODES * 64 + 16 * k, pc,
                             node, ticks)
    for index, fn, parent, module, calls, incl, self_ticks, *ticks in nodes:
        struct.pack_into("<QIIQQQQQ", data, NODES_OFF + 64 * index, fn, parent, module, calls,
                         incl, self_ticks, *(ticks or (0, 0)))
    return data


TREE = [  # main -> {a (chunk 0), b (chunk 1, published later)}
    (0, 0x400100, ROOT, 1, 1, 1000, 300),
    (1, 0x400200, 0, 1, 10, 400, 400),
    (2, 0x400300, 0, 1, 20, 300, 300),
    (4, 0x400400, 1, 0, 5, 50, 50),  # chunk 1: parent is node 1 of chunk 0
]
