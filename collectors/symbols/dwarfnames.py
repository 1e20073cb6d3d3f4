"""Qualified names of inlined C++ functions, read from the DWARF DIEs.

A SymCache names an inlined function after what it finds on the chain
DW_TAG_inlined_subroutine -> DW_AT_abstract_origin -> DW_AT_specification;
where no DIE of the chain has a linkage name (members of classes in an
anonymous namespace, some templates) it keeps the bare DW_AT_name ("mix",
"operator<"), so different functions with one short name would share a
row.  `InlineNames` finds the inlined-subroutine DIEs at an address and
names them as the out-of-line copy is named: the demangled linkage name, or
else the name qualified by its parent namespaces and classes, with the
parameter types, as the demangler spells them.  Only C++ units are read;
each compile unit's function index and each DIE's name are cached.
"""

from __future__ import annotations

import bisect
import os
import re
from typing import Any

from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.elf import open_regular

LINKAGE = ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name")
SCOPES = {"DW_TAG_namespace": "(anonymous namespace)", "DW_TAG_class_type": None,
          "DW_TAG_structure_type": None, "DW_TAG_union_type": None}
# Tags whose children may hold functions with code (out-of-line members of
# classes in namespaces sit in the namespace DIE).
CONTAINERS = {"DW_TAG_compile_unit", "DW_TAG_partial_unit", "DW_TAG_namespace"}
BLOCKS = {"DW_TAG_lexical_block", "DW_TAG_inlined_subroutine"}
# g++'s DW_TAG_base_type names that the demangler spells another way
BASE_TYPES = {"long int": "long", "long unsigned int": "unsigned long",
              "short int": "short", "short unsigned int": "unsigned short",
              "long long int": "long long", "long long unsigned int": "unsigned long long",
              "__int128 unsigned": "unsigned __int128", "_Bool": "bool"}
_CONST_FIRST = re.compile(r"([<,] ?)const ((?:\(anonymous namespace\)::|[\w:])+)(?=\s*[,>*&])")
_DEPTH = 16  # reference chains and type nesting are short; this bounds bad DWARF


class InlineNames:
    """Inline chains at addresses of one debug file, named from its DIEs (lazily opened)."""

    def __init__(self, debug_path: str) -> None:
        self.debug_path = debug_path
        self._dwarf: Any = None
        self._file: Any = None
        self._unit_ranges: tuple[list[int], list[tuple[int, int, int]]] | None = None
        self._failed = False
        self._aranges: Any = None
        self._units: dict[int, tuple[list[int], list[int], list[Any]]] = {}
        self._names: dict[int, str | None] = {}
        self._memo: dict[tuple[str, int], str] = {}  # scopes and types by DIE offset
        self._kids: dict[int, list[tuple[list[tuple[int, int]], Any]]] = {}

    def chain(self, vaddr: int) -> list[str | None] | None:
        """Names of the inlined subroutines at link-time `vaddr`, outermost first
        (None for one that cannot be named); None when the DWARF cannot tell."""
        try:
            return self._chain(vaddr)
        except Exception:  # DWARF pyelftools cannot read: the SymCache's names stay
            return None

    def _chain(self, vaddr: int) -> list[str | None] | None:
        unit = self._unit_at(vaddr)
        if unit is None:
            return None
        starts, ends, dies = unit
        i = bisect.bisect_right(starts, vaddr) - 1
        while i >= 0 and not (starts[i] <= vaddr < ends[i]):
            i -= 1  # nested or overlapping ranges: the nearest one that holds vaddr
        if i < 0:
            return None
        names: list[str | None] = []
        die = dies[i]
        for _ in range(256):
            inner = next((c for spans, c in self._blocks(die)
                          if any(lo <= vaddr < hi for lo, hi in spans)), None)
            if inner is None:
                return names
            if inner.tag == "DW_TAG_inlined_subroutine":
                names.append(self.name(inner))
            die = inner
        return names

    def name(self, die: Any) -> str | None:
        """The qualified name of the function `die` (an inlined subroutine) stands for."""
        cached = self._names.get(die.offset, "")
        if cached != "":
            return cached
        name = None
        try:
            name = self._resolve(die)
        except Exception:  # malformed DWARF: keep the SymCache's name
            name = None
        self._names[die.offset] = name
        return name

    # -- names ---------------------------------------------------------------

    def _resolve(self, die: Any) -> str | None:
        last = die
        for _ in range(_DEPTH):
            for attr in LINKAGE:
                if attr in last.attributes:
                    return demangle(_text(last.attributes[attr].value))
            ref = next((a for a in ("DW_AT_abstract_origin", "DW_AT_specification")
                        if a in last.attributes), None)
            if ref is None:
                break
            last = last.get_DIE_from_attribute(ref)
        if last.offset in self._names:  # another inlined copy of the same function
            return self._names[last.offset]
        name = self._qualify(last)
        self._names[last.offset] = name
        return name

    def _qualify(self, last: Any) -> str | None:
        """The name of declaration `last` (no linkage name): scopes, name, parameters."""
        bare = last.attributes.get("DW_AT_name")
        if bare is None:
            return None
        if not _is_cxx(last.cu):
            return _text(bare.value)
        scope = _scope(last, self._memo)
        if not scope:
            # g++ gives every C++-linkage function at global scope a linkage name: one
            # without is extern "C" (atol from <stdlib.h>), named as in C
            return _text(bare.value)
        name = _text(bare.value)
        args = _template_args(last, self._memo)
        if args is None:
            return f"{scope}{_spelled(name)}{self._params(last)}"
        # a function template: "<...>" from its parameters (DW_AT_name omits default
        # arguments), and the return type in front, as the demangler prints them
        base = name.split("<", 1)[0]
        owner = scope.removesuffix("::").rsplit("::", 1)[-1].split("<", 1)[0]
        ret = "" if base in (owner, f"~{owner}") or base.startswith("operator ") \
            else f"{_type_name(_ref(last, 'DW_AT_type'), self._memo)} "
        return f"{ret}{scope}{base}{_angle(args)}{self._params(last)}"

    def _params(self, decl: Any) -> str:
        """"(int const&, unsigned long) const" from the declaration's formal parameters."""
        types, const = [], ""
        for child in decl.iter_children():
            if child.tag == "DW_TAG_unspecified_parameters":
                types.append("...")
            if child.tag != "DW_TAG_formal_parameter":
                continue
            if "DW_AT_artificial" in child.attributes:  # `this`: a const method's points to const
                target = _ref(child, "DW_AT_type")
                target = _ref(target, "DW_AT_type") if target is not None else None
                if target is not None and target.tag == "DW_TAG_const_type":
                    const = " const"
                continue
            types.append(_type_name(_ref(child, "DW_AT_type"), self._memo))
        return f"({', '.join(types)}){const}"

    # -- units and ranges --------------------------------------------------------

    def _open(self) -> Any:
        if self._dwarf is None and not self._failed:
            try:
                from elftools.elf.elffile import ELFFile
                # open_regular: a file swapped for a FIFO must not block; the file stays
                # open while the module lives (pyelftools reads DIEs lazily from it)
                self._file = os.fdopen(open_regular(self.debug_path), "rb")
                self._dwarf = ELFFile(self._file).get_dwarf_info(
                    relocate_dwarf_sections=False, follow_links=False)
                self._aranges = self._dwarf.get_aranges()
            except Exception:  # no DWARF pyelftools can read: names stay the SymCache's
                self._failed = True
        return self._dwarf

    def _unit_at(self, vaddr: int) -> tuple[list[int], list[int], list[Any]] | None:
        dwarf = self._open()
        if dwarf is None:
            return None
        offset = self._aranges.cu_offset_at_addr(vaddr) if self._aranges is not None else None
        if offset is None:
            offset = self._scan_units(vaddr)
            if offset is None:
                return None
        unit = self._units.get(offset)
        if unit is None:
            unit = self._index(dwarf.get_CU_at(offset))
            self._units[offset] = unit
        return unit

    def _scan_units(self, vaddr: int) -> int | None:
        """The unit whose ranges hold `vaddr`, when .debug_aranges does not say (clang
        emits none): the units' ranges are read once, then searched."""
        if self._unit_ranges is None:
            rows = sorted((lo, hi, cu.cu_offset) for cu in self._dwarf.iter_CUs()
                          for lo, hi in self._ranges(cu.get_top_DIE()))
            self._unit_ranges = ([r[0] for r in rows], rows)
        starts, rows = self._unit_ranges
        i = bisect.bisect_right(starts, vaddr) - 1
        while i >= 0 and not (rows[i][0] <= vaddr < rows[i][1]):
            i -= 1
        return rows[i][2] if i >= 0 else None

    def _index(self, cu: Any) -> tuple[list[int], list[int], list[Any]]:
        """Functions with code of `cu`, sorted by start: C units get none (C names are
        never qualified, the SymCache's are right)."""
        rows: list[tuple[int, int, Any]] = []
        if _is_cxx(cu):
            stack = [cu.get_top_DIE()]
            while stack:
                for child in stack.pop().iter_children():
                    if child.tag in CONTAINERS:
                        stack.append(child)
                    elif child.tag == "DW_TAG_subprogram":
                        rows += [(lo, hi, child) for lo, hi in self._ranges(child)]
        rows.sort(key=lambda r: (r[0], -r[1]))
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]

    def _blocks(self, die: Any) -> list[tuple[list[tuple[int, int]], Any]]:
        """The lexical blocks and inlined subroutines directly in `die`, with their
        address ranges (cached: every address of a function walks them)."""
        found = self._kids.get(die.offset)
        if found is None:
            found = [(self._ranges(c), c) for c in die.iter_children() if c.tag in BLOCKS]
            self._kids[die.offset] = found
        return found

    def _ranges(self, die: Any) -> list[tuple[int, int]]:
        attrs = die.attributes
        if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
            lo = attrs["DW_AT_low_pc"].value
            high = attrs["DW_AT_high_pc"]
            hi = high.value if high.form == "DW_FORM_addr" else lo + high.value
            return [(lo, hi)]
        if "DW_AT_ranges" in attrs:
            ranges = self._dwarf.range_lists()
            if ranges is None:
                return []
            base = die.cu.get_top_DIE().attributes.get("DW_AT_low_pc")
            out = []
            base_pc = base.value if base is not None else 0
            attr = attrs["DW_AT_ranges"]
            if attr.form == "DW_FORM_rnglistx":
                return []  # split DWARF: the SymCache's names stay
            for entry in ranges.get_range_list_at_offset(attr.value, cu=die.cu):
                kind = type(entry).__name__
                if kind == "BaseAddressEntry":
                    base_pc = entry.base_address
                elif kind == "RangeEntry":
                    lo, hi = entry.begin_offset, entry.end_offset
                    if not entry.is_absolute:
                        lo, hi = lo + base_pc, hi + base_pc
                    out.append((lo, hi))
            return out
        return []


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _is_cxx(cu: Any) -> bool:
    lang = cu.get_top_DIE().attributes.get("DW_AT_language")
    # DW_LANG_C_plus_plus 0x4, _03 0x19, _11 0x1a, _14 0x21; 0x0 for unknown
    return lang is not None and lang.value in (0x4, 0x19, 0x1a, 0x21)


def _ref(die: Any, attr: str) -> Any:
    return die.get_DIE_from_attribute(attr) if attr in die.attributes else None


def _scope(die: Any, memo: dict[tuple[str, int], str]) -> str:
    """"ns::Class::" for the namespaces and classes that enclose `die`."""
    key = ("s", die.offset)
    if key not in memo:
        memo[key] = _scope_of(die)
    return memo[key]


def _scope_of(die: Any) -> str:
    parts: list[str] = []
    parent = die.get_parent()
    for _ in range(64):
        if parent is None or parent.tag not in SCOPES:
            break
        name = parent.attributes.get("DW_AT_name")
        unnamed = SCOPES[parent.tag]  # "(anonymous namespace)", or None: no text
        if name is not None:
            parts.append(_spelled(_text(name.value)))
        elif unnamed is not None:
            parts.append(unnamed)
        parent = parent.get_parent()
    return "".join(f"{p}::" for p in reversed(parts))


def _spelled(name: str) -> str:
    """A DW_AT_name with g++'s base type spellings as the demangler has them
    ("foo<long int>" -> "foo<long>")."""
    if "<" not in name:
        return name
    for dwarf, shown in BASE_TYPES.items():
        if dwarf in name:
            name = re.sub(rf"(?<![\w:]){re.escape(dwarf)}(?!\w)", shown, name)
    # "pair<const K, long>" -> "pair<K const, long>"
    return _CONST_FIRST.sub(r"\1\2 const", name) if "const " in name else name


def _angle(args: list[str]) -> str:
    text = ", ".join(args)
    return f"<{text} >" if text.endswith(">") else f"<{text}>"


def _template_args(die: Any, memo: dict[tuple[str, int], str]) -> list[str] | None:
    """The template arguments of `die` as the demangler prints them; None when it
    is not a template."""
    args: list[str] = []
    found = False
    for child in die.iter_children():
        if child.tag == "DW_TAG_GNU_template_parameter_pack":
            found = True
            args += _template_args(child, memo) or []
        elif child.tag == "DW_TAG_template_type_param":
            found = True
            args.append(_type_name(_ref(child, "DW_AT_type"), memo))
        elif child.tag == "DW_TAG_template_value_param":
            found = True
            args.append(_value(child, memo))
    return args if found else None


def _value(param: Any, memo: dict[tuple[str, int], str]) -> str:
    """A template value argument: "true", "0ul", "3", as the demangler writes them."""
    value = param.attributes.get("DW_AT_const_value")
    kind = _type_name(_ref(param, "DW_AT_type"), memo)
    if value is None or not isinstance(value.value, int):
        return "?"
    number = value.value
    if kind == "bool":
        return "true" if number else "false"
    suffix = {"unsigned long": "ul", "long": "l", "unsigned int": "u",
              "unsigned long long": "ull", "long long": "ll"}
    if kind == "int":
        return str(number)
    if kind in suffix:
        return f"{number}{suffix[kind]}"
    return f"({kind}){number}"


def _type_name(die: Any, memo: dict[tuple[str, int], str], depth: int = 0) -> str:
    """A DWARF type as the demangler prints it ("int const&", "std::vector<int>*")."""
    if die is None:
        return "void"
    if depth > _DEPTH:
        return "?"
    key = ("t", die.offset)
    if key not in memo:
        memo[key] = _type_of(die, memo, depth)
    return memo[key]


def _type_of(die: Any, memo: dict[tuple[str, int], str], depth: int) -> str:
    tag = die.tag
    inner = _ref(die, "DW_AT_type")
    if tag == "DW_TAG_const_type":
        return f"{_type_name(inner, memo, depth + 1)} const"
    if tag == "DW_TAG_volatile_type":
        return f"{_type_name(inner, memo, depth + 1)} volatile"
    if tag == "DW_TAG_pointer_type":
        return f"{_type_name(inner, memo, depth + 1)}*"
    if tag == "DW_TAG_reference_type":
        return f"{_type_name(inner, memo, depth + 1)}&"
    if tag == "DW_TAG_rvalue_reference_type":
        return f"{_type_name(inner, memo, depth + 1)}&&"
    if tag == "DW_TAG_typedef" and inner is not None:  # mangled names use the real type
        return _type_name(inner, memo, depth + 1)
    name = die.attributes.get("DW_AT_name")
    if name is None:
        return "?"
    if tag == "DW_TAG_base_type":
        text = _text(name.value)
        return BASE_TYPES.get(text, text)
    return _scope(die, memo) + _spelled(_text(name.value))
