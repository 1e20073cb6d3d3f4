"""A function's machine code, read from the profiled binary for the source pane:
its instructions (`objdump -d`) and what the DWARF says of them (source lines,
inline chains).  Which listing the pane shows, and its rows, are the model's
(collectors/model/source.py); collectors/annotate.py hands it what this reads.

`objdump -d` (binutils) runs only on demand, for one function, from the
source pane's worker thread; its output is memoized per function (keyed by the
file's identity), so a live pane that re-annotates every snapshot runs it once.
Lines and inline chains come from the same symbolizer as the collectors'
(DWARF via the SymCache), and only from the file that was profiled (its
build-id): a binary rebuilt since gives nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections import OrderedDict

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Instruction
from proftui.collectors.symbols.elf import ElfFile, open_regular
from proftui.collectors.symbols.symbolizer import Symbolizer
from proftui.collectors.symbols.vdso import VDSO, vdso_file

MAX_DISASSEMBLY_BYTES = 0x10000  # never disassemble more than this from one start address
TOOL_TIMEOUT_S = 10.0

CACHED_FUNCTIONS = 32  # disassembled functions kept (one per function the user opened)

_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s*(.*)$")

# Memo of objdump's answers and of instruction lines: the source pane's worker
# re-annotates the shown function on every live snapshot (3 a second).
_lock = threading.Lock()
_disassembly: OrderedDict[tuple[object, ...], list[Instruction]] = OrderedDict()
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


def disassemble(module: str, start: int, stop: int) -> list[Instruction]:
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


def _objdump(module: str, start: int, stop: int) -> list[Instruction]:
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
    out: list[Instruction] = []
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


def function_instructions(profile: Profile, frame: Frame) -> list[Instruction]:
    """`frame`'s instructions, up to the next known function of its module; empty without
    objdump or the profiled build of its binary."""
    # A frame without a symbol name starts at a sampled address, not at a function
    # start: decoding from there would print garbage.
    if frame.address is None or not frame.module or not frame.raw_name or frame.inlined:
        return []
    module = _openable(frame.module)
    if not same_build(module, frame.build_id):
        return []
    return disassemble(module, frame.address, _end_of(profile, frame, frame.address))


def dwarf_lines(module: str, addresses: list[int],
                build_id: str | None = None) -> dict[int, tuple[str, int]]:
    """Innermost source (file, line) of each instruction at `addresses` of `module`, by
    its DWARF through the symbolizer, when the file is the profiled one (`build_id`).
    Addresses without a line are left out.  Memoized."""
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
    return found


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


def rebuilt(module: str, build_id: str | None) -> bool:
    """Whether `module` on disk is another build than the profiled one (`build_id`);
    False when the file is gone or the profile knows no build-id."""
    return bool(module and build_id and _identity(module) is not None
                and not same_build(module, build_id))
