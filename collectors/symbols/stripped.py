"""Names for the code of a stripped object: MiniDebugInfo symbols and .eh_frame FDEs.

`strip` keeps .eh_frame (unwinders and C++ exceptions need it), and each of
its FDEs covers one function's code [start, start + size).  Grouping a
stripped object's addresses by FDE gives one row per function, named
`module+0xSTART`, where the raw addresses gave one row per sampled
instruction.  Fedora-style MiniDebugInfo (.gnu_debugdata: an xz-compressed
ELF whose .symtab names the functions .dynsym does not) gives real names.

Only the FDEs' ranges are read here, never their CFI: the one unwinder is C
(csrc/common/pt_cfi.c).  A malformed section ends the walk with what was read.
"""

from __future__ import annotations

import lzma
import os
import struct

from proftui.collectors.symbols.elf import SHT_NOBITS, ElfFile
from proftui.collectors.symbols.functable import Table
from proftui.collectors.symbols.leb128 import read_sleb128, read_uleb128

DW_EH_PE_OMIT, DW_EH_PE_PCREL = 0xFF, 0x10
PCREL_SDATA4 = 0x1B  # what gcc and clang write for FDE pointers
MAX_DEBUGDATA = 64 << 20  # decompressed MiniDebugInfo larger than this is not read
MAX_FDE_SIZE = 1 << 28  # an FDE claiming more code than this is garbage
# DW_EH_PE_* value formats of a fixed size -> struct codes (absptr: 4 bytes on 32-bit)
FIXED = {0x0: "I", 0x2: "H", 0x3: "I", 0x4: "Q", 0xA: "h", 0xB: "i", 0xC: "q"}


def fde_ranges(elf: ElfFile) -> list[tuple[int, int]]:
    """(link-time start, size) of each FDE of `elf`'s .eh_frame, sorted by start, one per
    start (the first); [] without a readable section."""
    section = elf.section(".eh_frame")
    if section is None or section.type == SHT_NOBITS or not section.addr:
        return []
    try:
        data = elf.data(section)
    except (OSError, ValueError):
        return []
    reader = _Reader(data, section.addr, elf.order, 8 if elf.is64 else 4)
    # length, CIE pointer, and for the usual pcrel|sdata4 encoding the start and size:
    # read at once, so a 100,000-FDE library takes a fraction of a second.
    head = struct.Struct(f"{elf.order}IIiI")
    found: dict[int, int] = {}
    encodings: dict[int, int | None] = {}  # CIE offset -> its FDE pointer encoding
    pos, limit = 0, len(data)
    while pos + 8 <= limit:
        if pos + 16 <= limit:
            length, cie_ptr, begin, size = head.unpack_from(data, pos)
        else:
            (length, cie_ptr), begin, size = struct.unpack_from(f"{elf.order}II", data, pos), 0, 0
        if length == 0:  # a terminator; a static link may hold several
            pos += 4
            continue
        end = pos + 4 + length
        if length == 0xFFFFFFFF or length < 4 or end > limit:
            break  # 64-bit DWARF or a broken entry: nothing after it can be trusted
        if cie_ptr != 0 and cie_ptr <= pos + 4:
            cie_at = pos + 4 - cie_ptr
            encoding = encodings.get(cie_at, -1)
            if encoding == -1:
                encoding = encodings[cie_at] = reader.cie_encoding(cie_at)
            if encoding == PCREL_SDATA4 and length >= 12:
                start = (section.addr + pos + 8 + begin) & 0xFFFFFFFFFFFFFFFF
            elif encoding is not None:
                try:
                    start, at = reader.encoded(pos + 8, encoding)
                    size, _ = reader.encoded(at, encoding & 0x0F)
                except (IndexError, ValueError, struct.error):
                    size = 0
            else:
                size = 0
            if 0 < size < MAX_FDE_SIZE and start > 0:
                found.setdefault(start, size)
        pos = end
    return sorted(found.items())


class _Reader:
    """DWARF pointer encodings over one section's bytes at link-time address `base`."""

    def __init__(self, data: bytes, base: int, order: str, pointer: int) -> None:
        self.data, self.base, self.order, self.pointer = data, base, order, pointer

    def cie_encoding(self, at: int) -> int | None:
        """The FDE pointer encoding the CIE at offset `at` declares ('R'), or None when
        it is not a CIE this reader understands."""
        data = self.data
        try:
            length, cie_id = struct.unpack_from(f"{self.order}II", data, at)
            end = at + 4 + length
            if cie_id != 0 or length < 8 or end > len(data):
                return None
            version = data[at + 8]
            aug_end = data.index(b"\0", at + 9, end)
            augmentation = data[at + 9:aug_end].decode("ascii", "replace")
            pos = aug_end + 1
            if "eh" in augmentation:
                pos += self.pointer
            _, pos = read_uleb128(data, pos)  # code alignment
            _, pos = read_sleb128(data, pos)  # data alignment
            pos = pos + 1 if version == 1 else read_uleb128(data, pos)[1]  # return register
            encoding = 0  # absptr unless 'R' says otherwise
            if not augmentation.startswith("z"):
                return encoding if augmentation == "" else None
            _, pos = read_uleb128(data, pos)
            for letter in augmentation[1:]:
                if letter == "R":
                    encoding = data[pos]
                    pos += 1
                elif letter == "P":
                    _, pos = self.encoded(pos + 1, data[pos] & 0x7F)
                elif letter == "L":
                    pos += 1
                elif letter not in "SB":
                    break  # an unknown letter: 'R' came before it or never
            return encoding
        except (IndexError, ValueError, struct.error):
            return None

    def encoded(self, pos: int, encoding: int) -> tuple[int, int]:
        """The pointer encoded as `encoding` at `pos`, and the position after it."""
        if encoding == DW_EH_PE_OMIT:
            return 0, pos
        form = encoding & 0x0F
        code = "Q" if form == 0 and self.pointer == 8 else FIXED.get(form)
        if code is not None:
            value = struct.unpack_from(f"{self.order}{code}", self.data, pos)[0]
            after = pos + struct.calcsize(code)
        elif form == 0x1:
            value, after = read_uleb128(self.data, pos)
        elif form == 0x9:
            value, after = read_sleb128(self.data, pos)
        else:
            raise ValueError(f"pointer encoding {encoding:#x}")
        if encoding & 0x70 == DW_EH_PE_PCREL:
            value += self.base + pos
        return value & 0xFFFFFFFFFFFFFFFF, after


def debugdata_elf(elf: ElfFile) -> ElfFile | None:
    """The ELF inside `elf`'s .gnu_debugdata (MiniDebugInfo), opened from an anonymous
    memory file, or None when there is none or it does not decompress."""
    section = elf.section(".gnu_debugdata")
    if section is None or section.type == SHT_NOBITS:
        return None
    try:
        decompressor = lzma.LZMADecompressor()
        inner = decompressor.decompress(elf.data(section), MAX_DEBUGDATA)
        if not decompressor.eof:
            return None  # truncated, or larger than we read
        fd = os.memfd_create("proftui-debugdata", os.MFD_CLOEXEC)
    except (lzma.LZMAError, OSError, ValueError):
        return None
    try:
        view = memoryview(inner)
        while view:
            view = view[os.write(fd, view):]
        return ElfFile(f"/proc/self/fd/{fd}")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)  # ElfFile holds its own descriptor


def with_fde_functions(table: Table, fdes: list[tuple[int, int]], base: str) -> Table:
    """`table` plus one function per FDE (sorted) whose start no symbol covers, named
    `base+0xSTART`: a stripped object's code grouped by function, not by address.
    One merge of the two sorted lists (a big library has 100,000 FDEs)."""
    starts, sizes, names = table
    out: Table = ([], [], [])
    i, n, cover = 0, len(starts), -1  # cover: the end of the last symbol passed
    for start, size in fdes:
        while i < n and starts[i] <= start:
            out[0].append(starts[i])
            out[1].append(sizes[i])
            out[2].append(names[i])
            cover = starts[i] + max(sizes[i], 1)
            i += 1
        if start >= cover:  # not inside a named function (nor at its start)
            out[0].append(start)
            out[1].append(size)
            out[2].append(f"{base}+0x{start:x}")
    out[0].extend(starts[i:])
    out[1].extend(sizes[i:])
    out[2].extend(names[i:])
    return out
