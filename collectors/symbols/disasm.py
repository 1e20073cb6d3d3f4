"""Disassembly with per-instruction costs, and the source pane's choice of listing.

`objdump -d` (binutils) runs only on demand, for one function, from the
source pane's worker thread; its output is memoized per function (keyed by the
file's identity), so a live pane that re-annotates every snapshot runs it once.
The costs come from the profile's address costs (collectors/model/lines.py);
the binary is needed only for the instruction text.

The interleaved listing (source lines, each followed by its instructions, as
`perf annotate` shows them) attributes every instruction to its innermost
source line, inline-aware: code inlined from a header (a C++ template, a static
inline helper) sits under the header's line, not the caller's.  Costed
instructions keep the line recorded at collection time; the others are looked up
with the same symbolizer (DWARF via the SymCache).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections import OrderedDict
from typing import Literal

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.lines import function_addresses
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import (
    Listing,
    ListingLine,
    address_listing,
    source_listing,
    source_text,
)
from proftui.collectors.symbols.elf import ElfFile, open_regular
from proftui.collectors.symbols.symbolizer import Symbolizer
from proftui.collectors.symbols.vdso import VDSO, vdso_file

MAX_DISASSEMBLY_BYTES = 0x10000  # never disassemble more than this from one start address
TOOL_TIMEOUT_S = 10.0

CACHED_FUNCTIONS = 32  # disassembled functions kept (one per function the user opened)
Prefer = Literal["source", "disassembly", "interleaved"]

_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")

# Memo of objdump's answers and of instruction lines: the source pane's worker
# re-annotates the shown function on every live snapshot (3 a second).
_lock = threading.Lock()
_disassembly: OrderedDict[tuple[object, ...], list[tuple[int, str]]] = OrderedDict()
_sites: OrderedDict[tuple[object, ...], dict[int, tuple[str, int]]] = OrderedDict()
_symbolizer: Symbolizer | None = None  # shared by the pane's workers (one runs at a time)


def _identity(module: str) -> tuple[object, ...] | None:
    """What names one version of `module`'s file (a rebuilt binary must be read again)."""
    try:
        st = os.stat(module)
    except OSError:
        return None
    return (module, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_builds: dict[tuple[object, ...], str | None] = {}  # file identity -> its build-id


def _openable(module: str) -> str:
    """Where `module` opens: the vDSO from proftui's own image, which same_build then
    holds to the profiled one's build-id (another kernel's vDSO is another image)."""
    return (vdso_file(None) or module) if module == VDSO else module


def same_build(module: str, build_id: str | None) -> bool:
    """Whether `module` on disk is the file that was profiled: its build-id is the
    frame's (a frame without one matches any readable file).  A profile opened after a
    rebuild must not show the new binary's instructions with the old one's costs."""
    identity = _identity(module)
    if identity is None:
        return False
    if not build_id:
        return True
    with _lock:
        if identity not in _builds:
            try:
                with ElfFile(module) as elf:
                    _builds[identity] = elf.build_id()
            except (ProftuiError, OSError, ValueError):
                _builds[identity] = None
        return _builds[identity] == build_id


def _remember(memo: OrderedDict, key: tuple[object, ...], value: object) -> None:
    with _lock:
        memo[key] = value
        while len(memo) > CACHED_FUNCTIONS:
            memo.popitem(last=False)


def disassemble(module: str, start: int, stop: int) -> list[tuple[int, str]]:
    """(link-time address, instruction text) from `objdump -d` for [start, stop),
    first symbol only; empty without objdump or a readable `module`.  Memoized."""
    identity = _identity(module)
    key = (identity, start, stop)
    with _lock:
        found = _disassembly.get(key)
    if found is not None:
        return found
    out = _objdump(module, start, stop)
    if out and identity is not None:
        _remember(_disassembly, key, out)
    return out


def _objdump(module: str, start: int, stop: int) -> list[tuple[int, str]]:
    if not shutil.which("objdump"):
        return []
    try:
        fd = open_regular(module)  # never hand objdump a FIFO or a device
    except (OSError, ValueError):
        return []
    try:
        result = subprocess.run(
            ["objdump", "-d", "-C", "--no-show-raw-insn", f"--start-address=0x{start:x}",
             f"--stop-address=0x{stop:x}", f"/dev/fd/{fd}"],
            capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired):
        return []
    finally:
        os.close(fd)
    out: list[tuple[int, str]] = []
    headers = 0
    for row in result.stdout.splitlines():
        if _HEADER.match(row):
            headers += 1
            if headers > 1:
                break  # the next function begins
            continue
        match = _INSN.match(row)
        if match and match[2] and not row.startswith("Disassembly"):
            out.append((int(match[1], 16), " ".join(match[2].split("\t")).strip()))
    return out if result.returncode == 0 else []


def _end_of(profile: Profile, frame: Frame, start: int) -> int:
    """Where to stop: the next known function of the module, at most MAX_DISASSEMBLY_BYTES on."""
    end = start + MAX_DISASSEMBLY_BYTES
    for other in profile.frames:
        if (other.module == frame.module and other.address is not None
                and start < other.address < end):
            end = other.address
    return end


def disassembly_listing(profile: Profile, frame: Frame) -> Listing | None:
    """`frame`'s instructions with their self costs, or None without a binary or symbol."""
    # A frame without a symbol name starts at a sampled address, not at a function
    # start: decoding from there would print garbage.
    if frame.address is None or not frame.module or not frame.raw_name or frame.inlined:
        return None
    module = _openable(frame.module)
    if not same_build(module, frame.build_id):
        return None
    instructions = disassemble(module, frame.address, _end_of(profile, frame, frame.address))
    if not instructions:
        return None
    owned = function_addresses(profile, frame)
    total = [0.0] * len(profile.metrics)
    for cost in owned.values():
        for i, value in enumerate(cost[:len(total)]):
            total[i] += value
    rows = [ListingLine(text, address, owned.get(address)) for address, text in instructions]
    return Listing("disassembly", f"{frame.function} in {frame.module_name}", rows,
                   function_cost=total, focus=0)


def instruction_lines(profile: Profile, module: str, addresses: list[int],
                      build_id: str | None = None) -> dict[int, tuple[str, int]]:
    """Innermost source (file, line) of each instruction at `addresses` of `module`.

    A costed address keeps the line the collector recorded (the same run's
    answer, also without the binary); the others come from the module's DWARF
    through the symbolizer (when the file is the profiled one: `build_id`).
    Addresses without a line are left out.
    """
    identity = _identity(module)
    key = (identity, build_id, tuple(addresses))
    with _lock:
        found = _sites.get(key)
    if found is None:
        found = {}
        if identity is not None:
            with _lock:
                symbolizer = _symbolizer_for(module, build_id)
                for address in addresses:
                    if symbolizer is None:
                        break
                    try:
                        location = symbolizer.location(module, address)
                    except (ProftuiError, OSError, ValueError):
                        break
                    if location.file is not None and location.line is not None:
                        found[address] = (location.file, location.line)
            _remember(_sites, key, found)
    lines = dict(found)
    for address in addresses:
        site = profile.address_sites.get((module, address))
        if site is not None and site.file is not None and site.line is not None:
            lines[address] = (site.file, site.line)
    return lines


def _symbolizer_for(module: str, build_id: str | None) -> Symbolizer | None:
    """The shared symbolizer, when `module` on disk is the profiled file (same build-id,
    when the profile knows it): a saved profile opened after a rebuild must not take
    lines from the new binary.  Call with _lock held."""
    global _symbolizer
    if _symbolizer is None:
        _symbolizer = Symbolizer()
    try:
        found = _symbolizer.module(module).build_id
    except (ProftuiError, OSError, ValueError):
        return None
    return _symbolizer if not build_id or found == build_id else None


def inlined_addresses(profile: Profile, frame: Frame) -> dict[int, list[float]]:
    """Costed addresses whose innermost function is the inlined `frame` -> their cost,
    by the inline chains of the binary's DWARF (the profile records only the innermost
    line of each address); empty without the binary."""
    if not frame.inlined or not frame.module or _identity(frame.module) is None:
        return {}
    owned: dict[int, list[float]] = {}
    with _lock:
        symbolizer = _symbolizer_for(frame.module, frame.build_id)
        if symbolizer is None:
            return {}
        for (module, address), costs in profile.address_costs.items():
            if module != frame.module:
                continue
            try:
                inner = symbolizer.frames(module, address)[-1]
            except (ProftuiError, OSError, ValueError, IndexError):
                return {}
            if inner.inlined and inner.raw_name == frame.raw_name and inner.file == frame.file:
                owned[address] = costs
    return owned


def _host_of(profile: Profile, frame: Frame) -> Frame | None:
    """The (non-inlined) function holding most of the inlined `frame`'s cost."""
    by_start: dict[int, float] = {}
    for address, costs in inlined_addresses(profile, frame).items():
        site = profile.address_sites.get((frame.module, address))
        if site is not None and site.function is not None:
            by_start[site.function] = by_start.get(site.function, 0.0) + (costs[0] if costs else 0)
    if not by_start:
        return None
    start = max(by_start, key=by_start.__getitem__)
    return next((f for f in profile.frames if f.module == frame.module and f.address == start
                 and not f.inlined and f.raw_name), None)


def interleaved_listing(profile: Profile, frame: Frame) -> Listing | None:
    """`frame`'s instructions grouped under their source lines (inline-aware: code
    inlined from a header sits under the header's line), each with its self cost;
    a head row carries its instructions' cost summed.  None without a binary."""
    if frame.address is None or not frame.module or not frame.raw_name or frame.inlined:
        return None
    module = _openable(frame.module)
    if not same_build(module, frame.build_id):
        return None
    instructions = disassemble(module, frame.address, _end_of(profile, frame, frame.address))
    if not instructions:
        return None
    owned = function_addresses(profile, frame)
    n = len(profile.metrics)
    lines = instruction_lines(profile, frame.module, [a for a, _ in instructions],
                              frame.build_id)
    texts: dict[str, list[str] | None] = {}
    rows: list[ListingLine] = []
    total = [0.0] * n
    head: ListingLine | None = None
    where: tuple[str, int] | None = None
    shown_file: str | None = None
    missing: set[str] = set()
    for address, text in instructions:
        here = lines.get(address)
        if here != where and here is not None:
            file, number = here
            if file != shown_file:
                rows.append(ListingLine(f"── {file} ──", None, kind="file", file=file))
                shown_file = file
            if file not in texts:
                texts[file] = source_text(profile, file)
            source = texts[file]
            if source is None:
                missing.add(os.path.basename(file))
            line_text = source[number - 1] if source and 0 < number <= len(source) else ""
            head = ListingLine(line_text, number, kind="head", file=file)
            rows.append(head)
        where = here if here is not None else where
        cost = owned.get(address)
        rows.append(ListingLine(text, address, cost, kind="insn"))
        if cost is not None:
            for i, value in enumerate(cost[:n]):
                total[i] += value
            if head is not None:
                head.cost = [a + b for a, b in zip(head.cost or [0.0] * n, cost, strict=False)]
    note = f"source not available: {', '.join(sorted(missing))}" if missing else ""
    if not lines:
        note = "no line information (no DWARF): instructions only"
    return Listing("interleaved", f"{frame.function} in {frame.module_name}", rows,
                   path=frame.file, function_cost=total, focus=0, note=note)


def annotate(profile: Profile, frame: Frame, prefer: Prefer = "source",
             path: str | None = None) -> Listing:
    """The best listing for `frame`: source (of `path`, one of its files, when given;
    or its costed line numbers), else disassembly, else costed addresses; or the
    disassembly, or source and disassembly interleaved, when `prefer`red.  Runs
    objdump: call it from a worker."""
    if prefer == "source":
        owned = inlined_addresses(profile, frame) if frame.inlined else None
        listing = source_listing(profile, frame, path, owned)
        if listing is not None:
            return listing
    if frame.inlined:
        # no instructions of its own: those of the function it was inlined into
        host = _host_of(profile, frame)
        if host is not None:
            listing = annotate(profile, host, prefer)
            listing.note = "; ".join(n for n in (f"inlined into {host.function}: shown "
                                                 "within it", listing.note) if n)
            if listing.kind in ("interleaved", "disassembly"):
                # open at the inlined function's own hottest instruction
                own = inlined_addresses(profile, frame)
                costed = [(row.cost[0], i) for i, row in enumerate(listing.lines)
                          if row.kind != "head" and row.number in own and row.cost]
                if costed:
                    listing.opens_at = max(costed)[1]
            return listing
    if prefer == "interleaved":
        listing = interleaved_listing(profile, frame)
        if listing is not None:
            return listing
    listing = disassembly_listing(profile, frame)
    if listing is not None:
        if prefer == "source":
            listing.note = "no source file: disassembly"
        return listing
    if frame.module and frame.build_id and _identity(frame.module) is not None \
            and not same_build(frame.module, frame.build_id):
        return address_listing(profile, frame, f"{frame.module} was rebuilt since the "
                                               "profile was taken (another build-id): "
                                               "addresses only")
    return address_listing(profile, frame)
