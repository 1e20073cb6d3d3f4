"""A fast walk over one compile unit's DIEs, keeping only what symbolization needs.

pyelftools builds a full object per DIE and attribute, which dominates the
cold-cache cost on big C++ units (tens of thousands of DIEs).  This reader
decodes the abbreviation table once and skips every attribute it does not
need by its form's size, keeping for subprograms and inlined subroutines:
names, declaration and call-site positions, address ranges and the
abstract-origin/specification references that carry the names of inlined
and out-of-line copies.

Forms this reader does not know raise `UnsupportedForm`; the caller then
falls back to pyelftools for that unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from proftui.collectors.symbols.leb128 import read_leb128

# Tags (DWARF 5 section 7.5.4)
TAG_SUBPROGRAM = 0x2E
TAG_INLINED_SUBROUTINE = 0x1D
# Attributes
AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES = 0x03, 0x11, 0x12, 0x55
AT_DECL_FILE, AT_DECL_LINE, AT_CALL_FILE, AT_CALL_LINE = 0x3A, 0x3B, 0x58, 0x59
AT_ABSTRACT_ORIGIN, AT_SPECIFICATION = 0x31, 0x47
AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME = 0x6E, 0x2007
WANTED = frozenset({AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_DECL_FILE, AT_DECL_LINE,
                    AT_CALL_FILE, AT_CALL_LINE, AT_ABSTRACT_ORIGIN, AT_SPECIFICATION,
                    AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME})

# Forms
F_ADDR, F_BLOCK2, F_BLOCK4, F_DATA2, F_DATA4, F_DATA8, F_STRING = 0x01, 0x03, 0x04, 0x05, 0x06, \
    0x07, 0x08
F_BLOCK, F_BLOCK1, F_DATA1, F_FLAG, F_SDATA, F_STRP, F_UDATA = 0x09, 0x0A, 0x0B, 0x0C, 0x0D, \
    0x0E, 0x0F
F_REF_ADDR, F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA, F_INDIRECT = 0x10, 0x11, 0x12, 0x13, \
    0x14, 0x15, 0x16
F_SEC_OFFSET, F_EXPRLOC, F_FLAG_PRESENT, F_STRX, F_ADDRX, F_REF_SUP4, F_STRP_SUP = 0x17, 0x18, \
    0x19, 0x1A, 0x1B, 0x1C, 0x1D
F_DATA16, F_LINE_STRP, F_REF_SIG8, F_IMPLICIT_CONST, F_LOCLISTX, F_RNGLISTX = 0x1E, 0x1F, 0x20, \
    0x21, 0x22, 0x23
F_REF_SUP8, F_STRX1, F_STRX2, F_STRX3, F_STRX4 = 0x24, 0x25, 0x26, 0x27, 0x28
F_ADDRX1, F_ADDRX2, F_ADDRX3, F_ADDRX4 = 0x29, 0x2A, 0x2B, 0x2C
F_GNU_REF_ALT, F_GNU_STRP_ALT = 0x1F20, 0x1F21

_FIXED = {F_DATA1: 1, F_REF1: 1, F_FLAG: 1, F_STRX1: 1, F_ADDRX1: 1,
          F_DATA2: 2, F_REF2: 2, F_STRX2: 2, F_ADDRX2: 2, F_STRX3: 3, F_ADDRX3: 3,
          F_DATA4: 4, F_REF4: 4, F_STRX4: 4, F_ADDRX4: 4, F_REF_SUP4: 4,
          F_DATA8: 8, F_REF8: 8, F_REF_SIG8: 8, F_REF_SUP8: 8, F_DATA16: 16,
          F_FLAG_PRESENT: 0, F_IMPLICIT_CONST: 0}
_OFFSET_SIZED = frozenset({F_STRP, F_LINE_STRP, F_SEC_OFFSET, F_STRP_SUP, F_GNU_REF_ALT,
                           F_GNU_STRP_ALT})
_LEB = frozenset({F_SDATA, F_UDATA, F_REF_UDATA, F_STRX, F_ADDRX, F_LOCLISTX, F_RNGLISTX})
_CU_REFS = frozenset({F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA})
_HIGH_PC_LENGTH = frozenset({F_DATA1, F_DATA2, F_DATA4, F_DATA8, F_UDATA, F_SDATA,
                             F_IMPLICIT_CONST})


class UnsupportedForm(Exception):
    """A form (or reference kind) this reader leaves to pyelftools."""


@dataclass
class Entry:
    """The kept attributes of one subprogram or inlined-subroutine DIE."""

    offset: int  # section offset of the DIE
    tag: int
    depth: int  # inline nesting: 0 outside any inlined subroutine
    attrs: dict[int, object] = field(default_factory=dict)
    high_is_length: bool = False


@dataclass
class UnitInfo:
    """What the walk needs from the unit header (pyelftools parses it)."""

    data: bytes  # the whole .debug_info section
    unit_offset: int  # section offset of the unit header
    die_offset: int  # section offset of the first DIE
    end: int  # section offset just past the unit
    abbrev: bytes  # the whole .debug_abbrev section
    abbrev_offset: int
    address_size: int
    offset_size: int  # 4 (32-bit DWARF) or 8
    debug_str: bytes
    debug_line_str: bytes


def _leb(data: bytes, pos: int) -> tuple[int, int]:
    return read_leb128(data, pos)


def _sleb(data: bytes, pos: int) -> tuple[int, int]:
    return read_leb128(data, pos, signed=True)


Abbrev = tuple[int, bool, list[tuple[int, int, int]]]  # tag, has_children, (attr, form, const)


def read_abbrevs(data: bytes, offset: int) -> dict[int, Abbrev]:
    """The abbreviation table starting at `offset` of .debug_abbrev."""
    table: dict[int, Abbrev] = {}
    pos = offset
    while True:
        code, pos = _leb(data, pos)
        if code == 0:
            return table
        tag, pos = _leb(data, pos)
        has_children = data[pos] != 0
        pos += 1
        specs = []
        while True:
            attr, pos = _leb(data, pos)
            form, pos = _leb(data, pos)
            const = 0
            if form == F_IMPLICIT_CONST:
                const, pos = _sleb(data, pos)
            if attr == 0 and form == 0:
                break
            specs.append((attr, form, const))
        table[code] = (tag, has_children, specs)


def _cstr(data: bytes, pos: int) -> str:
    end = data.index(b"\0", pos)
    return data[pos:end].decode("utf-8", "replace")


def walk_unit(unit: UnitInfo) -> list[Entry]:
    """Subprogram and inlined-subroutine DIEs of one unit, in section order."""
    data = unit.data
    abbrevs = read_abbrevs(unit.abbrev, unit.abbrev_offset)
    osize, asize = unit.offset_size, unit.address_size
    entries: list[Entry] = []
    # Inline depth of each open DIE with children; a 0 abbrev code closes one.
    depth_stack: list[int] = []
    pos = unit.die_offset
    while pos < unit.end:
        die_offset = pos
        code, pos = _leb(data, pos)
        if code == 0:
            if depth_stack:
                depth_stack.pop()
            continue
        abbrev = abbrevs.get(code)
        if abbrev is None:
            raise UnsupportedForm(f"abbreviation {code} missing")
        tag, has_children, specs = abbrev
        depth = depth_stack[-1] if depth_stack else 0
        keep = tag in (TAG_SUBPROGRAM, TAG_INLINED_SUBROUTINE)
        entry = Entry(die_offset, tag, depth + (tag == TAG_INLINED_SUBROUTINE)) if keep else None
        for attr, form, const in specs:
            if form == F_INDIRECT:
                form, pos = _leb(data, pos)
            if entry is not None and attr in WANTED:
                value, pos = _read_value(unit, form, const, pos)
                entry.attrs[attr] = value
                if attr == AT_HIGH_PC:
                    entry.high_is_length = form in _HIGH_PC_LENGTH
            else:
                pos = _skip(data, form, pos, osize, asize)
        if entry is not None:
            entries.append(entry)
        if has_children:
            depth_stack.append(entry.depth if entry is not None else depth)
    return entries


def _read_value(unit: UnitInfo, form: int, const: int, pos: int) -> tuple[object, int]:
    data = unit.data
    if form == F_IMPLICIT_CONST:
        return const, pos
    if form == F_ADDR:
        return int.from_bytes(data[pos:pos + unit.address_size], "little"), \
            pos + unit.address_size
    if form in (F_DATA1, F_DATA2, F_DATA4, F_DATA8):
        size = _FIXED[form]
        return int.from_bytes(data[pos:pos + size], "little"), pos + size
    if form == F_UDATA:
        return _leb(data, pos)
    if form == F_SDATA:
        return _sleb(data, pos)
    if form in _CU_REFS:
        if form == F_REF_UDATA:
            value, pos = _leb(data, pos)
        else:
            size = _FIXED[form]
            value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
        return ("ref", unit.unit_offset + value), pos
    if form == F_REF_ADDR:
        value = int.from_bytes(data[pos:pos + unit.offset_size], "little")
        return ("ref", value), pos + unit.offset_size
    if form == F_STRING:
        end = data.index(b"\0", pos)
        return data[pos:end].decode("utf-8", "replace"), end + 1
    if form in (F_STRP, F_LINE_STRP):
        value = int.from_bytes(data[pos:pos + unit.offset_size], "little")
        table = unit.debug_str if form == F_STRP else unit.debug_line_str
        return _cstr(table, value), pos + unit.offset_size
    if form == F_SEC_OFFSET:
        value = int.from_bytes(data[pos:pos + unit.offset_size], "little")
        return ("offset", value), pos + unit.offset_size
    raise UnsupportedForm(f"form 0x{form:x}")


def _skip(data: bytes, form: int, pos: int, osize: int, asize: int) -> int:
    size = _FIXED.get(form)
    if size is not None:
        return pos + size
    if form == F_ADDR:
        return pos + asize
    if form in _OFFSET_SIZED or form == F_REF_ADDR:
        return pos + osize
    if form in _LEB:
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if form == F_STRING:
        return data.index(b"\0", pos) + 1
    if form in (F_BLOCK, F_EXPRLOC):
        length, pos = _leb(data, pos)
        return pos + length
    if form == F_BLOCK1:
        return pos + 1 + data[pos]
    if form == F_BLOCK2:
        return pos + 2 + int.from_bytes(data[pos:pos + 2], "little")
    if form == F_BLOCK4:
        return pos + 4 + int.from_bytes(data[pos:pos + 4], "little")
    raise UnsupportedForm(f"form 0x{form:x}")


def read_range_list(data: bytes, offset: int, base: int, address_size: int,
                    version: int) -> list[tuple[int, int]] | None:
    """Address ranges of a DW_AT_ranges list (.debug_rnglists for DWARF 5, else
    .debug_ranges); None when it uses indexed forms (left to pyelftools)."""
    result: list[tuple[int, int]] = []
    pos = offset
    size = address_size

    def addr(at: int) -> int:
        return int.from_bytes(data[at:at + size], "little")

    if version < 5:
        top = (1 << (8 * size)) - 1
        while pos + 2 * size <= len(data):
            begin, end = addr(pos), addr(pos + size)
            pos += 2 * size
            if begin == 0 and end == 0:
                return result
            if begin == top:
                base = end
            elif end > begin:
                result.append((begin + base, end + base))
        return None
    while pos < len(data):
        kind = data[pos]
        pos += 1
        if kind == 0x00:  # DW_RLE_end_of_list
            return result
        if kind == 0x04:  # DW_RLE_offset_pair
            begin, pos = _leb(data, pos)
            end, pos = _leb(data, pos)
            if end > begin:
                result.append((base + begin, base + end))
        elif kind == 0x05:  # DW_RLE_base_address
            base = addr(pos)
            pos += size
        elif kind == 0x06:  # DW_RLE_start_end
            begin, end = addr(pos), addr(pos + size)
            pos += 2 * size
            if end > begin:
                result.append((begin, end))
        elif kind == 0x07:  # DW_RLE_start_length
            begin = addr(pos)
            length, pos = _leb(data, pos + size)
            if length:
                result.append((begin, begin + length))
        else:  # indexed entries need .debug_addr
            return None
    return None
