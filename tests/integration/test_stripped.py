"""Stripped binaries: code no symbol names is grouped by its .eh_frame FDE, one row per
function named `prog+0xSTART` (collectors/symbols/stripped.py), where it was one row
per sampled instruction (`prog+0x122b`, `prog+0x1218`, ... for one function).

att_static.c is built once (`-O2`, no -g: inlined callees would be frames of their own
in the unstripped build only) and `strip`ped into a copy: the code, and so every
address, is the same in both.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.formats.importers.gperftools import load_gperftools, parse
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile
from proftui.collectors.symbols.elf import ElfFile

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler
from tests.helpers.cpu_records import libprofiler

FLAGS = ["-O2"]
FIXTURE_FUNCTIONS = ("main", "st_outer", "st_middle", "st_hot", "st_warm")


def builds(tmp_path: Path) -> tuple[Path, Path]:
    """(the unstripped build, its `strip`ped copy)."""
    if shutil.which("strip") is None:
        pytest.skip("strip (binutils) is not installed")
    binary = build_fixture("att_static.c", FLAGS)
    stripped = tmp_path / "att_stripped"
    subprocess.run(["strip", "-o", str(stripped), str(binary)], check=True, timeout=60)
    with ElfFile(stripped) as elf:
        assert elf.section(".symtab") is None and elf.section(".eh_frame") is not None
    return binary, stripped


def functions_of(binary: Path) -> dict[int, tuple[str, int]]:
    """Link-time start -> (name, size) of the functions of `binary`'s .symtab."""
    with ElfFile(binary) as elf:
        section = elf.section(".symtab")
        assert section is not None
        return {value: (name, size) for value, size, _bind, name in elf.function_symbols(section)
                if size > 0}


def rows(profile: Profile, module: Path, starts: dict[int, tuple[str, int]]
         ) -> dict[str, tuple[float, float]]:
    """Flat (self, total) samples per function: rows of `module` keyed by the unstripped
    build's name of the function starting at their address, the others by their name."""
    out: dict[str, tuple[float, float]] = {}
    for entry in flat_profile(profile):
        frame = entry.frame
        key = frame.function
        if frame.module == str(module):
            assert frame.address in starts, f"{key}: not at a function's start"
            key = starts[frame.address][0]
        assert key not in out, f"two rows for {key}"
        out[key] = (entry.self_cost[0], entry.total_cost[0])
    return out


def test_stripped_rows_are_functions_with_their_own_samples(tmp_path: Path) -> None:
    """Sampler mode: every row of the stripped program starts a function of the
    unstripped build, is named prog+0xSTART, and holds exactly the samples whose
    instruction lies in that function (its address costs, same run)."""
    binary, stripped = builds(tmp_path)
    starts = functions_of(binary)
    profile, _ = run_sampler(stripped, "0.6", frequency_hz=1000)
    by_function = rows(profile, stripped, starts)
    assert {"st_hot", "st_warm", "st_outer"} <= by_function.keys(), by_function
    for entry in flat_profile(profile):
        if entry.frame.module == str(stripped):
            assert entry.frame.function == f"att_stripped+0x{entry.frame.address:x}"
    for start, (name, size) in starts.items():
        exact = sum(cost[0] for (module, vaddr), cost in profile.address_costs.items()
                    if module == str(stripped) and start <= vaddr < start + size)
        assert by_function.get(name, (0.0, 0.0))[0] == exact, name
    assert any("eh_frame" in w and "att_stripped" in w for w in profile.meta.warnings)


def test_stripped_and_unstripped_sampler_shares_agree(tmp_path: Path) -> None:
    """The two builds profiled in the same mode: each fixture function's share of the
    samples, self and total, within 5 standard errors of the difference of two
    binomial proportions (CPU-time samples: a loaded machine changes the count, not
    the shares)."""
    binary, stripped = builds(tmp_path)
    starts = functions_of(binary)
    shares = []
    for build in (binary, stripped):
        profile, _ = run_sampler(build, "0.8", frequency_hz=1000)
        whole = profile.total(0)
        assert whole >= 200, f"too few samples to compare: {whole}"
        found = rows(profile, build, starts)
        shares.append((whole, {name: (found.get(name, (0.0, 0.0))[0] / whole,
                                      found.get(name, (0.0, 0.0))[1] / whole)
                               for name in FIXTURE_FUNCTIONS}))
    (n1, plain), (n2, bare) = shares
    for name in FIXTURE_FUNCTIONS:
        for kind in (0, 1):
            p = (plain[name][kind] * n1 + bare[name][kind] * n2) / (n1 + n2)
            se = math.sqrt(max(p * (1 - p), 0.25 / (n1 + n2)) * (1 / n1 + 1 / n2))
            assert abs(plain[name][kind] - bare[name][kind]) <= 5 * se, \
                (name, ("self", "total")[kind], plain[name], bare[name], se)


def test_stripped_profile_equals_unstripped_on_the_same_samples(tmp_path: Path) -> None:
    """One libprofiler (gperftools) CPU profile of the stripped program, opened as
    recorded and with its maps naming the unstripped build: the same samples, so every
    function's self and total samples must be equal, exactly."""
    binary, stripped = builds(tmp_path)
    prof = tmp_path / "cpu.prof"
    env = {"CPUPROFILE": str(prof), "CPUPROFILE_FREQUENCY": "1000",
           "LD_PRELOAD": libprofiler(), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(stripped), "0.6"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.endswith("st done\n"), done.stderr
    if not prof.exists():
        pytest.skip(f"libprofiler wrote no profile: {done.stderr.strip()}")
    data = prof.read_bytes()
    maps = parse(data)[2].encode()
    assert data.endswith(maps) and str(stripped).encode() in maps
    as_unstripped = data[:-len(maps)] + maps.replace(str(stripped).encode(), str(binary).encode())
    starts = functions_of(binary)
    bare = rows(load_gperftools(prof, data), stripped, starts)
    plain = rows(load_gperftools(prof, as_unstripped), binary, starts)
    assert bare == plain
    assert bare["st_hot"][0] > 0.5 * sum(s for s, _ in bare.values()), bare


def test_minidebuginfo_names_stripped_functions(tmp_path: Path) -> None:
    """.gnu_debugdata (MiniDebugInfo, as Fedora ships): an xz-compressed ELF holding the
    .symtab; its names win over FDE starts."""
    if shutil.which("objcopy") is None or shutil.which("xz") is None:
        pytest.skip("objcopy or xz is not installed")
    binary, stripped = builds(tmp_path)
    symbols = tmp_path / "mini"
    for argv in (["objcopy", "--only-keep-debug", str(binary), str(symbols)],
                 ["strip", "--strip-debug", "--remove-section=.comment", str(symbols)],
                 ["xz", "-k", str(symbols)],
                 ["objcopy", f"--add-section=.gnu_debugdata={symbols}.xz", str(stripped)]):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    from proftui.collectors.symbols.symbolizer import Symbolizer

    symbolizer = Symbolizer(use_cache=False)
    module = symbolizer.module(str(stripped))
    for start, (name, _size) in functions_of(binary).items():
        if name in FIXTURE_FUNCTIONS:
            found = module.function_at(start + 1)
            assert found is not None and found.name == name, (name, found)
    assert not any(w.startswith("stripped:") for w in symbolizer.warnings), symbolizer.warnings
