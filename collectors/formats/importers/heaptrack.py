"""Import heaptrack data files (heaptrack.PROG.PID.zst / .gz) through `heaptrack_print`.

heaptrack's own analyser does the work (suppressions, symbol resolution as
recorded); proftui reads its flame-graph output, one run per cost type,
because that output keeps every distinct stack with an exact integer cost:

    outer (file.c);...;inner (file.c); 123

Cost types: allocations (calls to allocation functions), temporary
(allocations freed right after, heaptrack's notion), peak (bytes each stack
held when the whole heap peaked) and leaked (bytes never freed).  They become
`peak_bytes`, `leaked_bytes`, `allocs`, `temporary`; `live_bytes` is the
leaked bytes (live at exit).  This output has no allocated-byte totals, no
counts of leaked blocks and no source lines (function and file names only):
the warnings say so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import (
    ALLOCS,
    LEAKED_BYTES,
    LIVE_BYTES,
    PEAK_BYTES,
    TEMPORARY,
    Frame,
    Profile,
    ProfileMeta,
)

TOOL = "heaptrack_print"
TOOL_TIMEOUT_S = 600.0  # heaptrack_print on a multi-GB recording takes minutes
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"
_PLAIN = re.compile(rb"v [0-9a-f]+ [0-9a-f]+\n")  # heaptrack's first line: version
_NAME = re.compile(r"^(.*\S) \(([^()\s]+\.[^()\s]+)\)$")  # "func (file.c)"
# (cost type passed to heaptrack_print, metric it fills)
# Peak first: the default metric of views and exports, heaptrack's headline number.
COST_TYPES = (("peak", PEAK_BYTES), ("leaked", LEAKED_BYTES), ("allocations", ALLOCS),
              ("temporary", TEMPORARY))


def sniff(head: bytes) -> bool:
    """True if `head` starts a heaptrack data file (zstd, gzip or plain text)."""
    if head.startswith(_ZSTD_MAGIC):
        return True
    if head.startswith(_GZIP_MAGIC):
        try:
            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 64)
        except zlib.error:
            return False
        return _PLAIN.match(text) is not None
    return _PLAIN.match(head) is not None


def parse_flamegraph(text: str) -> dict[tuple[str, ...], int]:
    """{stack (outermost first): cost} of heaptrack_print's -F output (ValueError if bad)."""
    stacks: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack_text, _, cost = line.rpartition(" ")
        try:
            value = int(cost)
        except ValueError:
            raise ValueError(f"line {number}: no cost at the end") from None
        frames = tuple(f for f in stack_text.split(";") if f)
        stacks[frames] = stacks.get(frames, 0) + value
    return stacks


def _frame(text: str) -> Frame:
    match = _NAME.match(text)
    if match is None:
        return Frame(function=text)
    # heaptrack prints the file's base name only: kept in the module column, not as a
    # source path the source pane would try to open
    return Frame(function=match.group(1), module=match.group(2))


def _run(tool: str, path: Path, cost_type: str, out_dir: str) -> str:
    out = Path(out_dir) / f"{cost_type}.txt"
    try:
        result = subprocess.run(
            [tool, "-f", str(path), "-F", str(out), "--flamegraph-cost-type", cost_type,
             "-a", "0", "-p", "0", "-T", "0", "-l", "0"],
            capture_output=True, encoding="utf-8", errors="replace", timeout=TOOL_TIMEOUT_S,
            stdin=subprocess.DEVNULL)  # its messages quote the file: any bytes
    except subprocess.TimeoutExpired:
        raise ProftuiError(f"{path}: {TOOL} took over {TOOL_TIMEOUT_S:.0f}s") from None
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot run {TOOL}: {exc.strerror}") from None
    if result.returncode != 0 or not out.exists():
        why = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise ProftuiError(f"{path}: {TOOL} could not read it: {why}")
    return out.read_text(errors="replace")


def _command(path: Path, tool: str) -> list[str]:
    """The debuggee command heaptrack_print reports ("Debuggee command was: ...")."""
    try:
        result = subprocess.run([tool, "-f", str(path), "-a", "0", "-p", "0", "-T", "0"],
                                capture_output=True, encoding="utf-8", errors="replace",
                                timeout=TOOL_TIMEOUT_S,
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    for line in result.stdout.splitlines():
        if line.startswith("Debuggee command was: "):
            return line.removeprefix("Debuggee command was: ").split()
    return []


def load_heaptrack(path: Path, tool: str | None = None) -> Profile:
    """Read a heaptrack data file through heaptrack_print (ProftuiError if it cannot)."""
    tool = tool or shutil.which(TOOL)
    if tool is None:
        raise ProftuiError(f"{path}: is a heaptrack file; install heaptrack's {TOOL} "
                           "(Debian: heaptrack) to open it")
    if not path.is_file():
        raise ProftuiError(f"{path}: no such file")
    with tempfile.TemporaryDirectory(prefix="proftui-heaptrack-") as out_dir, \
            ThreadPoolExecutor(max_workers=len(COST_TYPES) + 1) as pool:
        # each run re-reads the whole file: in parallel they take the time of one
        futures = [pool.submit(_run, tool, path, name, out_dir) for name, _ in COST_TYPES]
        argv_future = pool.submit(_command, path, tool)
        outputs = [f.result() for f in futures]
        argv = argv_future.result()
    per_type: list[dict[tuple[str, ...], int]] = []
    for (name, _), text in zip(COST_TYPES, outputs, strict=True):
        try:
            per_type.append(parse_flamegraph(text))
        except ValueError as exc:
            raise ProftuiError(f"{path}: unexpected {TOOL} {name} output: {exc}") from None
    if not any(per_type):
        if not argv:  # heaptrack_print exits 0 on garbage, having read nothing
            raise ProftuiError(f"{path}: corrupt heaptrack file ({TOOL} read nothing from it)")
        raise ProftuiError(f"{path}: heaptrack recorded no allocations")
    metrics = (PEAK_BYTES, LEAKED_BYTES, ALLOCS, TEMPORARY, LIVE_BYTES)
    meta = ProfileMeta(mode="import", argv=argv, clock="heaptrack", warnings=[
        f"imported from heaptrack file {path} through {TOOL}",
        f"{TOOL}'s stacks carry function and file names, not source lines; "
        "it gives no allocated-byte totals and no count of leaked blocks",
        "leaked = never freed before exit (live_bytes the same); reachability not checked",
    ])
    profile = Profile(meta, metrics)
    stacks = dict.fromkeys(s for costs in per_type for s in costs)
    for stack in stacks:
        values = [float(costs.get(stack, 0)) for costs in per_type]
        values.append(values[1])  # live at exit = leaked
        if not any(values):
            continue
        ids = [profile.frames.intern(_frame(name)) for name in stack]
        profile.tree.add_stack(ids, values)
    return profile.finalize()
