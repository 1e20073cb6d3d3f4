"""Import the text output of `perf script` (from `perf record -g` or plain `perf record`).

Each sample is a header line, then (with call graphs) one line per frame, leaf
first, then a blank line:

    prog 18848 [001] 7287.654755:     250000 cpu-clock:ppp:
    \t            115f spin+0x16 (/tmp/prog)
    \t            123d main+0x21 (/tmp/prog)

The header's pid may be `pid/tid`, the `[cpu]` and period fields are optional.
Without call graphs the one frame follows the event on the header line.
Symbols are perf's own (already demangled); `[unknown]` frames keep their DSO.
With inline information perf prints the inlined functions at an address
before the function they were inlined into, with `(inlined)` in place of the
DSO and no offset:

    \t            118d leaf (inlined)
    \t            118d mid+0x1d (/tmp/prog)

Those become inlined frames of the container's module.
Only the first event's samples are imported (perf report shows events apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import (
    CPU_NS,
    SAMPLES,
    CallTree,
    Frame,
    Metric,
    Profile,
    ProfileMeta,
)
from proftui.collectors.wording import count

SNIFF_BYTES = 64 * 1024
_CLOCK_EVENTS = ("cpu-clock", "task-clock")
INLINED_DSO = "inlined"  # what perf prints in place of the DSO for an inlined function

_HEADER = re.compile(
    r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<time>\d+\.\d+):\s+(?:(?P<period>\d+)\s+)?"
    r"(?P<event>[A-Za-z_][\w.-]*(?::[\w.-]*)*?):\s*(?P<rest>.*)$")
_FRAME = re.compile(r"^\s*(?P<addr>[0-9a-f]+)\s+(?P<sym>.*?)\s*\((?P<dso>[^()]*)\)$")
_OFFSET = re.compile(r"\+0x(?P<off>[0-9a-f]+)$")


def sniff(head: bytes) -> bool:
    """Whether `head` (the file's first bytes) looks like `perf script` output."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multibyte character cut at the end is fine
        if exc.start < len(head) - 4:
            return False
        text = head[: exc.start].decode("utf-8")
    lines = [ln for ln in text.splitlines()[:50] if ln.strip() and not ln.startswith("#")]
    if not lines or not _HEADER.match(lines[0]):
        return False
    following = lines[1] if len(lines) > 1 else ""
    return not following or bool(_HEADER.match(following) or _FRAME.match(following))


def _frame(line: str) -> tuple[str, str, int | None] | None:
    """(function, dso, function start address or None) of a frame line."""
    match = _FRAME.match(line)
    if match is None:
        return None
    sym, dso, addr = match["sym"], match["dso"], int(match["addr"], 16)
    start: int | None = None
    off = _OFFSET.search(sym)
    if off is not None:
        sym = sym[: off.start()]
        start = addr - int(off["off"], 16)
    if not sym or sym == "[unknown]":
        return ("[unknown]", dso, None)
    return (sym, dso, start if start is not None and start >= 0 else None)


def _model_frames(frames: list[tuple[str, str, int | None]]) -> list[Frame]:
    """Model frames, outermost first, from perf's leaf-first (function, dso, start) list.

    An `(inlined)` frame belongs to the module of the container that follows it.
    """
    out: list[Frame] = []
    module = ""
    for function, dso, start in reversed(frames):  # outermost first: containers come first
        if dso == INLINED_DSO:
            out.append(Frame(function=function, module=module, inlined=True))
        else:
            module = dso
            out.append(Frame(function=function, module=dso, address=start))
    return out


class _Builder:
    """Samples aggregated by distinct (part, raw frame lines): memory follows the
    distinct stacks, not the samples; each distinct frame line is parsed once."""

    def __init__(self) -> None:
        self.event: str | None = None
        self.metrics: tuple[Metric, ...] = (SAMPLES,)
        self.skipped = 0  # samples of other events
        self.samples = 0
        self.stacks: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self.pids: dict[int, None] = {}
        self.threads: dict[int, str] = {}
        self.first: float | None = None
        self.last: float | None = None
        self.periods: set[int] = set()

    def add(self, header: re.Match[str], lines: list[str]) -> None:
        event = header["event"]
        if self.event is None:
            self.event = event
            if header["period"] is not None and event.split(":")[0] in _CLOCK_EVENTS:
                self.metrics = (SAMPLES, CPU_NS)
        elif event != self.event:
            self.skipped += 1
            return
        self.samples += 1
        period = int(header["period"]) if header["period"] is not None else 0
        pid = int(header["pid"])
        tid = int(header["tid"]) if header["tid"] is not None else pid
        self.pids[pid] = None
        if tid not in self.threads:
            self.threads[tid] = header["comm"]
        key = (f"pid {pid}", tuple(lines))
        slot = self.stacks.get(key)
        if slot is None:
            self.stacks[key] = [1.0, float(period)]
        else:
            slot[0] += 1.0
            slot[1] += period
        time = float(header["time"])
        self.first = time if self.first is None else min(self.first, time)
        self.last = time if self.last is None else max(self.last, time)
        if period and len(self.periods) < 2:
            self.periods.add(period)

    def profile(self) -> Profile:
        """The Profile of every distinct stack (not finalized)."""
        profile = Profile(ProfileMeta(mode="import"), self.metrics)
        parsed: dict[str, tuple[str, str, int | None] | None] = {}
        parts: dict[str, CallTree] = {}
        n = len(self.metrics)
        for (label, lines), values in self.stacks.items():
            frames: list[tuple[str, str, int | None]] = []
            for line in lines:
                if line not in parsed:
                    parsed[line] = _frame(line)
                frame = parsed[line]
                if frame is not None:
                    frames.append(frame)
            ids = [profile.frames.intern(frame) for frame in _model_frames(frames)]
            profile.tree.add_stack(ids, values[:n])
            part = parts.get(label)
            if part is None:
                part = parts[label] = CallTree(n)
            part.add_stack(ids, values[:n])
        if len(parts) > 1:
            profile.parts = parts
        return profile


def parse_lines(lines: Iterable[str], source: str) -> Profile:
    """Build a Profile from `perf script` lines; ValueError if they are not that."""
    builder = _Builder()
    header: re.Match[str] | None = None
    frames: list[str] = []
    unrecognised = 0
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        if line[0] in " \t":
            if header is not None and line.rstrip().endswith(")"):
                frames.append(line.rstrip("\n"))
            elif header is None or not line.strip().startswith(("(", "[")):
                unrecognised += 1  # srcline/inline annotations start with spaces too
            continue
        match = _HEADER.match(line.rstrip("\n"))
        if match is None:
            unrecognised += 1
            continue
        if header is not None:
            builder.add(header, frames)
        header, frames = match, []
        if match["rest"]:
            frames.append(match["rest"])
    if header is not None:
        builder.add(header, frames)
    if builder.event is None:
        raise ValueError("no samples")
    if unrecognised > max(10, builder.samples):
        raise ValueError(f"{unrecognised} lines are not perf script samples")
    profile = builder.profile()
    meta = profile.meta
    meta.pids = list(builder.pids)
    meta.threads = builder.threads
    meta.argv = [next(iter(builder.threads.values()))] if builder.threads else []
    meta.start_time = None  # perf times are since boot, not Unix times
    meta.clock = f"perf {builder.event}"
    if len(builder.periods) == 1:
        meta.period_ns = next(iter(builder.periods)) if len(profile.metrics) > 1 else None
    meta.warnings.append(f"imported from `perf script` output {source} (event {builder.event})")
    if builder.skipped:
        meta.warnings.append(f"skipped {count(builder.skipped, 'sample')} of other events")
    if unrecognised:
        meta.warnings.append(f"ignored {unrecognised} unrecognised lines")
    return profile.finalize()


def load_perf_script(path: Path) -> Profile:
    """Read `perf script` output into a Profile (ProftuiError if malformed), line by line:
    memory in proportion to the distinct stacks, whatever the file's size."""
    try:
        with open(path, encoding="utf-8", errors="replace", newline=None) as f:
            return parse_lines(f, str(path))
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ProftuiError(f"{path}: not usable `perf script` output: {exc}") from None
