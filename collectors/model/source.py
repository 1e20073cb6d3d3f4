"""What the source pane lists for one function, and which listing it shows.

Pure functions of the model and of what they are handed: nothing here reads a
file or runs a tool.  Costs come from the line and address costs the
collectors recorded (collectors/model/lines.py).  Source text comes from
`text_of`: the profile's embedded sources unless the caller passes a reader
(collectors/annotate.py passes the on-disk gate of model/sourcefiles.py).
Without text, the costed lines are still listed by number.  Instructions,
their DWARF lines and inline chains come from a `MachineCode`
(collectors/symbols/disasm.py reads the binary).  Costs are self costs (per
line, per instruction): the model keeps no call-site lines, so inclusive
per-line cost is not available.

A function's costs may lie in several files (code inlined from headers: C++
templates, static inline helpers); `source_listing(..., path=...)` shows any
one of them.

The interleaved listing (source lines, each followed by its instructions, as
`perf annotate` shows them) attributes every instruction to its innermost
source line, inline-aware: code inlined from a header sits under the header's
line, not the caller's.  Costed instructions keep the line recorded at
collection time; the others take the line the binary's DWARF gives.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from proftui.collectors.model.lines import function_addresses, function_lines, lines_of
from proftui.collectors.model.profile import Frame, Profile

ListingKind = Literal["source", "lines", "disassembly", "interleaved", "addresses", "none"]
RowKind = Literal["line", "insn", "head", "file"]
Prefer = Literal["source", "disassembly", "interleaved"]
Instruction = tuple[int, str]  # (link-time address, instruction text)
TextOf = Callable[[str], list[str] | None]  # a source file's lines, None when unavailable


class MachineCode(Protocol):
    """What the profiled binary says of a function's code (collectors/symbols/disasm.py)."""

    def instructions(self, frame: Frame) -> list[Instruction]:
        """`frame`'s instructions; empty without its binary (or another build of it), or
        when `frame` has no function start to disassemble from."""
        ...

    def dwarf_lines(self, frame: Frame, addresses: list[int]) -> dict[int, tuple[str, int]]:
        """Innermost (file, line) of `addresses` of `frame`'s module by its DWARF;
        addresses without a line are left out."""
        ...

    def inlined_addresses(self, frame: Frame) -> dict[int, list[float]]:
        """Costed addresses whose innermost function is the inlined `frame` -> their cost,
        by the binary's inline chains; empty without the binary."""
        ...

    def rebuilt(self, frame: Frame) -> bool:
        """Whether `frame`'s module on disk is another build than the profiled one."""
        ...


@dataclass(slots=True)
class ListingLine:
    """One row: a source line (number = line) or an instruction (number = address).

    `kind`: "line" (a source line), "insn" (an instruction), "head" (in an
    interleaved listing, the source line heading the instructions below it; its
    cost is theirs summed, so cursor jumps skip it) or "file" (the file of the
    heads that follow, named in `text`).  `file` is the source file of a head.
    """

    text: str
    number: int | None
    cost: list[float] | None = None  # self cost per metric; None when nothing landed here
    kind: RowKind = "line"
    file: str | None = None

    @property
    def ranks(self) -> bool:
        """Whether the row's cost is its own (a hottest-row candidate), not a sum of others'."""
        return self.kind in ("line", "insn")


@dataclass
class Listing:
    """Rows for the source pane.  `kind`: "source" (the file's text), "lines" (costed
    line numbers, the text being unavailable), "disassembly", "addresses" or "none"."""

    kind: ListingKind
    title: str
    lines: list[ListingLine] = field(default_factory=list)
    path: str | None = None  # the source file (picks the syntax lexer)
    function_cost: list[float] = field(default_factory=list)  # the function's self cost
    focus: int | None = None  # index of the function's first line
    note: str = ""

    files: list[str] = field(default_factory=list)  # the function's costed files (see below)
    opens_at: int | None = None  # the row to open at, when not the hottest one

    @property
    def numbers_are_lines(self) -> bool:
        """Row numbers are source lines (decimal), not addresses."""
        return self.kind in ("source", "lines")

    def row_is_line(self, index: int) -> bool:
        """Whether row `index`'s number is a source line (else an address)."""
        row = self.lines[index]
        return row.kind in ("head", "file") or (row.kind == "line" and self.numbers_are_lines)

    def hottest(self, metric: int = 0) -> int | None:
        """Index of the costliest row (instructions, not their heads, in an interleaved
        listing), or the function's first line when none has cost."""
        best: tuple[float, int] | None = None
        for i, line in enumerate(self.lines):
            if line.ranks and line.cost is not None and metric < len(line.cost) and (
                    best is None or line.cost[metric] > best[0]):
                best = (line.cost[metric], i)
        return best[1] if best is not None and best[0] > 0 else self.focus


def _sum(costs: list[list[float]], n: int) -> list[float]:
    total = [0.0] * n
    for cost in costs:
        for i, value in enumerate(cost[:n]):
            total[i] += value
    return total


def embedded_text(profile: Profile) -> TextOf:
    """The profile's embedded sources (a saved profile's), as a `text_of`."""
    def text_of(path: str) -> list[str] | None:
        text = profile.sources.get(path)
        return text.splitlines() if text is not None else None
    return text_of


OWN_FILE_MIN_SHARE = 0.05  # below this share of the cost, a function opens at its costliest file


def _files_by_cost(lines: dict[tuple[str, int], list[float]], first: str | None) -> list[str]:
    """The files of a function's costed lines, the one a listing opens first leading:
    its own file (`first`), unless nearly none of its cost is there (it all comes from
    inlined header code, but for a stray sample on its loop), then the costliest."""
    by_file: dict[str, float] = {}
    for (file, _line), cost in lines.items():
        by_file[file] = by_file.get(file, 0.0) + (cost[0] if cost else 0.0)
    ranked = sorted(by_file, key=lambda f: (-by_file[f], f))
    if first is None:
        return ranked
    whole = sum(by_file.values())
    if whole > 0 and by_file.get(first, 0.0) < OWN_FILE_MIN_SHARE * whole:
        return [f for f in ranked if f != first] + [first]  # its own file stays reachable
    return [first] + [f for f in ranked if f != first]


def source_listing(profile: Profile, frame: Frame, path: str | None = None,
                   owned: dict[int, list[float]] | None = None,
                   text_of: TextOf | None = None) -> Listing | None:
    """`frame`'s source file (or `path`, another file of its costs: a header it inlined)
    with its function's self cost per line.  `owned` (address -> cost) names the
    function's addresses when the caller knows them better (an inlined function's,
    found through the binary's inline chains).  The text comes from `text_of`
    (default: the profile's embedded sources only).

    When the text is nowhere to be found, the costed lines are listed by number
    (kind "lines") and the note says "source not available: PATH".  None when
    neither a file nor a costed line is known (disassembly may still help).
    """
    lines, exact = function_lines(profile, frame)
    if owned:
        lines, exact = lines_of(profile, frame.module, owned), True
    n = len(profile.metrics)
    files = _files_by_cost(lines, frame.file)
    if path is None or path not in files:
        path = files[0] if files else None
    if path is None:
        return None
    here = {line: cost for (file, line), cost in lines.items() if file == path}
    elsewhere = {file for (file, _line) in lines if file != path}
    total = _sum(list(lines.values()), n)
    notes: list[str] = []
    if profile.meta.lines_note:
        notes.append(profile.meta.lines_note)
    if not exact and here:
        notes.append("costs of every function of this file (no per-address lines recorded)")
    if exact and frame.file is not None and path != frame.file and not frame.inlined:
        inside = _sum(list(here.values()), n)
        share = inside[0] / total[0] * 100 if total and total[0] > 0 else 0.0
        notes.append(f"code inlined from this file: {share:.0f}% of the function")
    elif elsewhere:
        outside = _sum([c for (f, _l), c in lines.items() if f != path], n)
        share = outside[0] / total[0] * 100 if total and total[0] > 0 else 0.0
        names = ", ".join(sorted(os.path.basename(f) for f in elsewhere)[:3])
        notes.append(f"{share:.0f}% on lines inlined from other files ({names})")
    text = (text_of or embedded_text(profile))(path)
    if text is None:
        if not here:
            return None
        rows = [ListingLine("", line, cost) for line, cost in sorted(here.items())]
        first = frame.line
        focus: int | None = next((i for i, row in enumerate(rows)
                                  if first and row.number == first), 0)
        return Listing("lines", os.path.basename(path), rows, path=path, function_cost=total,
                       focus=focus, note="; ".join([f"source not available: {path}", *notes]),
                       files=files)
    rows = [ListingLine(t, i + 1, here.get(i + 1)) for i, t in enumerate(text)]
    beyond = sorted(line for line in here if not 0 < line <= len(text))
    if beyond:
        # the file changed since the profile was taken: keep those costs visible anyway
        notes.append(f"file shorter than profiled lines ({len(beyond)} lines past its end)")
        rows.extend(ListingLine("", line, here[line]) for line in beyond)
    focus = (frame.line - 1 if path == frame.file and frame.line and 0 < frame.line <= len(text)
             else None)
    return Listing("source", os.path.basename(path), rows, path=path, function_cost=total,
                   focus=focus, note="; ".join(notes), files=files)


def address_listing(profile: Profile, frame: Frame, note: str = "") -> Listing:
    """The function's costed instruction addresses (no binary to disassemble)."""
    owned = function_addresses(profile, frame)
    total = _sum(list(owned.values()), len(profile.metrics))
    if not owned:
        why = ("inlined code: its instructions belong to the functions it was inlined into"
               if frame.inlined else "no source, disassembly or address costs for this function")
        return Listing("none", frame.function, [], function_cost=total, note=why)
    rows = []
    for address, cost in sorted(owned.items()):
        site = profile.address_sites.get((frame.module, address))
        where = (f"  {os.path.basename(site.file)}:{site.line}"
                 if site is not None and site.file and site.line else "")
        rows.append(ListingLine(f"{frame.module_name}+0x{address:x}{where}", address, cost))
    return Listing("addresses", f"{frame.function}: addresses", rows, function_cost=total,
                   focus=0, note=note or "no source and no readable binary: addresses only")


def instruction_listing(profile: Profile, frame: Frame,
                        instructions: list[Instruction]) -> Listing:
    """`frame`'s disassembly with the self cost of each instruction."""
    owned = function_addresses(profile, frame)
    total = _sum(list(owned.values()), len(profile.metrics))
    rows = [ListingLine(text, address, owned.get(address)) for address, text in instructions]
    return Listing("disassembly", f"{frame.function} in {frame.module_name}", rows,
                   function_cost=total, focus=0)


def instruction_lines(profile: Profile, frame: Frame, instructions: list[Instruction],
                      code: MachineCode) -> dict[int, tuple[str, int]]:
    """Innermost source (file, line) of each of `frame`'s instructions: the line the
    collector recorded for a costed address (the same run's answer, also without the
    binary), else the binary's DWARF.  Addresses without a line are left out."""
    addresses = [address for address, _text in instructions]
    lines = dict(code.dwarf_lines(frame, addresses))
    for address in addresses:
        site = profile.address_sites.get((frame.module, address))
        if site is not None and site.file is not None and site.line is not None:
            lines[address] = (site.file, site.line)
    return lines


def interleaved_listing(profile: Profile, frame: Frame, instructions: list[Instruction],
                        lines: dict[int, tuple[str, int]], text_of: TextOf) -> Listing:
    """`frame`'s instructions grouped under their source lines (`lines`: address ->
    file, line), each with its self cost; a head row carries its instructions' cost
    summed, a file row names the file of the heads below it."""
    owned = function_addresses(profile, frame)
    n = len(profile.metrics)
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
                texts[file] = text_of(file)
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


def _host_of(profile: Profile, frame: Frame, code: MachineCode) -> Frame | None:
    """The (non-inlined) function holding most of the inlined `frame`'s cost."""
    by_start: dict[int, float] = {}
    for address, costs in code.inlined_addresses(frame).items():
        site = profile.address_sites.get((frame.module, address))
        if site is not None and site.function is not None:
            by_start[site.function] = by_start.get(site.function, 0.0) + (costs[0] if costs else 0)
    if not by_start:
        return None
    start = max(by_start, key=by_start.__getitem__)
    return next((f for f in profile.frames if f.module == frame.module and f.address == start
                 and not f.inlined and f.raw_name), None)


def annotate(profile: Profile, frame: Frame, prefer: Prefer = "source",
             path: str | None = None, *, code: MachineCode, text_of: TextOf) -> Listing:
    """The best listing for `frame`: source (of `path`, one of its files, when given;
    or its costed line numbers), else disassembly, else costed addresses; or the
    disassembly, or source and disassembly interleaved, when `prefer`red.  An inlined
    function without source is shown within the function it was inlined into."""
    if prefer == "source":
        owned = code.inlined_addresses(frame) if frame.inlined else None
        listing = source_listing(profile, frame, path, owned, text_of)
        if listing is not None:
            return listing
    if frame.inlined:
        # no instructions of its own: those of the function it was inlined into
        host = _host_of(profile, frame, code)
        if host is not None:
            listing = annotate(profile, host, prefer, code=code, text_of=text_of)
            listing.note = "; ".join(n for n in (f"inlined into {host.function}: shown "
                                                 "within it", listing.note) if n)
            if listing.kind in ("interleaved", "disassembly"):
                # open at the inlined function's own hottest instruction
                own = code.inlined_addresses(frame)
                costed = [(row.cost[0], i) for i, row in enumerate(listing.lines)
                          if row.kind != "head" and row.number in own and row.cost]
                if costed:
                    listing.opens_at = max(costed)[1]
            return listing
    instructions = code.instructions(frame)
    if instructions:
        if prefer == "interleaved":
            return interleaved_listing(profile, frame, instructions,
                                       instruction_lines(profile, frame, instructions, code),
                                       text_of)
        listing = instruction_listing(profile, frame, instructions)
        if prefer == "source":
            listing.note = "no source file: disassembly"
        return listing
    if code.rebuilt(frame):
        return address_listing(profile, frame, f"{frame.module} was rebuilt since the "
                                               "profile was taken (another build-id): "
                                               "addresses only")
    return address_listing(profile, frame)
