"""The .eh_frame decoder agrees with binutils' `readelf -wF` row by row."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.symbols.cfi import REG_RBP, REG_RSP, ModuleCfi

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf missing")
REGS = {"rsp": REG_RSP, "rbp": REG_RBP}


def readelf_rows(path: Path) -> list[tuple[int, int, str, str, str]]:
    """(fde end, loc, cfa, rbp, ra) for each row of `readelf -wF`; '' when no column."""
    # readelf exits 1 on libc (it cannot follow the separate debug link), output is complete.
    out = subprocess.run(["readelf", "-wF", str(path)], capture_output=True, text=True).stdout
    rows = []
    columns: list[str] = []
    fde_end = None
    for line in out.splitlines():
        fde = re.search(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if fde:
            fde_end = int(fde[2], 16)
            continue
        if "CIE" in line:
            fde_end = None
            continue
        if line.strip().startswith("LOC"):
            columns = line.split()
            continue
        fields: list[str] = []
        for token in line.split():  # "r3 (rbx)" is one value
            if token.startswith("(") and fields:
                fields[-1] += " " + token
            else:
                fields.append(token)
        if fde_end is not None and fields and re.fullmatch(r"[0-9a-f]{16}", fields[0]):
            values = dict(zip(columns, fields, strict=False))
            rows.append((fde_end, int(fields[0], 16), values.get("CFA", ""),
                         values.get("rbp", ""), values.get("ra", "")))
    return rows


def check(path: Path, limit: int | None = None) -> int:
    module = ModuleCfi(str(path))
    assert module.usable
    rows = readelf_rows(path)
    if limit is not None:
        rows = rows[:: max(1, len(rows) // limit)]
    checked = 0
    for _, loc, cfa, rbp, ra in rows:
        match = re.fullmatch(r"(rsp|rbp)\+(\d+)", cfa)
        if match is None:
            continue  # expressions (PLT) and other registers: not used for unwinding
        rule = module.rule(loc)
        assert rule is not None, hex(loc)
        assert (rule.cfa_reg, rule.cfa_offset) == (REGS[match[1]], int(match[2])), hex(loc)
        saved = re.fullmatch(r"c(-\d+)", rbp)
        assert rule.rbp_offset == (int(saved[1]) if saved else None), hex(loc)
        assert rule.outermost == (ra == "u"), hex(loc)
        checked += 1
    return checked


@pytest.mark.parametrize("flags", [["-O2", "-fomit-frame-pointer"], ["-O0"],
                                   ["-O2", "-fno-omit-frame-pointer"]])
def test_fixture_rows_match_readelf(compile_c, flags: list[str]) -> None:
    binary = compile_c("sym_lines.c", ["-g", *flags])
    assert check(binary) >= 4


def test_libc_rows_match_readelf() -> None:
    libc = next((p for p in (Path("/lib/x86_64-linux-gnu/libc.so.6"),
                             Path("/usr/lib/x86_64-linux-gnu/libc.so.6")) if p.exists()), None)
    if libc is None:
        pytest.skip("no x86-64 glibc at the Debian path")
    assert check(libc, limit=3000) > 1000


def test_not_elf_is_unusable(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF" + bytes(60))
    assert not ModuleCfi(str(junk)).usable
    assert ModuleCfi(str(junk)).rule(0x1000) is None
