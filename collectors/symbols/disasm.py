"""Disassembly with per-instruction costs, and the source pane's choice of listing.

`objdump -d` (binutils) runs only on demand, for one function, from the
source pane's worker thread.  The costs come from the profile's address
costs (collectors/model/lines.py); the binary is needed only for the
instruction text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from typing import Literal

from proftui.collectors.model.lines import function_addresses
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Listing, ListingLine, address_listing, source_listing
from proftui.collectors.symbols.elf import open_regular

MAX_DISASSEMBLY_BYTES = 0x10000  # never disassemble more than this from one start address
TOOL_TIMEOUT_S = 10.0

# objdump's answers by (module, start, stop, the file's identity): a live source pane
# re-annotates on every snapshot (~3/s), and objdump costs ~20-50 ms of CPU each time.
_DISASSEMBLED: dict[tuple[object, ...], list[tuple[int, str]]] = {}
_DISASSEMBLED_MAX = 32
_disassembled_lock = threading.Lock()

_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")


def disassemble(module: str, start: int, stop: int) -> list[tuple[int, str]]:
    """(link-time address, instruction text) from `objdump -d` for [start, stop),
    first symbol only; empty without objdump or a readable `module`."""
    if not shutil.which("objdump"):
        return []
    try:
        fd = open_regular(module)  # never hand objdump a FIFO or a device
    except (OSError, ValueError):
        return []
    try:
        st = os.fstat(fd)
        key = (module, start, stop, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with _disassembled_lock:
            cached = _DISASSEMBLED.get(key)
        if cached is not None:
            return list(cached)
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
    if result.returncode == 0:
        with _disassembled_lock:
            _DISASSEMBLED[key] = list(out)
            while len(_DISASSEMBLED) > _DISASSEMBLED_MAX:
                del _DISASSEMBLED[next(iter(_DISASSEMBLED))]  # the oldest
    return out


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
    instructions = disassemble(frame.module, frame.address,
                               _end_of(profile, frame, frame.address))
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


def annotate(profile: Profile, frame: Frame,
             prefer: Literal["source", "disassembly"] = "source") -> Listing:
    """The best listing for `frame`: source (or its costed line numbers), else
    disassembly, else costed addresses.  Runs objdump: call it from a worker."""
    if prefer == "source":
        listing = source_listing(profile, frame)
        if listing is not None:
            return listing
    listing = disassembly_listing(profile, frame)
    if listing is not None:
        if prefer != "disassembly":
            listing.note = "no source file: disassembly"
        return listing
    return address_listing(profile, frame)
