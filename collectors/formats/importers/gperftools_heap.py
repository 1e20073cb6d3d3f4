"""Import gperftools heap profiles (the `.heap` files HEAPPROFILE=prefix writes).

Text format (gperftools docs/heapprofile.html, pprof's reader):

    heap profile:   <inuse n>: <inuse bytes> [ <alloc n>: <alloc bytes>] @ heapprofile
    <inuse n>: <inuse bytes> [<alloc n>: <alloc bytes>] @ 0xPC 0xPC ...    one bucket per stack
    ...
    MAPPED_LIBRARIES:
    <the text of /proc/self/maps when the profile was written>

The header tag is `heapprofile` (every allocation, tcmalloc's HEAPPROFILE),
`heap` (the same, older writers) or `heap_v2/RATE` (sampled every RATE bytes
on average, as tcmalloc's heap sampler writes: counts and bytes are scaled
back up the way pprof does, 1 / (1 - exp(-size / RATE)) per bucket).  Every
address of a stack, including the first, is a return address (the allocator's
own frames are cut), so each is looked up at address - 1: the call that
allocated.  Addresses are resolved through MAPPED_LIBRARIES and symbolized
from the binaries on this machine (collectors.symbols).

"in use" becomes `live_bytes` / `live_allocs`, "allocated" `alloc_bytes` /
`allocs`.  A dump written as the program exits (the last of a
prefix.NNNN.heap series; gperftools says "Exiting" on stderr only) also
gives `leaked_bytes` / `leaks` = what was still in use, as mtrace counts
leaks.  The format cannot tell peak usage, temporary allocations, threads or
time: the warnings say so.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers.files import read_profile
from proftui.collectors.model.lines import add_code_cost
from proftui.collectors.model.profile import (
    ALLOC_BYTES,
    ALLOCS,
    LEAKED_BYTES,
    LEAKS,
    LIVE_ALLOCS,
    LIVE_BYTES,
    Metric,
    Profile,
    ProfileMeta,
)

MAGIC = b"heap profile:"
MAX_DEPTH = 4096  # gperftools keeps at most 32 frames; more means a corrupt file
_COUNTS = r"\s*(\d+):\s*(\d+)\s*\[\s*(\d+):\s*(\d+)\s*\]\s*@"
_HEADER = re.compile(r"heap profile:" + _COUNTS + r"\s*(\S+)\s*$")
_RECORD = re.compile(_COUNTS + r"((?:\s+0x[0-9a-fA-F]+)+)\s*$")
_SERIES = re.compile(r"^(.*)\.(\d{4,})\.heap$")

Bucket = tuple[float, float, float, float, list[int]]  # inuse n, bytes, alloc n, bytes, pcs


def sniff(head: bytes) -> bool:
    """True if `head` starts a gperftools heap profile."""
    return head.lstrip().startswith(MAGIC)


def _unsample(count: float, size: float, rate: int) -> tuple[float, float]:
    """pprof's inverse of Poisson sampling every `rate` bytes: scaled (count, bytes)."""
    if count <= 0 or size <= 0 or rate <= 0:
        return count, size
    scale = 1.0 / (1.0 - math.exp(-(size / count) / rate))
    return count * scale, size * scale


def parse(text: str) -> tuple[str, int, list[Bucket], str]:
    """(header tag, sampling rate or 0, buckets, maps text); ValueError if malformed."""
    lines = text.lstrip().splitlines()
    if not lines:
        raise ValueError("empty file")
    header = _HEADER.match(lines[0].strip())
    if header is None:
        raise ValueError("bad first line (expected 'heap profile: N: B [ N: B] @ tag')")
    tag = header.group(5)
    rate = 0
    if tag.startswith("heap_v2/"):
        try:
            rate = int(tag.split("/", 1)[1])
        except ValueError:
            raise ValueError(f"bad sampling rate in {tag!r}") from None
    elif tag not in ("heapprofile", "heap"):
        raise ValueError(f"unsupported heap profile kind {tag!r} "
                         "(supported: heapprofile, heap, heap_v2/RATE)")
    buckets: list[Bucket] = []
    maps_at = len(lines)
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("MAPPED_LIBRARIES:") or stripped.startswith("--- Memory map:"):
            maps_at = number
            break
        record = _RECORD.match(stripped)
        if record is None:
            raise ValueError(f"line {number}: not a 'N: B [N: B] @ 0xPC...' bucket")
        pcs = [int(word, 16) for word in record.group(5).split()]
        if len(pcs) > MAX_DEPTH:
            raise ValueError(f"line {number}: stack deeper than {MAX_DEPTH}")
        inuse_n, inuse_b, alloc_n, alloc_b = (float(record.group(i)) for i in range(1, 5))
        if rate:
            inuse_n, inuse_b = _unsample(inuse_n, inuse_b, rate)
            alloc_n, alloc_b = _unsample(alloc_n, alloc_b, rate)
        buckets.append((inuse_n, inuse_b, alloc_n, alloc_b, pcs))
    return tag, rate, buckets, "\n".join(lines[maps_at:])


def written_at_exit(path: Path) -> bool:
    """Whether `path` is the last dump of its prefix.NNNN.heap series (gperftools
    writes one at exit).  A file outside such a series counts as written at exit."""
    match = _SERIES.match(path.name)
    if match is None:
        return True
    prefix, number = match.group(1), int(match.group(2))
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return True
    for sibling in siblings:
        other = _SERIES.match(sibling.name)
        if other is not None and other.group(1) == prefix and int(other.group(2)) > number:
            return False
    return True


def load_gperftools_heap(path: Path, data: bytes | None = None,
                         at_exit: bool | None = None) -> Profile:
    """Read a gperftools heap profile into a Profile (ProftuiError if malformed).

    `at_exit` says whether the dump was written as the program exited (then
    in-use memory is the leaks); None decides from the file's series.
    """
    if data is None:
        data = read_profile(path)
    try:
        tag, rate, buckets, maps = parse(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise ProftuiError(f"{path}: corrupt gperftools heap profile: {exc}") from None
    if at_exit is None:
        at_exit = written_at_exit(path)
    # Here, not at import: the symbolizer loads only when such a file is opened.
    from proftui.collectors.symbols.stacks import StackFrames

    frames = StackFrames.of_maps(maps)
    assert frames.space is not None
    mappings = frames.space.mappings
    metrics: tuple[Metric, ...] = (LIVE_BYTES, LIVE_ALLOCS, ALLOC_BYTES, ALLOCS)
    if at_exit:
        metrics += (LEAKED_BYTES, LEAKS)
    warnings = [f"imported from gperftools heap profile {path}"]
    if rate:
        warnings.append(f"sampled every {rate} bytes on average: counts and bytes are "
                        "estimates scaled back up (as pprof does)")
    if at_exit:
        warnings.append("leaked = still in use in this dump, taken as written at exit "
                        "(the last of its series); reachability not checked")
    else:
        warnings.append("a dump taken while the program ran (a later one of its series "
                        "exists): in-use is not leaks")
    warnings.append("the gperftools heap format has no peak usage, temporary "
                    "allocations, threads or timeline")
    meta = ProfileMeta(mode="import", argv=[mappings[0].path] if mappings else [],
                       clock=f"gperftools heap profile ({tag})", warnings=warnings)
    profile = Profile(meta, metrics)
    for inuse_n, inuse_b, alloc_n, alloc_b, pcs in buckets:
        values = [inuse_b, inuse_n, alloc_b, alloc_n]
        if at_exit:
            values += [inuse_b, inuse_n]
        # Every address is a return address: look each up at the call (address - 1).
        calls = [pc - 1 for pc in pcs]
        stack: list[int] = []
        for call in reversed(calls):
            stack.extend(profile.frames.intern(f) for f in frames.frames_at(call, True))
        profile.tree.add_stack(stack, values)
        leaf = frames.leaf_site(calls[0])
        if leaf is not None:
            add_code_cost(profile, leaf[0], leaf[1], leaf[2], values)
    meta.warnings.extend(dict.fromkeys(frames.warnings()))
    return profile.finalize()
