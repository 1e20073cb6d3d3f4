"""What the source pane shows for one function: annotated source, disassembly or addresses.

Pure data (no widgets), so it runs in a worker thread and is tested alone.
Line costs come from `Profile.line_costs`; when a collector only recorded
instruction addresses (`Profile.address_costs`, e.g. attach mode) they are
mapped to lines with binutils `addr2line` in one batch.  Without a source
file the function is disassembled with `objdump -d` and each instruction gets
its address cost; without a readable binary the costed addresses are listed.
Costs are self costs (per line, per instruction): the model keeps no
call-site lines, so inclusive per-line cost is not available.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from proftui.collectors.model.profile import Frame, Profile

MAX_DISASSEMBLY_BYTES = 0x10000  # never disassemble more than this from one start address
TOOL_TIMEOUT_S = 10.0


@dataclass
class ListingLine:
    """One row: a source line (number = line) or an instruction (number = address)."""

    text: str
    number: int | None
    cost: list[float] | None = None  # self cost per metric; None when nothing landed here


@dataclass
class Listing:
    kind: Literal["source", "disassembly", "addresses", "none"]
    title: str
    lines: list[ListingLine] = field(default_factory=list)
    path: str | None = None  # the source file (picks the syntax lexer)
    function_cost: list[float] = field(default_factory=list)  # sum of line costs
    focus: int | None = None  # index of the function's first line
    note: str = ""

    def hottest(self, metric: int = 0) -> int | None:
        """Index of the costliest line, or the function's first line when none has cost."""
        best: tuple[float, int] | None = None
        for i, line in enumerate(self.lines):
            if line.cost is not None and (best is None or line.cost[metric] > best[0]):
                best = (line.cost[metric], i)
        return best[1] if best is not None and best[0] > 0 else self.focus


# -- binutils helpers -------------------------------------------------------------

Location = tuple[str, str | None, int | None]  # (function raw name, file, line)
_addr2line_cache: dict[tuple[str, float], dict[int, Location]] = {}
_cache_lock = threading.Lock()


def addr2line(module: str, addresses: Iterable[int]) -> dict[int, Location]:
    """Link-time address -> (function raw name, file, line) via one `addr2line` call.

    Results are cached per module file (path and mtime); unknown fields are None/"".
    """
    try:
        key = (module, os.stat(module).st_mtime)
    except OSError:
        return {}
    with _cache_lock:
        known = _addr2line_cache.setdefault(key, {})
        missing = sorted({a for a in addresses if a not in known})
    if missing and shutil.which("addr2line"):
        try:
            result = subprocess.run(
                ["addr2line", "-f", "-a", "-e", module, *(f"0x{a:x}" for a in missing)],
                capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return dict(known)
        rows = result.stdout.splitlines()
        found: dict[int, Location] = {}
        for i in range(0, len(rows) - 2, 3):
            try:
                address = int(rows[i], 16)
            except ValueError:
                break  # output out of step: trust nothing after this
            function = rows[i + 1] if rows[i + 1] != "??" else ""
            where, _, line_text = rows[i + 2].partition(" ")[0].rpartition(":")
            digits = re.match(r"\d+", line_text)
            line = int(digits[0]) if digits and digits[0] != "0" else None
            found[address] = (function, where if where and where != "??" else None, line)
        with _cache_lock:
            known.update(found)
    with _cache_lock:
        return dict(known)


_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")


def disassemble(module: str, start: int, stop: int) -> list[tuple[int, str]]:
    """(address, instruction text) from `objdump -d` for [start, stop), first symbol only."""
    if not shutil.which("objdump") or not os.path.isfile(module):
        return []
    try:
        result = subprocess.run(
            ["objdump", "-d", "-C", "--no-show-raw-insn", f"--start-address=0x{start:x}",
             f"--stop-address=0x{stop:x}", module],
            capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
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
    return out


# -- the listing ------------------------------------------------------------------


def _function_bounds(profile: Profile, frame: Frame) -> tuple[int, int] | None:
    """[start, end) of `frame`'s code: up to the next known function of the same module."""
    if frame.address is None:
        return None
    start = frame.address
    end = start + MAX_DISASSEMBLY_BYTES
    for other in profile.frames:
        if (other.module == frame.module and other.address is not None
                and start < other.address < end):
            end = other.address
    return start, end


def _add(into: dict, key: object, cost: list[float]) -> None:
    old = into.get(key)
    into[key] = list(cost) if old is None else [a + b for a, b in zip(old, cost, strict=False)]


def _owned_addresses(profile: Profile, frame: Frame) -> dict[int, list[float]]:
    """Costed instruction addresses inside `frame`'s function."""
    bounds = _function_bounds(profile, frame)
    if bounds is None:
        return {}
    start, end = bounds
    return {addr: cost for (module, addr), cost in profile.address_costs.items()
            if module == frame.module and start <= addr < end}


def _read_source(profile: Profile, path: str) -> list[str] | None:
    text = profile.sources.get(path)
    if text is None:
        try:
            with open(path, "rb") as f:
                data = f.read(4 << 20)
        except OSError:
            return None
        if b"\0" in data:
            return None
        text = data.decode("utf-8", errors="replace")
    return text.splitlines()


def _source_listing(profile: Profile, frame: Frame, owned: dict[int, list[float]]
                    ) -> Listing | None:
    note = ""
    path = frame.file
    first_line = frame.line
    line_costs = {line: cost for (f, line), cost in profile.line_costs.items() if f == path}
    if frame.module and (not line_costs or path is None) and (owned or frame.address is not None):
        # Map instruction addresses to lines (attach mode has no line table of its own).
        wanted = list(owned)
        if frame.address is not None:
            wanted.append(frame.address)
        located = addr2line(frame.module, wanted)
        if path is None and frame.address in located:
            path = located[frame.address][1]
            first_line = first_line or located[frame.address][2]
        if path is not None and not line_costs:
            derived: dict[int, list[float]] = {}
            for addr, cost in owned.items():
                _fn, file, line = located.get(addr, ("", None, None))
                if file == path and line is not None:
                    _add(derived, line, cost)
            if derived:
                line_costs = derived
                note = "line costs mapped from instruction addresses (addr2line)"
    if path is None:
        return None
    text = _read_source(profile, path)
    if text is None:
        return None
    lines = [ListingLine(t, i + 1, line_costs.get(i + 1)) for i, t in enumerate(text)]
    total = [0.0] * len(profile.metrics)
    for cost in line_costs.values():
        total = [a + b for a, b in zip(total, cost, strict=False)]
    focus = first_line - 1 if first_line and 0 < first_line <= len(lines) else None
    return Listing("source", os.path.basename(path), lines, path=path, function_cost=total,
                   focus=focus, note=note)


def annotate(profile: Profile, frame: Frame,
             prefer: Literal["source", "disassembly"] = "source") -> Listing:
    """The best listing for `frame`: source, else disassembly, else addresses."""
    owned = _owned_addresses(profile, frame)
    if prefer == "source":
        listing = _source_listing(profile, frame, owned)
        if listing is not None:
            return listing
    bounds = _function_bounds(profile, frame)
    total = [0.0] * len(profile.metrics)
    for cost in owned.values():
        total = [a + b for a, b in zip(total, cost, strict=False)]
    # A frame without a symbol name starts at a sampled address, not at a function
    # start: decoding from there would print garbage, so list addresses instead.
    if bounds is not None and frame.module and frame.raw_name:
        instructions = disassemble(frame.module, *bounds)
        if instructions:
            lines = [ListingLine(text, addr, owned.get(addr)) for addr, text in instructions]
            return Listing("disassembly", f"{frame.function} in {frame.module_name}", lines,
                           function_cost=total, focus=0,
                           note="" if prefer == "disassembly" else "no source file: disassembly")
    if owned:
        lines = [ListingLine(f"{frame.module_name}+0x{addr:x}", addr, cost)
                 for addr, cost in sorted(owned.items())]
        return Listing("addresses", f"{frame.function}: addresses", lines, function_cost=total,
                       focus=0, note="no source and no readable binary: addresses only")
    return Listing("none", frame.function, [],
                   note="no source, disassembly or address costs for this function")
