"""The shared symbolizer against binutils on real compiled programs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.symbols.demangle import demangle
from proftui.collectors.symbols.maps import AddressSpace, parse_maps
from proftui.collectors.symbols.symbolizer import Symbolizer

needs_addr2line = pytest.mark.skipif(shutil.which("addr2line") is None,
                                     reason="addr2line (binutils) missing")


def addr2line(binary: Path, addresses: list[int]) -> list[list[str]]:
    """`addr2line -i` answers, one list of file:line (innermost first) per address."""
    out = subprocess.run(["addr2line", "-i", "-a", "-e", str(binary), *map(hex, addresses)],
                         capture_output=True, text=True, check=True).stdout
    answers: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("0x"):
            answers.append([])
        else:
            file, _, number = line.split(" (discriminator")[0].rpartition(":")
            # SymCache paths come normalized ("./a/../b.c" -> "b.c"); the file is the same.
            answers[-1].append(f"{os.path.normpath(file) if file != '??' else None}:{number}")
    return answers


@needs_addr2line
@pytest.mark.parametrize("flags", [["-O2", "-g"], ["-O0", "-g"], ["-O2", "-g", "-gdwarf-4"]])
def test_every_address_matches_addr2line(compile_c, flags: list[str]) -> None:
    binary = compile_c("sym_lines.c", flags)
    module = Symbolizer(use_cache=False).module(str(binary))
    addresses = [a for f in module.functions if f.name in ("accumulate", "scale", "main")
                 for a in range(f.start, f.start + f.size)]
    assert len(addresses) > 50
    expected = addr2line(binary, addresses)
    for address, theirs in zip(addresses, expected, strict=True):
        loc = module.location(address)
        mine = [f"{loc.file}:{loc.line}"] + [f"{i.file}:{i.line}" for i in loc.inlined]
        assert mine == theirs, hex(address)


def test_inlined_frames_come_after_their_function(compile_c) -> None:
    binary = compile_c("sym_lines.c", ["-O2", "-g"])
    symbolizer = Symbolizer(use_cache=False)
    module = symbolizer.module(str(binary))
    accumulate = next(f for f in module.functions if f.name == "accumulate")
    chains = [[f.function for f in symbolizer.frames(str(binary), a)]
              for a in range(accumulate.start, accumulate.start + accumulate.size)]
    assert ["accumulate", "mix", "square"] in chains
    first = symbolizer.frames(str(binary), accumulate.start)[0]
    # The function's frame points at its first instruction's line, outside any inline.
    assert f"{first.file}:{first.line}" == addr2line(binary, [accumulate.start])[0][-1]
    assert not first.inlined and first.address == accumulate.start and first.build_id


def test_cxx_names_are_demangled(compile_c) -> None:
    binary = compile_c("sym_cxx.cpp", ["-O2", "-g"], compiler="g++")
    module = Symbolizer(use_cache=False).module(str(binary))
    names = {f.name for f in module.functions}
    assert "geometry::Square::area(int) const" in names
    assert "double geometry::sum_areas<double>(std::vector<double, std::allocator<double> > "\
           "const&)" in names
    assert demangle("_ZN8geometry6Square4areaEi") == "geometry::Square::area(int)"
    assert demangle("plain_c_name") == "plain_c_name"


def test_separate_debug_file_through_debuglink(compile_c, tmp_path: Path) -> None:
    if shutil.which("objcopy") is None:
        pytest.skip("objcopy (binutils) missing")
    built = compile_c("sym_lines.c", ["-O2", "-g"])
    binary = tmp_path / "prog"
    shutil.copy(built, binary)
    debug = tmp_path / "prog.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(binary), str(debug)], check=True)
    subprocess.run(["objcopy", "--strip-all", f"--add-gnu-debuglink={debug}", str(binary)],
                   check=True, cwd=tmp_path)
    symbolizer = Symbolizer(use_cache=False)
    module = symbolizer.module(str(binary))
    assert module.debug_path == str(debug) and not module.stripped
    scale = next(f for f in module.functions if f.name.startswith("scale"))  # static, cloned
    frame = symbolizer.frame(str(binary), scale.start + 4)
    assert frame.function.startswith("scale [clone .")  # c++filt's spelling, for C too
    assert f"{frame.file}:{frame.line}" == addr2line(built, [scale.start])[0][-1]
    assert symbolizer.warnings == []


def test_stripped_binary_is_named_by_offsets(compile_c, tmp_path: Path) -> None:
    built = compile_c("sym_lines.c", ["-O2", "-g"])
    binary = tmp_path / "stripped"
    shutil.copy(built, binary)
    subprocess.run(["strip", "--strip-all", str(binary)], check=True)
    symbolizer = Symbolizer(use_cache=False)
    frame = symbolizer.frame(str(binary), 0x1234)
    assert frame.function == "stripped+0x1234" and frame.address == 0x1234
    assert any("stripped" in w for w in symbolizer.warnings)
    not_elf = tmp_path / "junk"
    not_elf.write_bytes(b"junk")
    assert symbolizer.frame(str(not_elf), 16).function == "junk+0x10"


def test_pie_load_bias_from_live_maps(compile_c) -> None:
    binary = compile_c("sym_spin.c", ["-O1", "-g", "-fPIE", "-pie"])
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        runtime = int(proc.stdout.readline(), 16)
        space = AddressSpace(proc.pid)
        resolved = space.resolve(runtime)
        assert resolved is not None and resolved[0] == str(binary)
        assert resolved[1] != runtime  # ASLR: the load bias was subtracted
        frames = Symbolizer(use_cache=False).frames_at(space, runtime + 1)
        assert frames[0].function == "wait_here"
        libc = [m for m in space.modules() if "libc" in m]
        assert libc, space.modules()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    # The process is gone; its mappings are not forgotten.
    space.refresh()
    assert space.resolve(runtime) is not None


def test_parse_maps_keeps_the_named_mappings() -> None:
    text = ("55d0-55e0 r-xp 00001000 08:01 12 /usr/bin/prog\n"
            "7f00-7f10 r-xp 00000000 08:01 13 /tmp/lib.so (deleted)\n"
            "7f20-7f30 rw-p 00000000 00:00 0 \n"
            "7ff0-7ff2 r--p 00000000 00:00 0 [vvar]\n"
            "7ffc-7ffd r-xp 00000000 00:00 0 [vdso]\n")
    maps = parse_maps(text)
    # the vDSO has no file but is symbolized from memory (tests/integration/test_vdso.py)
    assert [m.path for m in maps] == ["/usr/bin/prog", "/tmp/lib.so (deleted)", "[vdso]"]
    maps = maps[:2]
    space = AddressSpace()
    for m in maps:
        space.add(m)
    assert space.resolve(0x7F05) == ("/tmp/lib.so", 0x5)
    assert space.resolve(0x7F25) is None


def test_build_id_cache_serves_the_second_run(compile_c, tmp_path: Path) -> None:
    binary = compile_c("sym_lines.c", ["-O2", "-g"])
    cache = tmp_path / "symbols"
    cold = Symbolizer(cache_dir=cache)
    module = cold.module(str(binary))
    addresses = [a for f in module.functions for a in range(f.start, f.start + f.size, 3)]
    expected = {a: cold.frames(str(binary), a) for a in addresses}
    assert any(len(frames) > 1 for frames in expected.values())  # inline chains included
    assert cold.module(str(binary))._built  # written as soon as built: no flush needed
    assert sorted(p.name for p in cache.iterdir()) == [
        f"{module.build_id}.aliases.functions",  # its functions with two names (inlines)
        f"{module.build_id}.functions", f"{module.build_id}.symcache"]
    cache_files = list(cache.glob("*.symcache"))
    assert oct(cache_files[0].stat().st_mode & 0o777) == "0o600"
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    built = cache_files[0].read_bytes()

    def again() -> Symbolizer:
        symbolizer = Symbolizer(cache_dir=cache)
        assert {a: symbolizer.frames(str(binary), a) for a in addresses} == expected
        return symbolizer

    warm = again()
    assert not warm.module(str(binary))._built  # served from the file, nothing rebuilt
    # A damaged or foreign cache is rebuilt, never trusted.
    other = compile_c("sym_lines.c", ["-O1", "-g"])
    foreign = Symbolizer(cache_dir=tmp_path / "other")
    foreign.location(str(other), 0)
    for damage in (b"not a symcache", built[:len(built) // 2],
                   next((tmp_path / "other").glob("*.symcache")).read_bytes()):
        cache_files[0].write_bytes(damage)
        assert again().module(str(binary))._built
        assert cache_files[0].read_bytes() == built
    # A cache directory someone else can write to is neither read nor written.
    cache.chmod(0o777)
    assert again().module(str(binary))._built  # the file there is not read...
    for entry in cache.iterdir():
        entry.unlink()
    again().flush()
    assert list(cache.iterdir()) == []  # ...and nothing is written there


def test_corrupt_dwarf_falls_back_to_symbol_names(compile_c, tmp_path: Path) -> None:
    from proftui.collectors.symbols.elf import ElfFile

    built = compile_c("sym_lines.c", ["-O2", "-g"])
    with ElfFile(built) as elf:
        info = elf.section(".debug_abbrev")
    assert info is not None
    data = bytearray(built.read_bytes())
    data[info.offset:info.offset + info.size] = b"\xff" * info.size  # no abbreviation parses
    binary = tmp_path / "corrupt"
    binary.write_bytes(bytes(data))
    symbolizer = Symbolizer(cache_dir=tmp_path / "cache")
    module = symbolizer.module(str(binary))
    accumulate = next(f for f in module.functions if f.name == "accumulate")
    frames = symbolizer.frames(str(binary), accumulate.start + 4)
    assert [f.function for f in frames] == ["accumulate"] and frames[0].line is None
    [warning] = symbolizer.warnings
    assert "cannot read its DWARF" in warning and "\n" not in warning
    # No SymCache for DWARF that failed (its function table is kept: .symtab is good).
    assert not list((tmp_path / "cache").glob("*.symcache"))


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt (binutils) missing")
def test_clone_suffixes_spelled_like_cxxfilt() -> None:
    """C names get the clone spelling c++filt gives the same suffixes on C++ names."""
    suffixes = [".constprop.0", ".isra.0", ".part.0", ".cold", ".lto_priv.0",
                ".constprop.0.isra.0", ".part.0.cold", ".123", ".Upper", ".a.b", ".",
                # a stripped library's synthesized name (libz.so.1.2.13+0xaa60): no clone
                ".so.1.2.13+0xaa60", "+0x10"]
    mangled = [f"_Z3hotv{s}" for s in suffixes]
    theirs = subprocess.run(["c++filt", *mangled], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    for suffix, name, reference in zip(suffixes, mangled, theirs, strict=True):
        expected = reference.replace("hot()", "hot", 1) if reference != name else f"hot{suffix}"
        assert demangle(f"hot{suffix}") == expected, suffix
        assert demangle(name) == reference, suffix
    assert demangle("memcpy@@GLIBC_2.14") == "memcpy@@GLIBC_2.14"


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) missing")
@pytest.mark.parametrize("byteorder", ["native", "foreign"])
def test_function_symbols_match_readelf(compile_c, monkeypatch: pytest.MonkeyPatch,
                                        byteorder: str) -> None:
    """The struct/memoryview symbol reader against readelf (both decoding paths)."""
    import types

    from proftui.collectors.symbols import elf as elf_module

    binary = compile_c("sym_cxx.cpp", ["-O2", "-g"], compiler="g++")
    if byteorder == "foreign":  # take the entry-by-entry path a big-endian file takes
        other = "big" if sys.byteorder == "little" else "little"
        monkeypatch.setattr(elf_module, "sys", types.SimpleNamespace(byteorder=other))
    with elf_module.ElfFile(binary) as elf:
        section = elf.section(".symtab")
        assert section is not None
        mine = sorted((v, z, n) for v, z, _, n in elf.function_symbols(section))
    out = subprocess.run(["readelf", "-W", "--syms", str(binary)], capture_output=True,
                         text=True, check=True).stdout
    theirs = []
    table = ""
    for line in out.splitlines():
        if line.startswith("Symbol table"):
            table = line.split("'")[1]
        parts = line.split()
        if (table == ".symtab" and len(parts) >= 8 and parts[0].endswith(":")
                and parts[3] in ("FUNC", "IFUNC") and parts[6] != "UND" and int(parts[1], 16)):
            theirs.append((int(parts[1], 16), int(parts[2], 0), parts[7]))
    assert len(mine) > 10 and mine == sorted(theirs)


def test_symcache_lookup_agrees_with_symbolics_own_on_lua() -> None:
    """The direct SymCache call (symcache_lookup.py) gives what `SymCache.lookup` gives,
    entry for entry, at every byte of Lua's interpreter loop (inline chains, many lines);
    so does its fallback through the public call."""
    from proftui.collectors.symbols.symcache_lookup import Entry, SymCacheLookup

    from tests.conftest import build_lua

    module = Symbolizer(use_cache=False).module(str(build_lua(["-O2", "-g"])))
    loop = next(f for f in module.functions if f.name == "luaV_execute")
    module.location(loop.start)  # opens the SymCache
    direct = module._symcache_lookup
    assert direct is not None and direct._lib is not None, "symbolic's C interface changed"
    public = SymCacheLookup(direct._cache)
    public._lib = None
    load = module.segments[0][1]
    inlined = 0
    for address in range(loop.start - load, loop.start - load + loop.size):
        want = tuple(Entry(e.sym_addr, e.line, e.lang, e.symbol, e.full_path)
                     for e in direct._cache.lookup(address))
        assert direct.lookup(address) == want == public.lookup(address), hex(address)
        inlined += len(want) > 1
    assert inlined > 100, "no inline chains: the comparison saw too little"
