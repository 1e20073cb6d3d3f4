"""Decode one DWARF compile unit into flat, cacheable lookup tables.

pyelftools is exact but slow, so each compile unit is decoded once (only
when an address inside it is asked for) into plain lists that bisect fast and
serialize to JSON for the build-id cache (symbols.py).
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from typing import Any

from elftools.dwarf.compileunit import CompileUnit
from elftools.dwarf.die import DIE
from elftools.dwarf.dwarfinfo import DWARFInfo
from elftools.dwarf.ranges import BaseAddressEntry, RangeEntry
from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.dwarf_dies import (
    AT_ABSTRACT_ORIGIN,
    AT_CALL_FILE,
    AT_CALL_LINE,
    AT_DECL_FILE,
    AT_DECL_LINE,
    AT_HIGH_PC,
    AT_LINKAGE_NAME,
    AT_LOW_PC,
    AT_MIPS_LINKAGE_NAME,
    AT_NAME,
    AT_RANGES,
    AT_SPECIFICATION,
    TAG_SUBPROGRAM,
    Entry,
    UnitInfo,
    UnsupportedForm,
    read_range_list,
    walk_unit,
)
from proftui.collectors.symbols.dwarf_lines import line_rows

# Constant-class forms: DW_AT_high_pc is then a length, not an address.
_LENGTH_FORMS = frozenset({"DW_FORM_data1", "DW_FORM_data2", "DW_FORM_data4", "DW_FORM_data8",
                           "DW_FORM_udata", "DW_FORM_sdata", "DW_FORM_implicit_const"})
_SCOPE_TAGS = frozenset({"DW_TAG_subprogram", "DW_TAG_inlined_subroutine", "DW_TAG_lexical_block",
                         "DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type",
                         "DW_TAG_module"})


@dataclass
class CuTable:
    """Line rows, function definitions and inline ranges of one compile unit.

    `rows` is sorted by address; a row with line 0 ends a sequence (no
    source there).  `inlines` entries are (low, high, depth, name,
    call_file, call_line, decl_file, decl_line), depth 1 for an inline
    directly in a real function.
    """

    files: list[str] = field(default_factory=list)
    row_addresses: list[int] = field(default_factory=list)
    row_files: list[int] = field(default_factory=list)
    row_lines: list[int] = field(default_factory=list)
    # low -> (high, name, decl_file, decl_line) of each concrete function
    functions: dict[int, tuple[int, str, int, int]] = field(default_factory=dict)
    inlines: list[tuple[int, int, int, str, int, int, int, int]] = field(default_factory=list)

    def line_at(self, address: int) -> tuple[str, int] | None:
        """Source file and line of the instruction at `address`, if the table knows it."""
        i = bisect.bisect_right(self.row_addresses, address) - 1
        if i < 0 or self.row_lines[i] == 0:
            return None
        return self.file(self.row_files[i]), self.row_lines[i]

    def file(self, index: int) -> str:
        return self.files[index] if 0 <= index < len(self.files) else "??"

    def inlines_at(self, address: int) -> list[tuple[int, int, int, str, int, int, int, int]]:
        """Inline ranges covering `address`, innermost (deepest) first."""
        hits = [entry for entry in self.inlines if entry[0] <= address < entry[1]]
        hits.sort(key=lambda entry: -entry[2])
        return hits

    def to_json(self) -> dict[str, Any]:
        return {"files": self.files, "a": self.row_addresses, "f": self.row_files,
                "l": self.row_lines,
                "fn": [[low, *rest] for low, rest in self.functions.items()],
                "in": [list(entry) for entry in self.inlines]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CuTable:
        return cls(files=list(data["files"]), row_addresses=list(data["a"]),
                   row_files=list(data["f"]), row_lines=list(data["l"]),
                   functions={int(e[0]): (int(e[1]), str(e[2]), int(e[3]), int(e[4]))
                              for e in data["fn"]},
                   inlines=[(int(e[0]), int(e[1]), int(e[2]), str(e[3]), int(e[4]), int(e[5]),
                             int(e[6]), int(e[7])) for e in data["in"]])


def cu_address_ranges(dwarf: DWARFInfo) -> list[tuple[int, int, int]]:
    """(low, high, CU offset) of every compile unit, sorted by low address."""
    ranges: list[tuple[int, int, int]] = []
    aranges = dwarf.get_aranges()
    if aranges is not None:
        for entry in aranges.entries:
            if entry.length:
                ranges.append((entry.begin_addr, entry.begin_addr + entry.length,
                               entry.info_offset))
    if not ranges:
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            for low, high in die_ranges(dwarf, cu, top):
                ranges.append((low, high, cu.cu_offset))
    ranges.sort()
    return ranges


def die_ranges(dwarf: DWARFInfo, cu: CompileUnit, die: DIE) -> list[tuple[int, int]]:
    """Address ranges a DIE covers, from low_pc/high_pc or DW_AT_ranges."""
    attrs = die.attributes
    if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
        low = attrs["DW_AT_low_pc"].value
        high_attr = attrs["DW_AT_high_pc"]
        high = low + high_attr.value if high_attr.form in _LENGTH_FORMS else high_attr.value
        return [(low, high)] if high > low else []
    if "DW_AT_ranges" not in attrs:
        return []
    top = cu.get_top_DIE()
    base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
    return _range_list(dwarf, cu, attrs["DW_AT_ranges"].value, base)


def decode_cu(dwarf: DWARFInfo, cu: CompileUnit) -> CuTable:
    """Decode the line program and the function/inline DIEs of `cu`."""
    table = CuTable()
    version = cu.header.version
    top = cu.get_top_DIE()
    comp_dir = _text(top.attributes.get("DW_AT_comp_dir"))
    program = dwarf.line_program_for_CU(cu)
    if program is not None:
        table.files = _file_names(program, version, comp_dir)
        rows: dict[int, tuple[int, int]] = {}
        ends: set[int] = set()
        for address, file, line, end_sequence in line_rows(program):
            if end_sequence:
                ends.add(address)
            elif line:
                # The last row at an address wins, as addr2line reports it.
                rows[address] = (_file_index(file, version), line)
        for end in ends:
            rows.setdefault(end, (-1, 0))
        for address in sorted(rows):
            file_index, line = rows[address]
            table.row_addresses.append(address)
            table.row_files.append(file_index)
            table.row_lines.append(line)
    try:
        _collect_functions_fast(dwarf, cu, top, table, version)
    except (UnsupportedForm, IndexError, ValueError):
        table.functions.clear()
        table.inlines.clear()
        _collect_functions(dwarf, cu, top, table, version)
    return table


@dataclass(frozen=True)
class _RawSections:
    """Whole DWARF sections as bytes, read once per file for the fast paths."""

    info: bytes
    abbrev: bytes
    strings: bytes
    line_strings: bytes
    rnglists: bytes
    ranges: bytes


def _raw_sections(dwarf: DWARFInfo) -> _RawSections:
    raw = getattr(dwarf, "_proftui_raw", None)
    if raw is None:
        def whole(section: Any) -> bytes:
            if section is None:
                return b""
            section.stream.seek(0)
            return section.stream.read()
        raw = _RawSections(whole(dwarf.debug_info_sec), whole(dwarf.debug_abbrev_sec),
                           whole(dwarf.debug_str_sec), whole(dwarf.debug_line_str_sec),
                           whole(dwarf.debug_rnglists_sec), whole(dwarf.debug_ranges_sec))
        dwarf._proftui_raw = raw  # type: ignore[attr-defined]
    return raw


def _collect_functions_fast(dwarf: DWARFInfo, cu: CompileUnit, top: DIE, table: CuTable,
                            version: int) -> None:
    """Like `_collect_functions`, through the raw DIE walker (dwarf_dies.py)."""
    raw = _raw_sections(dwarf)
    unit_end = cu.cu_offset + cu["unit_length"] + cu.structs.initial_length_field_size()
    unit = UnitInfo(raw.info, cu.cu_offset, cu.cu_die_offset, unit_end, raw.abbrev,
                    cu["debug_abbrev_offset"], cu["address_size"],
                    8 if cu.structs.dwarf_format == 64 else 4, raw.strings, raw.line_strings)
    entries = walk_unit(unit)
    by_offset = {entry.offset: entry for entry in entries}
    base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0

    def describe(entry: Entry) -> tuple[str, int, int]:
        name = linkage = None
        decl_file = decl_line = None
        current: Entry | None = entry
        for _ in range(8):
            if current is None:
                break
            attrs = current.attrs
            linkage = linkage or attrs.get(AT_LINKAGE_NAME) or attrs.get(AT_MIPS_LINKAGE_NAME)
            name = name or attrs.get(AT_NAME)
            if decl_file is None and AT_DECL_FILE in attrs:
                decl_file = _file_index(int(attrs[AT_DECL_FILE]), version)  # type: ignore[call-overload]
                decl_line = int(attrs.get(AT_DECL_LINE, 0))  # type: ignore[call-overload]
            ref = attrs.get(AT_ABSTRACT_ORIGIN) or attrs.get(AT_SPECIFICATION)
            if not isinstance(ref, tuple):
                break
            current = by_offset.get(ref[1])
            if current is None:  # in another unit: rare outside LTO
                raise UnsupportedForm("reference into another unit")
        shown = demangle(str(linkage)) if linkage else (str(name) if name else "??")
        return shown, decl_file if decl_file is not None else -1, decl_line or 0

    def ranges(entry: Entry) -> list[tuple[int, int]]:
        attrs = entry.attrs
        low = attrs.get(AT_LOW_PC)
        high = attrs.get(AT_HIGH_PC)
        if isinstance(low, int) and isinstance(high, int):
            end = low + high if entry.high_is_length else high
            return [(low, end)] if end > low else []
        where = attrs.get(AT_RANGES)
        if isinstance(where, tuple) and where[0] == "offset":
            fast = read_range_list(raw.rnglists if version >= 5 else raw.ranges, where[1],
                                   base, cu["address_size"], version)
            return fast if fast is not None else _range_list(dwarf, cu, where[1], base)
        return []

    for entry in entries:
        spans = ranges(entry)
        if not spans:
            continue
        name, decl_file, decl_line = describe(entry)
        if entry.tag == TAG_SUBPROGRAM:
            for low, high in spans:
                table.functions[low] = (high, name, decl_file, decl_line)
        else:
            call_file = _file_index(int(entry.attrs.get(AT_CALL_FILE, 0)), version)  # type: ignore[call-overload]
            call_line = int(entry.attrs.get(AT_CALL_LINE, 0))  # type: ignore[call-overload]
            if AT_CALL_FILE not in entry.attrs:
                call_file = -1
            for low, high in spans:
                table.inlines.append((low, high, entry.depth, name, call_file, call_line,
                                      decl_file, decl_line))


def _range_list(dwarf: DWARFInfo, cu: CompileUnit, offset: int,
                base: int) -> list[tuple[int, int]]:
    range_lists = dwarf.range_lists()
    if range_lists is None:
        return []
    try:
        entries = range_lists.get_range_list_at_offset(offset, cu=cu)
    except Exception:  # malformed range lists: treat as no ranges
        return []
    result = []
    for entry in entries:
        if isinstance(entry, BaseAddressEntry):
            base = entry.base_address
        elif isinstance(entry, RangeEntry):
            low, high = entry.begin_offset, entry.end_offset
            if not entry.is_absolute:
                low, high = low + base, high + base
            if high > low:
                result.append((low, high))
    return result


def _collect_functions(dwarf: DWARFInfo, cu: CompileUnit, top: DIE, table: CuTable,
                       version: int) -> None:
    stack: list[tuple[DIE, int]] = [(child, 0) for child in top.iter_children()]
    while stack:
        die, depth = stack.pop()
        tag = die.tag
        if tag not in _SCOPE_TAGS:
            continue
        child_depth = depth
        if tag == "DW_TAG_subprogram":
            ranges = die_ranges(dwarf, cu, die)
            if ranges:
                name, decl_file, decl_line = _describe(die, version)
                for low, high in ranges:
                    table.functions[low] = (high, name, decl_file, decl_line)
        elif tag == "DW_TAG_inlined_subroutine":
            child_depth = depth + 1
            name, decl_file, decl_line = _describe(die, version)
            call_file = _file_index(_int(die.attributes.get("DW_AT_call_file")), version)
            call_line = _int(die.attributes.get("DW_AT_call_line"))
            for low, high in die_ranges(dwarf, cu, die):
                table.inlines.append((low, high, child_depth, name, call_file, call_line,
                                      decl_file, decl_line))
        if die.has_children:
            stack.extend((child, child_depth) for child in die.iter_children())


def _describe(die: DIE, version: int) -> tuple[str, int, int]:
    """Demangled name and declaration file index/line, following origins."""
    name = linkage = None
    decl_file = decl_line = None
    seen = 0
    current: DIE | None = die
    while current is not None and seen < 8:
        attrs = current.attributes
        linkage = linkage or _text(attrs.get("DW_AT_linkage_name") or
                                   attrs.get("DW_AT_MIPS_linkage_name"))
        name = name or _text(attrs.get("DW_AT_name"))
        if decl_file is None and "DW_AT_decl_file" in attrs:
            decl_file = _file_index(attrs["DW_AT_decl_file"].value, version)
            decl_line = _int(attrs.get("DW_AT_decl_line"))
        origin = next((a for a in ("DW_AT_abstract_origin", "DW_AT_specification")
                       if a in attrs), None)
        if origin is None:
            break
        try:
            current = current.get_DIE_from_attribute(origin)
        except Exception:  # a dangling reference ends the chain
            break
        seen += 1
    shown = demangle(linkage) if linkage else (name or "??")
    return shown, decl_file if decl_file is not None else -1, decl_line or 0


def _file_names(program: Any, version: int, comp_dir: str) -> list[str]:
    header = program.header
    dirs = [_text_value(d) for d in header.get("include_directory", [])]
    if version < 5:
        dirs = [comp_dir, *dirs]
    names = []
    for entry in header.get("file_entry", []):
        name = _text_value(entry.name)
        directory = dirs[entry.dir_index] if entry.dir_index < len(dirs) else ""
        if version >= 5 and entry.dir_index == 0 and not directory:
            directory = comp_dir
        path = name if os.path.isabs(name) else os.path.join(directory or comp_dir, name)
        if not os.path.isabs(path) and comp_dir:
            path = os.path.join(comp_dir, path)
        names.append(os.path.normpath(path))
    return names


def _file_index(value: int | None, version: int) -> int:
    """Index into CuTable.files: DWARF 5 counts files from 0, earlier versions from 1."""
    if value is None:
        return -1
    return value if version >= 5 else value - 1


def _text(attr: Any) -> str:
    return _text_value(attr.value) if attr is not None else ""


def _text_value(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _int(attr: Any) -> int:
    return int(attr.value) if attr is not None and isinstance(attr.value, int) else 0
