"""DWARF call-frame information (.eh_frame) for unwinding stacks copied from a process.

Attach mode receives, per sample, the interrupted pc, sp and rbp and a copy
of the top of the user stack (docs/attach-stream.md).  Code built with
`-O2` has no frame pointers, so return addresses are found the way a
debugger does: the FDE covering the pc says how to compute the canonical
frame address (CFA) from sp or rbp, and where the caller's rbp was saved;
the return address sits just below the CFA on x86-64.

Only what unwinding needs is kept: per pc range, the CFA register and
offset, the rbp save slot, and whether the return address is undefined (the
outermost frame).  FDEs are found through .eh_frame_hdr's sorted table and
decoded lazily, one per function actually seen.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from proftui.collectors.symbols.leb128 import read_leb128

REG_RBP, REG_RSP, REG_RA = 6, 7, 16  # DWARF register numbers on x86-64
MAX_FRAMES = 127


@dataclass(frozen=True, slots=True)
class FrameRule:
    """How to find the caller's frame at one pc.

    cfa_reg: REG_RSP or REG_RBP (CFA = reg + cfa_offset); rbp_offset: the
    caller's rbp is saved at CFA + rbp_offset (None: rbp unchanged);
    outermost: the return address is undefined (stop here).
    """

    cfa_reg: int
    cfa_offset: int
    rbp_offset: int | None
    outermost: bool = False


class _Reader:
    """Little-endian reads from bytes standing at link-time address `base`."""

    def __init__(self, data: bytes, base: int) -> None:
        self.data = data
        self.base = base

    def u8(self, pos: int) -> tuple[int, int]:
        return self.data[pos], pos + 1

    def fixed(self, pos: int, size: int, signed: bool = False) -> tuple[int, int]:
        if pos + size > len(self.data):
            raise ValueError("read past the section")
        return int.from_bytes(self.data[pos:pos + size], "little", signed=signed), pos + size

    def leb(self, pos: int, signed: bool = False) -> tuple[int, int]:
        try:
            return read_leb128(self.data, pos, signed)
        except IndexError:
            raise ValueError("LEB128 past the section") from None

    def encoded(self, pos: int, encoding: int, datarel_base: int = 0) -> tuple[int, int]:
        """A DW_EH_PE-encoded pointer as a link-time address."""
        if encoding == 0xFF:
            return 0, pos
        field_address = self.base + pos
        fmt = encoding & 0x0F
        if fmt == 0x00:
            value, pos = self.fixed(pos, 8)
        elif fmt == 0x01:
            value, pos = self.leb(pos)
        elif fmt in (0x02, 0x03, 0x04):
            value, pos = self.fixed(pos, {0x02: 2, 0x03: 4, 0x04: 8}[fmt])
        elif fmt == 0x09:
            value, pos = self.leb(pos, signed=True)
        elif fmt in (0x0A, 0x0B, 0x0C):
            value, pos = self.fixed(pos, {0x0A: 2, 0x0B: 4, 0x0C: 8}[fmt], signed=True)
        else:
            raise ValueError(f"pointer encoding 0x{encoding:x}")
        application = encoding & 0x70
        if application == 0x10:
            value += field_address
        elif application == 0x30:
            value += datarel_base
        return value & 0xFFFFFFFFFFFFFFFF, pos


@dataclass
class _Cie:
    code_align: int
    data_align: int
    ra_register: int
    fde_encoding: int
    has_augmentation_data: bool
    instructions: bytes


class ModuleCfi:
    """The .eh_frame unwind rules of one ELF file, decoded per function on demand."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._starts: list[int] = []
        self._fdes: list[int] = []  # .eh_frame offsets, parallel to _starts
        self._rules: dict[int, list[tuple[int, int, FrameRule]]] = {}  # fde -> [(lo, hi, rule)]
        self._cies: dict[int, _Cie] = {}
        self._frame: _Reader | None = None
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                frame = elf.get_section_by_name(".eh_frame")
                header = elf.get_section_by_name(".eh_frame_hdr")
                if frame is None:
                    return
                self._frame = _Reader(frame.data(), frame["sh_addr"])
                if header is not None:
                    self._read_header(_Reader(header.data(), header["sh_addr"]))
                if not self._starts:
                    self._scan_frames()
        except (OSError, ELFError, ValueError, struct.error):
            self._starts, self._fdes = [], []

    @property
    def usable(self) -> bool:
        return bool(self._starts)

    def _read_header(self, hdr: _Reader) -> None:
        version, pos = hdr.u8(0)
        if version != 1:
            return
        ptr_enc, pos = hdr.u8(pos)
        count_enc, pos = hdr.u8(pos)
        table_enc, pos = hdr.u8(pos)
        _, pos = hdr.encoded(pos, ptr_enc, hdr.base)
        count, pos = hdr.encoded(pos, count_enc, hdr.base)
        assert self._frame is not None
        for _ in range(count):
            start, pos = hdr.encoded(pos, table_enc, hdr.base)
            fde, pos = hdr.encoded(pos, table_enc, hdr.base)
            self._starts.append(start)
            self._fdes.append(fde - self._frame.base)

    def _scan_frames(self) -> None:
        """No .eh_frame_hdr: walk .eh_frame itself for the FDEs' start addresses."""
        frame = self._frame
        assert frame is not None
        entries = []
        pos = 0
        while pos + 4 <= len(frame.data):
            length, body = frame.fixed(pos, 4)
            if length == 0:
                break
            cie_pointer, _ = frame.fixed(body, 4)
            if cie_pointer != 0:
                cie = self._cie(body - cie_pointer)
                start, _ = frame.encoded(body + 4, cie.fde_encoding)
                entries.append((start, pos))
            pos = body + length
        entries.sort()
        self._starts = [s for s, _ in entries]
        self._fdes = [o for _, o in entries]

    def rule(self, vaddr: int) -> FrameRule | None:
        """The unwind rule at link-time `vaddr`, or None when no FDE covers it."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i < 0:
            return None
        fde = self._fdes[i]
        rows = self._rules.get(fde)
        if rows is None:
            try:
                rows = self._decode_fde(fde)
            except (ValueError, IndexError, KeyError):
                rows = []
            self._rules[fde] = rows
        for lo, hi, rule in rows:
            if lo <= vaddr < hi:
                return rule
        return None

    def _cie(self, offset: int) -> _Cie:
        cie = self._cies.get(offset)
        if cie is not None:
            return cie
        frame = self._frame
        assert frame is not None
        length, pos = frame.fixed(offset, 4)
        end = pos + length
        _, pos = frame.fixed(pos, 4)  # CIE id (0)
        version, pos = frame.u8(pos)
        nul = frame.data.index(b"\0", pos)
        augmentation = frame.data[pos:nul].decode("ascii", "replace")
        pos = nul + 1
        if "eh" in augmentation:
            _, pos = frame.fixed(pos, 8)
        code_align, pos = frame.leb(pos)
        data_align, pos = frame.leb(pos, signed=True)
        if version == 1:
            ra_register, pos = frame.u8(pos)
        else:
            ra_register, pos = frame.leb(pos)
        fde_encoding = 0
        if augmentation.startswith("z"):
            aug_length, pos = frame.leb(pos)
            aug_end = pos + aug_length
            for char in augmentation[1:]:
                if char == "R":
                    fde_encoding, pos = frame.u8(pos)
                elif char == "L":
                    _, pos = frame.u8(pos)
                elif char == "P":
                    encoding, pos = frame.u8(pos)
                    _, pos = frame.encoded(pos, encoding)
            pos = aug_end
        cie = _Cie(code_align, data_align, ra_register, fde_encoding,
                   augmentation.startswith("z"), frame.data[pos:end])
        self._cies[offset] = cie
        return cie

    def _decode_fde(self, offset: int) -> list[tuple[int, int, FrameRule]]:
        frame = self._frame
        assert frame is not None
        length, pos = frame.fixed(offset, 4)
        end = pos + length
        cie_pointer, after = frame.fixed(pos, 4)
        cie = self._cie(pos - cie_pointer)
        start, after = frame.encoded(after, cie.fde_encoding)
        span, after = frame.encoded(after, cie.fde_encoding & 0x0F)
        if cie.has_augmentation_data:
            aug_length, after = frame.leb(after)
            after += aug_length
        return _run_program(cie, frame.data[after:end], start, start + span, frame.base + after)


def _run_program(cie: _Cie, fde_program: bytes, start: int, end: int,
                 program_address: int) -> list[tuple[int, int, FrameRule]]:
    """Execute CIE then FDE instructions; one (lo, hi, rule) per address range."""
    state: dict[str, Any] = {"reg": REG_RSP, "off": 8, "rbp": None, "ra_undef": False,
                             "expr": False}
    initial: dict = {}
    saved: list[dict] = []
    rows: list[tuple[int, int, FrameRule]] = []
    loc = start

    def emit(upto: int) -> None:
        if upto > loc:
            if state["expr"]:
                # CFA expressions appear in PLT stubs: CFA = rsp + 8 is right at entry.
                rule = FrameRule(REG_RSP, 8, None)
            else:
                rule = FrameRule(state["reg"], state["off"], state["rbp"], state["ra_undef"])
            rows.append((loc, upto, rule))

    for program, is_cie in ((cie.instructions, True), (fde_program, False)):
        reader = _Reader(program, program_address)
        pos = 0
        while pos < len(program):
            op, pos = reader.u8(pos)
            high, low = op & 0xC0, op & 0x3F
            new_loc = None
            if high == 0x40:
                new_loc = loc + low * cie.code_align
            elif high == 0x80:
                value, pos = reader.leb(pos)
                _set_reg(state, low, value * cie.data_align, cie)
            elif high == 0xC0:
                _restore(state, initial, low)
            elif op == 0x00:
                pass
            elif op == 0x01:
                new_loc, pos = reader.fixed(pos, 8)
            elif op in (0x02, 0x03, 0x04):
                delta, pos = reader.fixed(pos, {0x02: 1, 0x03: 2, 0x04: 4}[op])
                new_loc = loc + delta * cie.code_align
            elif op in (0x05, 0x11, 0x2F):
                reg, pos = reader.leb(pos)
                value, pos = reader.leb(pos, signed=(op == 0x11))
                factor = cie.data_align * (-1 if op == 0x2F else 1)
                _set_reg(state, reg, value * factor, cie)
            elif op == 0x06:
                reg, pos = reader.leb(pos)
                _restore(state, initial, reg)
            elif op in (0x07, 0x08):
                reg, pos = reader.leb(pos)
                if reg == REG_RBP:
                    state["rbp"] = None
                elif reg == cie.ra_register and op == 0x07:
                    state["ra_undef"] = True
            elif op == 0x09:
                _, pos = reader.leb(pos)
                _, pos = reader.leb(pos)
            elif op == 0x0A:
                saved.append(dict(state))
            elif op == 0x0B:
                if saved:
                    state.update(saved.pop())
            elif op in (0x0C, 0x12):
                reg, pos = reader.leb(pos)
                value, pos = reader.leb(pos, signed=(op == 0x12))
                state.update(reg=reg, off=value * (cie.data_align if op == 0x12 else 1),
                             expr=False)
            elif op == 0x0D:
                reg, pos = reader.leb(pos)
                state.update(reg=reg, expr=False)
            elif op in (0x0E, 0x13):
                value, pos = reader.leb(pos, signed=(op == 0x13))
                state["off"] = value * (cie.data_align if op == 0x13 else 1)
            elif op == 0x0F:
                size, pos = reader.leb(pos)
                pos += size
                state["expr"] = True
            elif op in (0x10, 0x16):
                _, pos = reader.leb(pos)
                size, pos = reader.leb(pos)
                pos += size
            elif op in (0x14, 0x15):
                _, pos = reader.leb(pos)
                _, pos = reader.leb(pos, signed=(op == 0x15))
            elif op == 0x2E:
                _, pos = reader.leb(pos)
            else:
                raise ValueError(f"unknown CFA opcode 0x{op:x}")
            if new_loc is not None:
                if not is_cie:
                    emit(min(new_loc, end))
                loc = new_loc
        if is_cie:
            initial = dict(state)
    emit(end)
    return [(lo, hi, rule) for lo, hi, rule in rows if rule.cfa_reg in (REG_RSP, REG_RBP)]


def _set_reg(state: dict, reg: int, offset: int, cie: _Cie) -> None:
    if reg == REG_RBP:
        state["rbp"] = offset


def _restore(state: dict, initial: dict, reg: int) -> None:
    if reg == REG_RBP:
        state["rbp"] = initial.get("rbp")


Resolver = Callable[[int], tuple[str, int] | None]


class StackUnwinder:
    """Unwinds copied stacks of one process with CFI, frame pointers as fallback."""

    def __init__(self, resolve: Resolver, readable: Callable[[str], str] | None = None) -> None:
        self.resolve = resolve
        self.readable = readable or (lambda path: path)
        self._modules: dict[str, ModuleCfi] = {}

    def _module(self, path: str) -> ModuleCfi:
        module = self._modules.get(path)
        if module is None:
            module = self._modules[path] = ModuleCfi(self.readable(path))
        return module

    def unwind(self, ip: int, sp: int, bp: int, stack: bytes) -> list[int]:
        """Return addresses, innermost first, starting with `ip`.

        `stack` holds the process's memory from `sp` up; reads outside it end
        the walk, as do missing rules that frame pointers cannot replace.
        """
        size = len(stack)

        def read(address: int) -> int | None:
            offset = address - sp0
            if offset < 0 or offset + 8 > size:
                return None
            return int.from_bytes(stack[offset:offset + 8], "little")

        sp0 = sp
        frames = [ip]
        pc = ip
        for depth in range(MAX_FRAMES):
            resolved = self.resolve(pc if depth == 0 else pc - 1)
            rule = None
            if resolved is not None:
                module = self._module(resolved[0])
                if module.usable:
                    rule = module.rule(resolved[1])
            if rule is not None:
                if rule.outermost:
                    break
                cfa = (sp if rule.cfa_reg == REG_RSP else bp) + rule.cfa_offset
                ra = read(cfa - 8)
                if rule.rbp_offset is not None:
                    saved_bp = read(cfa + rule.rbp_offset)
                    if saved_bp is None:
                        break
                    bp = saved_bp
                sp = cfa
            else:  # no CFI here: trust a frame pointer if it points into the copy
                ra = read(bp + 8)
                saved_bp = read(bp)
                if ra is None or saved_bp is None or bp < sp:
                    break
                sp, bp = bp + 16, saved_bp
            if not ra:
                break
            frames.append(ra)
            pc = ra
        return frames
