"""The source pane's listing of one function, with the binary and the disk at hand.

The choice of listing and its rows are the model's (collectors/model/source.py,
pure); this module hands it what lies outside the profile: source text through
the gate of collectors/model/sourcefiles.py, and instructions, their DWARF
lines and inline chains from the profiled binary (collectors/symbols/disasm.py).
It sits above both because the model may not read binaries and the TUI reads
no files.  It may run objdump: call it from a worker.
"""

from __future__ import annotations

from proftui.collectors.model import source
from proftui.collectors.model.profile import Frame, Profile
from proftui.collectors.model.source import Instruction, Listing, Prefer
from proftui.collectors.model.sourcefiles import source_text
from proftui.collectors.symbols import disasm


class _Binary:
    """`source.MachineCode` over the binaries `profile` was taken from."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile

    def instructions(self, frame: Frame) -> list[Instruction]:
        return disasm.function_instructions(self.profile, frame)

    def dwarf_lines(self, frame: Frame, addresses: list[int]) -> dict[int, tuple[str, int]]:
        return disasm.dwarf_lines(frame.module, addresses, frame.build_id)

    def inlined_addresses(self, frame: Frame) -> dict[int, list[float]]:
        return disasm.inlined_addresses(self.profile, frame)

    def rebuilt(self, frame: Frame) -> bool:
        return disasm.rebuilt(frame.module, frame.build_id)


def annotate(profile: Profile, frame: Frame, prefer: Prefer = "source",
             path: str | None = None) -> Listing:
    """`source.annotate` with the profiled binaries and the source files on disk."""
    return source.annotate(profile, frame, prefer, path, code=_Binary(profile),
                           text_of=lambda file: source_text(profile, file))


def disassembly_listing(profile: Profile, frame: Frame) -> Listing | None:
    """`frame`'s instructions with their self costs, or None without a binary or symbol.
    Test seam: the source pane reaches the same listing through `annotate`."""
    instructions = disasm.function_instructions(profile, frame)
    return source.instruction_listing(profile, frame, instructions) if instructions else None
