"""Import gperftools CPU profiles (the files CPUPROFILE=... / ProfilerStart write).

Layout (gperftools docs/cpuprofile-fileformat.html), in native-endian machine
words (`W` = 4 or 8 bytes, as the writing process):

    header   0, 3, 0, sampling period (µs), 0
    records  count, depth, pc_1 ... pc_depth     (pc_1 = interrupted pc, leaf first;
                                                  the others are return addresses)
    trailer  0, 1, 0
    then     the text of /proc/self/maps at the time the profile was written

Word size and byte order are found from the header.  Addresses are resolved
through the embedded maps to (module, link-time address) and symbolized from
the binaries on this machine (collectors.symbols); missing binaries leave
`module+0xoffset` names.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers.files import read_profile
from proftui.collectors.model.profile import CPU_NS, SAMPLES, Profile, ProfileMeta

if TYPE_CHECKING:
    from proftui.collectors.symbols.stacks import StackFrames

MAX_DEPTH = 4096  # gperftools stores at most 64 frames; more means a corrupt file
_HEADER_WORDS = 5


def sniff(head: bytes) -> str | None:
    """The struct format prefix ('<Q', '>I', ...) if `head` starts a gperftools profile."""
    for fmt in ("<Q", ">Q", "<I", ">I"):
        size = struct.calcsize(fmt)
        if len(head) < 3 * size:
            continue
        words = struct.unpack(fmt[0] + fmt[1] * 3, head[: 3 * size])
        if words == (0, 3, 0):
            return fmt
    return None


def parse(data: bytes) -> tuple[int, list[tuple[int, list[int]]], str]:
    """(period_us, [(count, pcs leaf first)], maps text); ValueError if malformed."""
    fmt = sniff(data)
    if fmt is None:
        raise ValueError("no gperftools CPU profile header")
    order, code = fmt[0], fmt[1]
    size = struct.calcsize(fmt)
    n_words = len(data) // size
    words = struct.unpack(f"{order}{n_words}{code}", data[: n_words * size])
    if len(words) < _HEADER_WORDS:
        raise ValueError("truncated header")
    period_us = words[3]
    if period_us <= 0 or words[4] != 0:
        raise ValueError("bad header")
    records: list[tuple[int, list[int]]] = []
    i = _HEADER_WORDS
    while True:
        if i + 2 > len(words):
            raise ValueError("truncated (no end-of-profile trailer)")
        count, depth = words[i], words[i + 1]
        if count == 0:  # the trailer: 0, 1, 0
            if depth != 1 or i + 3 > len(words) or words[i + 2] != 0:
                raise ValueError("bad end-of-profile trailer")
            i += 3
            break
        if not 0 < depth <= MAX_DEPTH or i + 2 + depth > len(words):
            raise ValueError(f"bad record at byte {i * size}")
        records.append((count, list(words[i + 2 : i + 2 + depth])))
        i += 2 + depth
    maps = data[i * size :].decode("utf-8", errors="replace")
    return period_us, records, maps


def _location(frames: StackFrames, pc: int) -> tuple[str, int] | None:
    """Source (file, line) of `pc` when the binary has DWARF lines."""
    where = frames.resolve(pc)
    if where is None or frames.symbolizer is None:
        return None
    loc = frames.symbolizer.location(*where)
    return (loc.file, loc.line) if loc.file and loc.line else None


def load_gperftools(path: Path, data: bytes | None = None) -> Profile:
    """Read a gperftools CPU profile into a Profile (ProftuiError if malformed)."""
    if data is None:
        data = read_profile(path)
    try:
        period_us, records, maps = parse(data)
    except ValueError as exc:
        raise ProftuiError(f"{path}: corrupt gperftools CPU profile: {exc}") from None
    if not records:
        raise ProftuiError(f"{path}: gperftools CPU profile has no samples")
    # Here, not at import: the symbolizer loads only when such a file is opened.
    from proftui.collectors.symbols.stacks import StackFrames

    frames = StackFrames.of_maps(maps)
    assert frames.space is not None
    mappings = frames.space.mappings
    period_ns = period_us * 1000
    meta = ProfileMeta(
        mode="import",
        argv=[mappings[0].path] if mappings else [],
        period_ns=period_ns,
        clock="ITIMER_PROF (gperftools)",
        warnings=[f"imported from gperftools CPU profile {path}"],
    )
    profile = Profile(meta, (SAMPLES, CPU_NS))
    # The same stack comes back in several records (gperftools evicts its table's
    # buckets as it fills): each distinct stack is symbolized and added once.
    counts: dict[tuple[int, ...], int] = {}
    for count, pcs in records:
        key = tuple(pcs)
        counts[key] = counts.get(key, 0) + count
    del records
    for chain, count in counts.items():
        pcs = list(chain)
        stack = [profile.frames.intern(frame) for frame in frames.stack_frames(pcs)]
        values = [float(count), float(count * period_ns)]
        profile.tree.add_stack(stack, values)
        leaf = pcs[0]
        where = frames.resolve(leaf)
        if where is not None:
            cost = profile.address_costs.setdefault(where, [0.0, 0.0])
            cost[0] += values[0]
            cost[1] += values[1]
        loc = _location(frames, leaf)
        if loc is not None:
            cost = profile.line_costs.setdefault(loc, [0.0, 0.0])
            cost[0] += values[0]
            cost[1] += values[1]
    meta.warnings.extend(dict.fromkeys(frames.warnings()))
    return profile.finalize()
