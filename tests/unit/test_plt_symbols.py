"""PLT stubs are named `name@plt`, as objdump names them, never `_init` (the size-0
symbol before .plt): tests/fixtures/plt_calls.c at -O2 in every PLT layout (lazy,
-z now, IBT .plt.sec, non-PIE, static with IRELATIVE stubs) and the system's libc."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.symbols.elf import PLT_SECTIONS, ElfFile
from proftui.collectors.symbols.symbolizer import ModuleSymbols

from tests.conftest import build_fixture

LAYOUTS = {
    "lazy": ["-Wl,-z,lazy"],
    "now": ["-Wl,-z,now"],
    "ibt": ["-fcf-protection=full", "-Wl,-z,ibtplt"],  # stubs in .plt.sec, lazy code in .plt
    "no-pie": ["-no-pie", "-fcf-protection=none"],
    "static": ["-static"],  # IRELATIVE stubs of the ifuncs (memcpy, strlen...)
}
LABEL = re.compile(r"^([0-9a-f]+) <(.+)>:$")


def objdump_labels(path: Path) -> dict[int, str]:
    """objdump -d's labels in the PLT sections: address -> name."""
    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed")
    args = ["objdump", "-d"] + [a for s in PLT_SECTIONS for a in ("-j", s)] + [str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return {int(m[1], 16): m[2] for m in map(LABEL.match, out.splitlines()) if m}


def nm_names(path: Path) -> dict[int, set[str]]:
    """Every symbol name at each address (nm and nm -D), for the IRELATIVE stubs objdump
    numbers."""
    out = "".join(subprocess.run(["nm", *flag, str(path)], capture_output=True,
                                 text=True).stdout for flag in ([], ["-D"]))
    names: dict[int, set[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            names.setdefault(int(parts[0], 16), set()).add(parts[2].split("@", 1)[0])
    return names


JMP = re.compile(r"^\s*([0-9a-f]+):\s.*\sjmp\s+\*0x[0-9a-f]+\(%rip\)\s+# ([0-9a-f]+)")


def check_irelative(path: Path) -> int:
    """Static programs (objdump here labels only `.plt`): each stub's `jmp *slot(%rip)`
    as objdump decodes it, the slot's IRELATIVE relocation as readelf lists it, and the
    ifunc at its addend as nm names it, must give the stub's name."""
    args = ["objdump", "-d"] + [a for s in PLT_SECTIONS for a in ("-j", s)] + [str(path)]
    jumps = {int(m[1], 16): int(m[2], 16) for m in map(
        JMP.match, subprocess.run(args, capture_output=True, text=True).stdout.splitlines())
        if m}
    relocs = {}
    for line in subprocess.run(["readelf", "-rW", str(path)], capture_output=True,
                               text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "R_X86_64_IRELATIVE":
            relocs[int(parts[0], 16)] = int(parts[-1], 16)
    names = nm_names(path)
    module = ModuleSymbols(str(path))
    compared = 0
    for stub, slot in sorted(jumps.items()):
        if slot not in relocs:
            continue
        mine = module.function_at(stub)
        assert mine is not None and mine.name.endswith("@plt"), (hex(stub), mine)
        assert mine.name.removesuffix("@plt") in names.get(relocs[slot], set()), (
            hex(stub), mine.name, names.get(relocs[slot]))
        compared += 1
    return compared


def plt_ranges(path: Path) -> list[tuple[int, int]]:
    with ElfFile(path) as elf:
        return [(s.addr, s.addr + s.size) for s in elf.sections if s.name in PLT_SECTIONS]


def check_against_objdump(path: Path) -> int:
    """Every stub objdump names gets that name from the symbolizer, at its first and last
    byte; no PLT byte symbolizes as _init.  Returns how many stubs were compared."""
    module = ModuleSymbols(str(path))
    labels = objdump_labels(path)
    symbols = {s.start: s for s in module.functions}
    by_address = nm_names(path)
    compared = 0
    for address, label in sorted(labels.items()):
        mine = module.function_at(address)
        assert mine is not None, (path.name, hex(address), label)
        if label == ".plt" or label.endswith("@plt-0x10"):  # the lazy-binding code
            if mine.name != ".plt":  # static: objdump labels only the section start
                assert mine.name.endswith("@plt"), (hex(address), label, mine.name)
            continue
        assert label.endswith("@plt"), label
        if label.startswith("*ABS*+0x"):  # an IRELATIVE stub: the ifunc it resolves
            target = int(label[len("*ABS*+"):-len("@plt")], 16)
            assert mine.name.removesuffix("@plt") in by_address.get(target, set()) | {
                label.removesuffix("@plt")}, (hex(address), label, mine.name)
        else:
            assert mine.name == label, (path.name, hex(address), label, mine.name)
        stub = symbols[address]
        last = module.function_at(address + stub.size - 1)
        assert last is not None and last.name == mine.name
        compared += 1
    for start, end in plt_ranges(path):
        for address in range(start, end):
            found = module.function_at(address)
            assert found is None or found.name != "_init", (path.name, hex(address))
    return compared


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_plt_stubs_named_as_objdump_names_them(layout: str) -> None:
    try:
        binary = build_fixture("plt_calls.c", ["-O2", "-g", *LAYOUTS[layout]],
                               output=f"plt_calls_{layout.replace('-', '_')}")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot link the {layout} layout here: {exc.stderr.strip()[-200:]}")
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stdout.startswith("plt_calls "), run
    compared = check_against_objdump(binary)
    module = ModuleSymbols(str(binary))
    names = {f.name for f in module.functions}
    if layout == "static":
        if shutil.which("readelf") is None:
            pytest.skip("readelf is not installed")
        compared += check_irelative(binary)
        assert compared >= 5, "a static glibc program calls ifuncs through its PLT"
        assert all("@plt" in n for n in names if n.startswith("*ABS*")), names
    else:
        assert {"qsort@plt", "strlen@plt", "printf@plt"} <= names, sorted(names)
        assert compared >= 3
    print(f"{layout}: {compared} PLT stubs named as objdump names them")


def test_libc_plt_stubs() -> None:
    """A real shared library: glibc's own PLT (JUMP_SLOT and IRELATIVE stubs)."""
    candidates = [Path("/lib/x86_64-linux-gnu/libc.so.6"), Path("/usr/lib64/libc.so.6"),
                  Path("/lib64/libc.so.6")]
    libc = next((p for p in candidates if p.exists()), None)
    if libc is None:
        pytest.skip("no x86-64 glibc at the usual paths")
    compared = check_against_objdump(libc)
    assert compared >= 10, compared
    print(f"libc: {compared} PLT stubs named as objdump names them")


def test_other_machines_get_no_synthetic_stubs(tmp_path: Path) -> None:
    """The decoder knows x86-64 only: another e_machine yields nothing, not garbage."""
    binary = build_fixture("plt_calls.c", ["-O2", "-g"])
    data = bytearray(binary.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64
    other = tmp_path / "aarch64"
    other.write_bytes(bytes(data))
    with ElfFile(other) as elf:
        assert elf.plt_symbols() == []
    with ElfFile(binary) as elf:
        assert elf.plt_symbols()
