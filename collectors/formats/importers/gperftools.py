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

import os
import struct
from collections.abc import Callable
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CPU_NS, SAMPLES, Frame, Profile, ProfileMeta
from proftui.collectors.symbols.maps import AddressSpace, Mapping
from proftui.collectors.symbols.symbolizer import Symbolizer

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
    order, code = fmt
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


def _parse_maps(text: str) -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, path) of every file-backed executable mapping."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "-" not in parts[0] or "x" not in parts[1]:
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-", 1))
            offset = int(parts[2], 16)
        except ValueError:
            continue
        path = parts[5].strip().removesuffix(" (deleted)")
        if path.startswith("/") and "\0" not in path and lo < hi:
            out.append((lo, hi, offset, path))
    return out


class _Resolver:
    """Runtime address -> frames (outermost first), through the profile's own maps."""

    def __init__(self, maps_text: str) -> None:
        self.warnings: list[str] = []
        self.mappings = _parse_maps(maps_text)
        self._symbolizer, self._space = _symbolizer(self.mappings)
        self._cache: dict[int, list[Frame]] = {}  # pc -> frames; records repeat pcs a lot
        self._resolved: dict[int, tuple[str, int] | None] = {}
        self._locations: dict[int, tuple[str, int] | None] = {}
        self._bad_modules: set[str] = set()

    def resolve(self, pc: int) -> tuple[str, int] | None:
        if pc not in self._resolved:
            self._resolved[pc] = self._space(pc)
        return self._resolved[pc]

    def frames(self, pc: int) -> list[Frame]:
        frames = self._cache.get(pc)
        if frames is None:
            frames = self._cache[pc] = self._frames(pc)
        return frames

    def _frames(self, pc: int) -> list[Frame]:
        where = self.resolve(pc)
        if where is None:
            return [Frame(function=f"0x{pc:x}")]
        module, vaddr = where
        if module not in self._bad_modules:
            try:
                return list(self._symbolizer.frames(module, vaddr))
            except (ProftuiError, OSError, ValueError) as exc:  # binary gone or not ELF here
                self._bad_modules.add(module)
                self.warnings.append(f"no symbols for {module}: {exc}")
        return [Frame(function=f"{os.path.basename(module)}+0x{vaddr:x}", module=module,
                      address=vaddr)]

    def location(self, pc: int) -> tuple[str, int] | None:
        """Source (file, line) of `pc` when the binary has DWARF lines."""
        if pc not in self._locations:
            self._locations[pc] = self._location(pc)
        return self._locations[pc]

    def _location(self, pc: int) -> tuple[str, int] | None:
        where = self.resolve(pc)
        if where is None or where[0] in self._bad_modules:
            return None
        try:
            loc = self._symbolizer.module(where[0]).location(where[1])
        except (ProftuiError, OSError, ValueError):
            return None
        return (loc.file, loc.line) if loc.file and loc.line else None

    def symbol_warnings(self) -> list[str]:
        return [*self.warnings, *self._symbolizer.warnings]


def _symbolizer(mappings: list[tuple[int, int, int, str]]) -> tuple[Symbolizer, Callable]:
    """The shared Symbolizer and an address resolver over the profile's own maps."""
    space = AddressSpace(None)
    for lo, hi, offset, path in mappings:
        space.add(Mapping(lo, hi, offset, "r-xp", path))
    return Symbolizer(), space.resolve


def load_gperftools(path: Path, data: bytes | None = None) -> Profile:
    """Read a gperftools CPU profile into a Profile (ProftuiError if malformed)."""
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        period_us, records, maps = parse(data)
    except ValueError as exc:
        raise ProftuiError(f"{path}: corrupt gperftools CPU profile: {exc}") from None
    if not records:
        raise ProftuiError(f"{path}: gperftools CPU profile has no samples")
    resolver = _Resolver(maps)
    period_ns = period_us * 1000
    meta = ProfileMeta(
        mode="import",
        argv=[resolver.mappings[0][3]] if resolver.mappings else [],
        period_ns=period_ns,
        clock="ITIMER_PROF (gperftools)",
        warnings=[f"imported from gperftools CPU profile {path}"],
    )
    profile = Profile(meta, (SAMPLES, CPU_NS))
    assert profile.tree is not None
    for count, pcs in records:
        stack: list[int] = []
        # Return addresses point after the call: step back into the call instruction.
        for depth, pc in enumerate(reversed(pcs)):
            caller = depth < len(pcs) - 1
            for frame in resolver.frames(pc - 1 if caller and pc else pc):
                stack.append(profile.frames.intern(frame))
        values = [float(count), float(count * period_ns)]
        profile.tree.add_stack(stack, values)
        leaf = pcs[0]
        where = resolver.resolve(leaf)
        if where is not None:
            cost = profile.address_costs.setdefault(where, [0.0, 0.0])
            cost[0] += values[0]
            cost[1] += values[1]
        loc = resolver.location(leaf)
        if loc is not None:
            cost = profile.line_costs.setdefault(loc, [0.0, 0.0])
            cost[0] += values[0]
            cost[1] += values[1]
    meta.warnings.extend(dict.fromkeys(resolver.symbol_warnings()))
    return profile.finalize()
