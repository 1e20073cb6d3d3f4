"""Decoder of the map logs of the LD_PRELOAD runtimes (csrc/common/proftui_wire.h:
`pt_map_entry`, written by csrc/common/pt_maps.c; docs/wire-format.md, "Map log").

The sampler and the heap runtime each keep one in their file: an entry per
executable segment of every object loaded at start or by dlopen, and again
when dlclose unloads it, so addresses in unloaded code still resolve.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from proftui.collectors.runtime.wire import RuntimeFile

# start, end, offset, base, event, build_id_len, build_id, path
MAP_ENTRY = struct.Struct("<QQQQII32s312s")
assert MAP_ENTRY.size == 384
MAP_LOAD, MAP_UNLOAD = 1, 2
MAPLOG_ENTRIES = 1024  # PT_MAPLOG_ENTRIES: entries each runtime's log holds


@dataclass(frozen=True)
class MapEntry:
    """An executable segment the runtime saw loaded (or unloaded)."""

    start: int
    end: int
    offset: int
    base: int
    event: int
    build_id: str  # hex
    path: str


class MapLogReader:
    """A runtime file's map log, read while the runtime appends to it."""

    def __init__(self, file: RuntimeFile, count_at: int, table_at: int, capacity: int) -> None:
        """`count_at` is the file offset of the log's published count, `table_at` of
        entry 0 (both fixed when the runtime created the file)."""
        self.file = file
        self.count_at = count_at
        self.table_at = table_at
        self.capacity = capacity
        self.seen = 0  # entries returned so far

    def new(self) -> list[MapEntry]:
        """The entries published since the last call; those below the published count
        are complete (a release store)."""
        file, first = self.file, self.seen
        count = min(struct.unpack("<I", file.read(self.count_at, 4))[0], self.capacity)
        if count <= first:
            return []
        table = file.read(self.table_at + first * MAP_ENTRY.size,
                          (count - first) * MAP_ENTRY.size)
        out: list[MapEntry] = []
        for i in range(count - first):
            start, end, offset, base, event, bid_len, bid, path = MAP_ENTRY.unpack_from(
                table, i * MAP_ENTRY.size)
            out.append(MapEntry(start, end, offset, base, event, bid[: min(bid_len, 32)].hex(),
                                path.split(b"\0", 1)[0].decode(errors="replace")))
        self.seen = count
        return out


def loaded_segments(entries: Sequence[MapEntry]) -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, path) of each segment a map log says was loaded
    (`symbols.stacks.ImageSpaces.add_loads` takes them)."""
    return [(e.start, e.end, e.offset, e.path) for e in entries if e.event == MAP_LOAD]
