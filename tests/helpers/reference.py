"""Readers of the reference tools' output, shared by the real-program tests and benchmarks.

Each returns self shares per function name (percent of the run), normalised
the same way for proftui and the reference, so tables compare like with like.
"""

from __future__ import annotations

import bisect
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile

_CLONE = re.compile(r"(\.(isra|constprop|part|cold|lto_priv)\.\d+)+$| \[clone [^]]*\]$")


def normal_name(name: str) -> str:
    """A function's name without GCC clone suffixes, as both tools are compared.

    glibc's memcpy and memmove variants are one function at one address
    (memmove-vec-unaligned-erms.S) with both names; perf and proftui pick
    different names of the alias, so both become the memmove name.
    """
    name = name.replace("__memcpy_", "__memmove_")
    while True:
        shorter = _CLONE.sub("", name)
        if shorter == name:
            return name
        name = shorter


def perf_user_shares(perf_data: Path, comm: str, window: tuple[float, float] | None = None,
                     runtime_library: str = "") -> dict[str, float]:
    """Self share per user-space function, kernel samples charged to the user caller;
    `window`: only the samples taken between these Unix times (perf record -k realtime).
    `runtime_library` (a run under proftui's sampler): samples in that library and in the
    signal return trampoline are the sampler's own cost, which no profiler sees of itself;
    they are left out and the rest is shared out of 100, as proftui's profile is."""
    fields = "ip,sym,dso" if window is None else "time,ip,sym,dso"
    script = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "--comm", comm, "-F", fields,
         "--no-inline"], capture_output=True, text=True, timeout=300)
    assert script.returncode == 0, script.stderr
    counts: Counter[str] = Counter()
    total = 0
    for block in script.stdout.split("\n\n"):
        frames = [line.strip() for line in block.splitlines() if line.strip()]
        if window is not None and frames:
            when = float(frames.pop(0).rstrip(":"))
            if not window[0] <= when < window[1]:
                continue
        if not frames:
            continue
        total += 1
        for frame in frames:  # leaf first: skip kernel frames
            match = re.match(r"[0-9a-f]+ (.+?)(?:\+0x[0-9a-f]+)? \((.*)\)$", frame)
            if match is None or "kernel" in match[2] or match[2].startswith("[k"):
                continue
            if runtime_library and in_runtime(match[1], match[2], runtime_library):
                total -= 1
            else:
                counts[normal_name(match[1])] += 1
            break
    assert total > 0, "perf recorded no samples of the target"
    return {name: 100.0 * n / total for name, n in counts.items()}


HOOK_ROW = "[instrumentation]"


def perf_program_shares(perf_data: Path, binary: Path,
                        hook_library: str = "") -> dict[str, float]:
    """perf_user_shares of an instrumented binary's run (perf record -g), without the
    hooks' cost: samples in __cyg_profile_func_*, their PLT stubs and on the instruction
    a hook call returns to (collectors/instrument/hook_calls.py) are left out and the
    rest is shared out of 100, as proftui_program_shares does for proftui's profile.
    With `hook_library` (a run under proftui's hooks), samples in that library and in
    the signal return trampoline (its clock's ticks) are hook cost too."""
    from proftui.collectors.instrument.hook_calls import HOOK_NAMES, HookCalls
    from proftui.collectors.symbols.elf import ElfFile

    with ElfFile(binary) as elf:
        symtab = elf.section(".symtab") or elf.section(".dynsym")
        assert symtab is not None
        starts = {name: value for value, _size, _bind, name in elf.function_symbols(symtab)}
    calls = HookCalls()
    script = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "--comm", binary.name[:15], "-F",
         "ip,sym,symoff,dso", "--no-inline"], capture_output=True, text=True, timeout=300)
    assert script.returncode == 0, script.stderr
    counts: Counter[str] = Counter()
    for block in script.stdout.split("\n\n"):
        for frame in (line.strip() for line in block.splitlines() if line.strip()):
            match = re.match(r"[0-9a-f]+ (.+?)(?:\+0x([0-9a-f]+))? \((.*)\)$", frame)
            if match is None or "kernel" in match[3] or match[3].startswith("[k"):
                continue  # leaf first: kernel frames go to the user code that entered it
            name, offset, dso = match[1], int(match[2] or "0", 16), match[3]
            hook = name.split("@", 1)[0] in HOOK_NAMES or (
                dso == str(binary) and name in starts and
                calls.at_hook_call(str(binary), starts[name] + offset)) or (
                bool(hook_library) and in_runtime(name, dso, hook_library))
            counts["" if hook else normal_name(name)] += 1
            break
    hooks = counts.pop("", 0)
    total = sum(counts.values())
    assert total > hooks / 20, f"perf saw {total} samples of the program, {hooks} in hooks"
    return {name: 100.0 * n / total for name, n in counts.items()}


def perf_runtime_share(perf_data: Path, comm: str, library: str) -> float:
    """Percent of a run's user samples (kernel ones charged to the user code that entered
    it) in the runtime library `library` and the signal return trampoline (its clock's
    ticks): perf's view of the hooks' own cost in a run under proftui."""
    return perf_leaf_share(perf_data, comm,
                           lambda symbol, dso: in_runtime(symbol, dso, library))


def in_runtime(symbol: str, dso: str, library: str) -> bool:
    """Whether a perf frame is a preloaded runtime's own cost: in `library`, or in the
    signal return trampoline its clock's ticks go through."""
    return dso == library or symbol == "__restore_rt"


def perf_leaf_share(perf_data: Path, comm: str, inside: Callable[[str, str], bool]) -> float:
    """Percent of a run's user samples whose innermost user frame is `inside(symbol,
    dso)` (kernel frames skipped: a kernel sample counts for the user code that entered
    the kernel)."""
    script = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "--comm", comm, "-F", "ip,sym,dso",
         "--no-inline"], capture_output=True, text=True, timeout=300)
    assert script.returncode == 0, script.stderr
    total = found = 0
    for block in script.stdout.split("\n\n"):
        for frame in (line.strip() for line in block.splitlines() if line.strip()):
            match = re.match(r"[0-9a-f]+ (.+?)(?:\+0x[0-9a-f]+)? \((.*)\)$", frame)
            if match is None or "kernel" in match[2] or match[2].startswith("[k"):
                continue
            total += 1
            found += inside(match[1], match[2])
            break
    assert total > 0, "perf recorded no samples of the target"
    return 100.0 * found / total


def hook_file_profile(run_dir: Path) -> Profile:
    """The profile of the one hook run file in `run_dir` (a run under LD_PRELOAD of the
    hook runtime, no front end), read as the collector reads it."""
    from proftui.collectors.instrument.hook_profile import (
        HookSymbols,
        add_hook_data,
        merge_parts,
        new_profile,
    )
    from proftui.collectors.model.profile import ProfileMeta
    from proftui.collectors.runtime.wire import RuntimeFile
    from proftui.collectors.runtime.wire_hook import decode_hook

    path = next(run_dir.glob("hook.*.ptw"))
    file = RuntimeFile(path)
    try:
        decoded = decode_hook(file, path.name)
        profile = new_profile(ProfileMeta(mode="instrument"), "cpu")
        add_hook_data(profile, decoded, HookSymbols(), {})
        merge_parts(profile)
    finally:
        file.close()
    return profile


def proftui_program_shares(profile: Profile) -> dict[str, float]:
    """proftui_symbol_shares without the [instrumentation] rows, out of 100."""
    shares = proftui_symbol_shares(profile)
    shares.pop(HOOK_ROW, None)
    total = sum(shares.values())
    return {name: 100.0 * v / total for name, v in shares.items()}


def proftui_symbol_shares(profile: Profile,
                          naming: Callable[[str], str] = normal_name) -> dict[str, float]:
    """Self share per function (named by `naming`), an inlined frame's cost going to the
    function holding it."""
    counts: Counter[str] = Counter()
    for node in profile.tree.nodes():
        if not node.self_cost[0]:
            continue
        holder = node
        while profile.frames[holder.frame_id].inlined and holder.parent is not None:
            holder = holder.parent
        counts[naming(profile.frames[holder.frame_id].function)] += node.self_cost[0]
    whole = profile.tree.root.total_cost[0]
    return {name: 100.0 * n / whole for name, n in counts.items()}


def perf_allowed(tmp_path: Path) -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "record", "-q", "-o", str(tmp_path / "probe.data"), "--",
                            "true"], capture_output=True)
    return probe.returncode == 0


def fixture_cpu_ns(report: Path) -> dict[str, int]:
    """CPU ns per function that a fixture measured on itself ("name ns" lines, from its
    thread's CPU clock): the same-run truth for smp_work.c and diff_work.c."""
    return {name: int(ns) for name, ns in
            (line.split() for line in report.read_text().splitlines())}


def fixture_cpu_shares(report: Path) -> dict[str, float]:
    """fixture_cpu_ns as percent of the functions listed."""
    spent = fixture_cpu_ns(report)
    total = sum(spent.values())
    return {name: 100.0 * ns / total for name, ns in spent.items()}


def addr2line_innermost(binary: Path, addresses: list[int]) -> dict[int, tuple[str, int]]:
    """address -> innermost (file, line) by `addr2line -i` (its first line per address);
    addresses it knows no line of ("??:0") are left out."""
    if shutil.which("addr2line") is None:
        pytest.skip("addr2line (binutils) is not installed")
    out = subprocess.run(["addr2line", "-i", "-a", "-e", str(binary),
                          *[f"0x{a:x}" for a in addresses]],
                         check=True, capture_output=True, text=True).stdout
    found: dict[int, tuple[str, int]] = {}
    current: int | None = None
    for row in out.splitlines():
        if row.startswith("0x"):
            current = int(row, 16)
            continue
        match = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", row)
        if current is not None and current not in found and match and match[2] != "0":
            found[current] = (match[1], int(match[2]))
    return found


def addr2line_lines(binary: Path, addresses: list[int]) -> dict[int, tuple[str, int | None]]:
    """address -> innermost (file basename, line) per `addr2line -i` (the reference);
    ("", None) where it knows no line ("??:0")."""
    known = addr2line_innermost(binary, addresses)
    return {a: (Path(known[a][0]).name, known[a][1]) if a in known else ("", None)
            for a in addresses}


def decoded_lines(binary: Path, addresses: list[int]) -> dict[int, tuple[str, int]]:
    """address -> (file basename, line) of the DWARF line-table row in effect there, per
    `objdump --dwarf=decodedline` (the last row at the greatest address <= it): a second
    reference where addr2line names the compile unit's own file for the rows of an
    #included one (binutils 2.40, Lua's onelua.c build: onelua.c:24 for lzio.c:24,
    luaZ_fill's first line)."""
    out = subprocess.run(["objdump", "--dwarf=decodedline", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    rows: dict[int, tuple[str, int]] = {}  # the last row at each address wins
    for row in out.splitlines():
        found = re.match(r"(\S+)\s+(\d+)\s+0x([0-9a-f]+)\b", row)
        if found:
            rows[int(found[3], 16)] = (Path(found[1]).name, int(found[2]))
    starts = sorted(rows)
    result = {}
    for address in addresses:
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0:
            result[address] = rows[starts[i]]
    return result


def gprof_line_seconds(binary: Path, gmon: Path) -> tuple[dict[tuple[str, int], float], str]:
    """(seconds per (file basename, line) from GNU gprof's line-by-line flat profile
    (`gprof -b -l -p`) of `gmon`, gprof's text): a line may have several rows."""
    out = subprocess.run(["gprof", "-b", "-l", "-p", str(binary), str(gmon)],
                         capture_output=True, text=True, check=True).stdout
    seconds: dict[tuple[str, int], float] = {}
    for row in out.splitlines():
        found = re.search(r"\((\S+):(\d+) @ [0-9a-f]+\)$", row)
        if found:
            key = (Path(found[1]).name, int(found[2]))
            seconds[key] = seconds.get(key, 0.0) + float(row.split()[2])
    return seconds, out


def gprof_l_of_a_run(argv: list[str]) -> tuple[Profile, dict[tuple[str, int], float], str]:
    """`argv` (built -pg) run to its end in gprof mode: (the profile, gprof_line_seconds of
    the same gmon.out, gprof's text)."""
    from proftui.collectors.base import CollectorOptions
    from proftui.collectors.gprof.collector import GprofCollector

    collector = GprofCollector(argv, CollectorOptions(output="log"))
    collector.start()
    try:
        profile = collector.wait()
        seconds, out = gprof_line_seconds(Path(argv[0]),
                                          next(collector.run_dir.path.glob("gmon.*")))
    finally:
        collector.stop()
    return profile, seconds, out


def proftui_line_seconds(profile: Profile) -> dict[tuple[str, int], float]:
    """Seconds per (file basename, line) of a gprof-mode profile's line costs (ns)."""
    seconds: dict[tuple[str, int], float] = {}
    for (file, line), cost in profile.line_costs.items():
        key = (Path(file).name, line)
        seconds[key] = seconds.get(key, 0.0) + cost[0] / 1e9
    return seconds
