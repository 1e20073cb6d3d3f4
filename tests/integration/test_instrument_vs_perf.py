"""Instrument mode's sampled time against perf, and its call counts against uftrace, on
the same binaries: the Lua interpreter (../shared/programs/lua) and a C++ fixture.

The reference for time is `perf record` of the same instrumented binary run plainly
(glibc's empty hooks), in the same test.  Both sides leave out the hooks' own cost the
same way (tests/helpers/reference.py: the hook functions, their PLT stubs, and the hook call
instructions and return addresses samplers charge a call's cost to), then share the
program's samples out of 100.  Runs alternate between the two tools and each side's
median share is compared, so a machine whose load changes meanwhile weighs on both.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import statistics
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile

from tests.conftest import LUA_SCRIPTS, build_fixture, build_lua
from tests.helpers import reference
from tests.helpers.fleet import CLI
from tests.helpers.instrument import build, calls_by_path, record
from tests.helpers.uftrace import Node, simple_name, uftrace_reason, uftrace_tree

HZ = 4000  # both tools: ~2,500 program samples per Lua run
ROUNDS = 5  # runs per tool; medians compared
TOP = 10
POINTS = 3.0
# Lua makes a call every ~4 ns; hooks that count it (~5 ns more a call than glibc's empty
# ones) take ~75 % of the run, and the program beside them runs differently: a memory
# stall a few instructions after a hook call overlaps the longer hook and leaves the
# function (luaD_precall: 6.0-6.3 % under perf with empty hooks, 2.1-3.0 % in proftui
# and in perf watching proftui's run), a slower run lets memory-bound code
# (internshrstr, luaS_remove) weigh more, and loads right after the hooks' stores may
# wait on them when their addresses alias (lua_settop: 2.5 % under the empty hooks,
# 2.2-10.5 % with proftui's, by run, in both proftui's and perf's view of the same
# run).  A hook of the same cost that touches no memory at all (24 dependent adds)
# already moves such functions by about 3 points, and how far depends on the CPU (one
# CI machine ran sort_comp at 16 % beside the hooks against 7.5 % plainly).  So on Lua
# the attribution is held to 3 points of perf watching the same runs, and the
# agreement with plain runs to LUA_POINTS where perf does not see the shift as well.
LUA_POINTS = 8.0
LUA_SCRIPT = LUA_SCRIPTS / "intern_sort.lua"
# Lua with a fixed string-hash seed: identical runs under any tool (uftrace's counts).
LUA_FLAGS = ["-finstrument-functions", "-pthread", "-Dluai_makeseed()=0u"]
# As C++ projects instrument their own code: the STL's templates stay uninstrumented.
CXX_FLAGS = ["-finstrument-functions-exclude-file-list=/usr/include", "-lstdc++"]


def perf_reason(tmp_path: Path) -> str | None:
    """Why perf cannot sample a process here, or None."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    probe = subprocess.run(["perf", "record", "-q", "-F", str(HZ), "-o",
                            str(tmp_path / "probe.data"), "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        try:
            paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
        except OSError:
            paranoid = "?"
        return (f"perf record cannot sample here (kernel.perf_event_paranoid={paranoid}): "
                f"{probe.stderr.strip()[:200]}")
    return None


def _skip_without_perf(tmp_path: Path) -> None:
    reason = perf_reason(tmp_path)
    if reason:
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    names = set().union(*runs)
    return {name: statistics.median(run.get(name, 0.0) for run in runs) for name in names}


def _keyed(shares: dict[str, float], key: Callable[[str], str]) -> dict[str, float]:
    out: Counter[str] = Counter()
    for name, share in shares.items():
        out[key(name)] += share
    return dict(out)


def _recorded_under_perf(argv: list[str | Path], tmp_path: Path, i: int
                         ) -> tuple[Profile, dict[str, float]]:
    """`proftui record --mode instrument` of `argv` as a user runs it, perf watching the
    same execution (perf follows the target proftui starts): proftui's saved profile,
    and perf's program shares of that run (the hook library's cost left out)."""
    from proftui.collectors.model.storage import load
    from proftui.collectors.runtime.libraries import runtime_library_path

    saved, data = tmp_path / f"ours{i}.proftui", tmp_path / f"ours{i}.data"
    subprocess.run(["perf", "record", "-q", "-g", "-F", str(HZ), "-o", str(data), "--",
                    *CLI, "record", "--mode", "instrument", "-F", str(HZ), "-o", str(saved),
                    *map(str, argv)], check=True, capture_output=True, timeout=300)
    hook = runtime_library_path("proftui_hook")
    return load(saved), reference.perf_program_shares(data, Path(argv[0]), hook_library=hook)


def _agreement(argv: list[str | Path], tmp_path: Path,
               key: Callable[[str], str] = lambda name: name,
               plain: Path | None = None) -> tuple[float, float]:
    """Worst differences, in points, over perf's top functions (medians of ROUNDS
    alternating runs of each tool), and prints the tables: (against perf watching the
    same executions, against perf on other runs).

    The second: perf on the same binary with glibc's empty hooks; with `plain` (the
    program built without -finstrument-functions), a function also agrees when it is
    within POINTS of perf's share there: glibc's empty hooks are not free, and a
    function that makes many instrumented inline calls carries their calls' cost in the
    instrumented binary (ins_cxx_work's make_keys, 8 M inlined mix() calls: 4.1% with
    empty hooks, 0.9% without instrumentation, 0.9% by proftui, which takes hooks out).
    It also agrees where perf's view of proftui's own runs shows the same share: the
    hooks change how the program runs, the more so on a busy machine (multiply: 15.3 %
    by proftui, 15.4 % by perf watching the same runs, 13.9 % in perf's own; up to
    16.8 % by proftui while the whole suite ran beside it, 13.1 % in perf's own runs)."""
    binary = Path(argv[0])
    perf_runs: list[dict[str, float]] = []
    plain_runs: list[dict[str, float]] = []
    same_runs: list[dict[str, float]] = []
    our_runs: list[dict[str, float]] = []
    samples = []
    for i in range(ROUNDS):
        data = tmp_path / f"perf{i}.data"
        subprocess.run(["perf", "record", "-q", "-g", "-F", str(HZ), "-o", str(data), "--",
                        *map(str, argv)], check=True, capture_output=True, timeout=300)
        perf_runs.append(_keyed(reference.perf_program_shares(data, binary), key))
        if plain is not None:
            data = tmp_path / f"plain{i}.data"
            subprocess.run(["perf", "record", "-q", "-g", "-F", str(HZ), "-o", str(data),
                            "--", str(plain), *map(str, argv[1:])], check=True,
                           capture_output=True, timeout=300)
            plain_runs.append(_keyed(reference.perf_program_shares(data, plain), key))
        profile, seen = _recorded_under_perf(argv, tmp_path, i)
        assert profile.metrics[0].name == "samples"
        samples.append(int(profile.total()))
        our_runs.append(_keyed(reference.proftui_program_shares(profile), key))
        same_runs.append(_keyed(seen, key))
    theirs, ours, same = _medians(perf_runs), _medians(our_runs), _medians(same_runs)
    unhooked = _medians(plain_runs) if plain_runs else {}
    print(f"{binary.name}: proftui samples per run {samples} at {HZ} Hz")
    same_run = _table("proftui against perf on the same executions:", same, ours)
    top = sorted(theirs, key=theirs.__getitem__, reverse=True)[:TOP]
    print("proftui against perf's own runs (empty hooks; plain: no instrumentation):")
    print(f"{'function':<40} {'perf':>7} {'proftui':>8} {'diff':>7} {'plain':>7} "
          f"{'same run':>8}")
    worst = 0.0
    for name in top:
        diff = ours.get(name, 0.0) - theirs[name]
        plain_diff = (ours.get(name, 0.0) - unhooked[name]) if name in unhooked else diff
        seen_diff = ours.get(name, 0.0) - same.get(name, 0.0)
        worst = max(worst, min(abs(diff), abs(plain_diff), abs(seen_diff)))
        print(f"{name[:40]:<40} {theirs[name]:7.2f} {ours.get(name, 0.0):8.2f} {diff:+7.2f}"
              f" {unhooked.get(name, float('nan')):7.2f} {same.get(name, 0.0):8.2f}")
    assert min(samples) > 1000, "too few samples to compare shares"
    return max(map(abs, same_run.values())), worst


@contextlib.contextmanager
def _no_aslr() -> Iterator[None]:
    """Programs started meanwhile get the same addresses every run (personality
    ADDR_NO_RANDOMIZE, inherited across fork and exec): Lua hashes some table keys
    by address, so its call counts then repeat exactly."""
    libc = ctypes.CDLL(None, use_errno=True)
    old = libc.personality(0xFFFFFFFF)
    if old < 0 or libc.personality(old | 0x0040000) < 0:
        pytest.skip("cannot turn address randomisation off here (personality refused)")
    try:
        yield
    finally:
        libc.personality(old)


def _hooked_run(lua: Path, run_dir: Path, data: Path) -> tuple[dict[str, float],
                                                                 dict[str, float], str]:
    """One Lua run under proftui's hooks, watched by perf: (proftui's program shares from
    its own file, perf's program shares of the same run, what the pc tables did)."""
    from proftui.collectors.instrument.hook_profile import (
        HookSymbols,
        add_hook_data,
        merge_parts,
        new_profile,
    )
    from proftui.collectors.model.profile import ProfileMeta
    from proftui.collectors.runtime.libraries import runtime_library_path
    from proftui.collectors.runtime.wire import RuntimeFile
    from proftui.collectors.runtime.wire_hook import decode_hook

    hook = runtime_library_path("proftui_hook")
    run_dir.mkdir(mode=0o700)
    env = {**os.environ, "LD_PRELOAD": hook, "PROFTUI_DIR": str(run_dir),
           "PROFTUI_FREQUENCY": str(HZ)}
    subprocess.run(["perf", "record", "-q", "-g", "-F", str(HZ), "-o", str(data), "--",
                    str(lua), str(LUA_SCRIPT), "30"], check=True, capture_output=True,
                   env=env, timeout=300)
    theirs = reference.perf_program_shares(data, lua, hook_library=hook)
    path = next(run_dir.glob("hook.*.ptw"))
    file = RuntimeFile(path)
    try:
        decoded = decode_hook(file, path.name)
        profile = new_profile(ProfileMeta(mode="instrument"), "cpu")
        add_hook_data(profile, decoded, HookSymbols(), {})
        merge_parts(profile)
    finally:
        file.close()
    assert profile.total() > 2000, "too few samples to compare shares"
    tables = ", ".join(f"tid {t.tid}: {t.pcs_entries} entries, {t.pcs_dropped} dropped"
                       for t in decoded.threads.values())
    return reference.proftui_program_shares(profile), theirs, f"pc tables {tables}"


def _table(title: str, reference_shares: dict[str, float], ours: dict[str, float],
           explained: dict[str, float] | None = None) -> dict[str, float]:
    """Print perf's top functions beside proftui's; name -> difference in points."""
    top = sorted(reference_shares, key=reference_shares.__getitem__, reverse=True)[:TOP]
    print(title)
    print(f"{'function':<40} {'perf':>7} {'proftui':>8} {'diff':>7}"
          + (f" {'perf/hooks':>10}" if explained is not None else ""))
    diffs = {}
    for name in top:
        diffs[name] = ours.get(name, 0.0) - reference_shares[name]
        extra = f" {explained.get(name, 0.0):10.2f}" if explained is not None else ""
        print(f"{name[:40]:<40} {reference_shares[name]:7.2f} {ours.get(name, 0.0):8.2f} "
              f"{diffs[name]:+7.2f}{extra}")
    return diffs


def test_lua_self_shares_agree_with_perf(tmp_path: Path) -> None:
    """String interning, GC, table.sort and Lua calls in Lua -O2, runs alternating
    between perf on the plain binary (glibc's empty hooks) and perf watching a run under
    proftui's hooks, medians compared.  proftui's own ticks of the hooked runs share the
    program's time as perf's view of those same runs does, within 3 points over perf's
    top 10 (the hooks' cost, and the clock's signal trampoline, left out of both).
    Against the plain runs, perf's top 10 are within LUA_POINTS, or, where the function
    ran differently beside the hooks, perf's view of the hooked runs shows the same
    share (see LUA_POINTS: how much depends on the CPU)."""
    _skip_without_perf(tmp_path)
    lua = build_lua(LUA_FLAGS)
    plain: list[dict[str, float]] = []
    hooked: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    for i in range(ROUNDS):
        data = tmp_path / f"plain{i}.data"
        subprocess.run(["perf", "record", "-q", "-g", "-F", str(HZ), "-o", str(data), "--",
                        str(lua), str(LUA_SCRIPT), "30"], check=True, capture_output=True,
                       timeout=300)
        plain.append(reference.perf_program_shares(data, lua))
        mine, theirs, tables = _hooked_run(lua, tmp_path / f"run{i}", tmp_path / f"hooked{i}.data")
        print(tables)
        ours.append(mine)
        hooked.append(theirs)
    mine, same, other = _medians(ours), _medians(hooked), _medians(plain)
    same_run = _table("proftui against perf on the same (hooked) runs:", same, mine)
    cross = _table("proftui against perf on plain runs:", other, mine, explained=same)
    assert max(map(abs, same_run.values())) <= POINTS
    for name, diff in cross.items():
        seen_by_perf = abs(mine.get(name, 0.0) - same.get(name, 0.0)) <= POINTS
        assert abs(diff) <= LUA_POINTS or seen_by_perf, (
            f"{name}: {diff:+.2f} points from perf's plain runs, and perf's view of the "
            f"hooked runs does not show it")


def test_cxx_self_shares_agree_with_perf(tmp_path: Path) -> None:
    """Templates, inlined functions, exceptions and the STL: perf's top 10 within 3 points
    of perf on the same binary, or on the program built without instrumentation (see
    _agreement; C++ names compared without template arguments and parameters, as perf
    and proftui spell them differently)."""
    _skip_without_perf(tmp_path)
    binary = build("ins_cxx_work.cpp", CXX_FLAGS, compiler="g++")
    plain = build_fixture("ins_cxx_work.cpp", ["-O2", "-g", "-pthread", "-lstdc++"], compiler="g++",
                          output="ins_cxx_work_plain")
    same_run, other_runs = _agreement([binary, "50"], tmp_path, key=simple_name, plain=plain)
    assert same_run <= POINTS and other_runs <= POINTS


def _uftrace_calls(root: Node) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        for kid in node.children.values():
            here = (*path, kid.name)
            out[here] = out.get(here, 0) + kid.calls
            stack.append((kid, here))
    return out


def test_lua_calls_equal_uftraces(tmp_path: Path) -> None:
    """Every calling context's count, exactly, on the same binary and input.  The script
    runs precompiled (Lua's parser keys a table by a heap address, and uftrace's own
    allocations move the heap), without address randomisation, with a fixed seed."""
    reason = uftrace_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    lua = build_lua(LUA_FLAGS)
    chunk = tmp_path / "intern_sort.luac"
    subprocess.run([str(lua), "-e", f"local f = assert(io.open({str(chunk)!r}, 'wb')) "
                    f"f:write(string.dump(assert(loadfile({str(LUA_SCRIPT)!r})), true)) "
                    "f:close()"], check=True, timeout=60)
    argv: list[str | Path] = [lua, chunk, "3"]
    with _no_aslr():
        profile, _ = record(argv)
        theirs = _uftrace_calls(uftrace_tree(argv, tmp_path))
    ours = calls_by_path(profile)
    assert sum(ours.values()) > 1_000_000
    differ = {path: (ours.get(path, 0), theirs.get(path, 0)) for path in set(ours) | set(theirs)
              if ours.get(path, 0) != theirs.get(path, 0)}
    assert not differ, sorted(differ.items())[:10]
    print(f"{len(ours)} calling contexts, {sum(ours.values())} calls: equal")


def test_cxx_fixture_builds_as_instrumented(tmp_path: Path) -> None:
    """The C++ fixture calls the hooks from its own templates (not only from main)."""
    binary = build("ins_cxx_work.cpp", CXX_FLAGS, compiler="g++")
    profile, output = record([binary, "2"])
    assert output.startswith("cxx total")
    names = {simple_name(path[-1]) for path in calls_by_path(profile)}
    assert {"multiply", "Tally::add", "sort_keys", "parse_all"} <= names
