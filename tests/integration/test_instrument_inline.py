"""Instrument mode on -O2 code: gcc calls the hooks of inlined functions from
their container's frame with the container's call site.  The calling-context
tree must keep the container (inlined frames are marked, never popped), also
with recursion, longjmp, exceptions, threads and exit hooks gcc tail-calls.
Parents and inclusive shares are compared with uftrace on the same binary
where it is installed."""

from __future__ import annotations

import re
import statistics
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile

from tests.conftest import LUA_SCRIPTS, build_lua
from tests.helpers.instrument import FLAGS, build, calls_by_path, record
from tests.helpers.uftrace import (
    Shares,
    from_profile,
    shares,
    uftrace_reason,
    uftrace_tree,
)

ROOT = Path(__file__).resolve().parents[2]
LUA_SCRIPT = LUA_SCRIPTS / "instrument_work.lua"


def _inlined(profile: Profile) -> set[str]:
    return {profile.frames[i].function for i in range(len(profile.frames))
            if profile.frames[i].inlined}


def _uftrace_shares(argv: list[str | Path], tmp_path: Path) -> Shares:
    reason = uftrace_reason()
    if reason:
        pytest.skip(reason)
    return shares(uftrace_tree(argv, tmp_path))


def _assert_parents_agree(ours: Shares, ref: Shares, names: list[str]) -> None:
    for name in names:
        assert ours.parents.get(name) == ref.parents.get(name), name


def test_inlined_function_keeps_its_container(tmp_path: Path) -> None:
    binary = build("ins_inline.c")
    profile, output = record([binary])
    assert output.strip().lstrip("-").isdigit()
    assert calls_by_path(profile) == {
        ("main",): 1, ("main", "mid"): 2000,
        ("main", "mid", "leaf"): 2000, ("main", "mid", "work"): 2000,
    }
    assert _inlined(profile) == {"leaf"}
    ours = shares(from_profile(profile))
    assert ours.incl_pct("mid") > 95 and ours.self_pct("leaf") < 1
    ref = _uftrace_shares([binary], tmp_path)
    _assert_parents_agree(ours, ref, ["mid", "leaf", "work"])
    # Wall time of a 0.2 s program on a shared machine: beside two busy loops, single
    # runs of each tool once differed by 16 points (work: 38% vs 54%).  The median of
    # three runs of each is compared.
    mine = [ours, *(shares(from_profile(record([binary])[0])) for _ in range(2))]
    theirs = [ref]
    for i in range(2):
        (tmp_path / f"again{i}").mkdir()
        theirs.append(_uftrace_shares([binary], tmp_path / f"again{i}"))
    for name in ("mid", "work"):
        assert statistics.median(s.incl_pct(name) for s in mine) == pytest.approx(
            statistics.median(s.incl_pct(name) for s in theirs), abs=15), name


def test_tree_pane_marks_inlined_frames() -> None:
    from proftui.tui.panes.tree import CallTreeView

    profile, _ = record([build("ins_inline.c")])
    # By name: a tick in the hooks while main was current adds an [instrumentation] child
    main = next(c for c in profile.tree.root.children.values()
                if profile.frames[c.frame_id].function == "main")
    mid = next(c for c in main.children.values() if profile.frames[c.frame_id].function == "mid")
    view = CallTreeView()
    view.view_profile = profile
    labels = {profile.frames[c.frame_id].function: view.label_for(c, main.total_cost[0]).plain
              for c in mid.children.values()}
    assert "[inlined]" in labels["leaf"] and "[inlined]" not in labels["work"]


def test_inlined_recursion_matches_the_fixtures_own_counts(tmp_path: Path) -> None:
    binary = build("ins_inline_rec.c")
    profile, output = record([binary])
    per_depth = {int(d): int(c) for d, c in re.findall(r"depth (\d+) calls (\d+)", output)}
    assert len(per_depth) == 17
    paths = calls_by_path(profile)
    for depth, calls in per_depth.items():
        assert paths.get(("main", "run", *["fib"] * (depth + 1)), 0) == calls, depth
    assert sum(per_depth.values()) == sum(c for p, c in paths.items() if p[-1] == "fib")
    assert "fib" in _inlined(profile)  # gcc -O2 inlines levels of fib into run()
    ours = shares(from_profile(profile))
    ref = _uftrace_shares([binary], tmp_path)
    _assert_parents_agree(ours, ref, ["run", "fib"])
    # A cold first run pays the hook's slow path and the run file's page faults for every
    # new calling context at start-up, outside run(): up to ~19 points seen on a fresh clone.
    assert ours.incl_pct("run") == pytest.approx(ref.incl_pct("run"), abs=20)


def test_cxx_templates_inlining_and_exceptions(tmp_path: Path) -> None:
    binary = build("ins_inline_exc.cpp", ["-lstdc++"], compiler="g++")
    profile, output = record([binary])
    assert "thrown 1000" in output
    paths = calls_by_path(profile)
    reduce_name = next(p[1] for p in paths if len(p) == 2 and "reduce" in p[1])
    assert paths[("main", reduce_name, "Acc<int>::add(int)")] == 60000
    assert paths[("main", "catcher(int)", "thrower(int)", "checked(int)")] == 3000
    assert paths[("main", "catcher(int)", "after_catch(int)")] == 1000
    assert [p for p in paths if p[-1] == "after_catch(int)"] == [
        ("main", "catcher(int)", "after_catch(int)")]
    assert {"Acc<int>::add(int)", "checked(int)"} <= _inlined(profile)
    assert "thrower(int)" not in _inlined(profile)
    ours = shares(from_profile(profile, simple=True))
    ref = _uftrace_shares([binary], tmp_path)
    _assert_parents_agree(ours, ref, ["reduce", "Acc::add", "catcher", "thrower", "checked",
                                      "after_catch"])


@pytest.mark.parametrize("count_only", [False, True])
def test_longjmp_out_of_an_inlined_function(count_only: bool) -> None:
    profile, output = record([build("ins_inline_jmp.c")], count_only=count_only)
    assert output == "inline jumps 500\n"
    assert calls_by_path(profile) == {
        ("main",): 1, ("main", "container"): 1000,
        ("main", "container", "inl"): 1000, ("main", "container", "inl", "jumper"): 1000,
        ("main", "container", "after"): 500, ("main", "landed"): 500,
    }
    assert _inlined(profile) == {"inl"}


def test_threads_with_inlined_functions() -> None:
    profile, output = record([build("ins_inline_threads.c")])
    assert output == "threads 4\n"
    workers = [label for label in profile.parts
               if ("thread_main",) in calls_by_path(profile, label)]
    assert len(workers) == 4
    for label in workers:
        assert calls_by_path(profile, label) == {
            ("thread_main",): 1, ("thread_main", "mid"): 300,
            ("thread_main", "mid", "leaf"): 300, ("thread_main", "mid", "work"): 300,
        }


def test_exit_hooks_gcc_tail_calls_do_not_pop_outer_calls() -> None:
    binary = build("ins_tailexit.c")
    listing = subprocess.run(["objdump", "-d", str(binary)], capture_output=True, text=True)
    if listing.returncode == 0:  # the case under test: nest() leaves by jmp to the exit hook
        assert re.search(r"jmp\s+\S+ <__cyg_profile_func_exit@plt>", listing.stdout)
    profile, output = record([binary])
    assert output == "tail exits 100\n"
    assert calls_by_path(profile) == {
        ("main",): 1, ("main", "after"): 100,
        ("main", "nest"): 100, ("main", "nest", "nest"): 100,
        ("main", "nest", "nest", "nest"): 100, ("main", "nest", "nest", "nest", "nest"): 100,
        ("main", "nest", "tail_work"): 100, ("main", "nest", "nest", "tail_work"): 100,
        ("main", "nest", "nest", "nest", "tail_work"): 100,
    }


# ---- a real program: the Lua interpreter -------------------------------------------


def _lua_binary() -> Path:
    """onelua.c built with the instrument flags (skips when the Lua source is absent)."""
    return build_lua([f for f in FLAGS if f not in ("-O2", "-g")])


def _lua_shares(argv: list[str | Path]) -> tuple[Profile, Shares, str]:
    profile, output = record(argv)
    return profile, shares(from_profile(profile)), output


def test_lua_vm_loop_keeps_its_inclusive_time_with_errors() -> None:
    """pcall/error longjmp through inlined frames: the VM loop still holds the run."""
    profile, ours, output = _lua_shares([_lua_binary(), LUA_SCRIPT, "150", "errors"])
    assert output.startswith("lua total")
    roots = [profile.frames[c.frame_id].function for c in profile.tree.root.children.values()]
    assert roots == ["main"]
    assert ours.incl_pct("luaV_execute") >= 90
    assert ours.self_pct("ccall") < 5  # not the 46-48 % of popping its inlined containers
    assert "ccall" in ours.inlined


def test_lua_call_tree_agrees_with_uftrace(tmp_path: Path) -> None:
    binary = _lua_binary()
    argv: list[str | Path] = [binary, LUA_SCRIPT, "60"]  # no errors: uftrace loses longjmp
    _, ours, _ = _lua_shares(argv)
    ref = _uftrace_shares(argv, tmp_path)
    for name in ("luaV_execute", "ccall", "sort"):
        print(f"{name}: incl {ours.incl_pct(name):.1f}% self {ours.self_pct(name):.1f}% "
              f"(uftrace incl {ref.incl_pct(name):.1f}% self {ref.self_pct(name):.1f}%)")
    # Loading the script is ~0.1 ms of a ~15 ms run (timed with os.clock in an unprofiled
    # build): about 1 % here, 0.3 % under uftrace.  The parser meets thousands of new calling
    # contexts; the runtime's set-up of each is left out of every time, else it showed 9 %
    # (and luaV_execute 89 %: CI failed on that).
    print(f"luaL_loadfilex: incl {ours.incl_pct('luaL_loadfilex'):.1f}% "
          f"(uftrace {ref.incl_pct('luaL_loadfilex'):.1f}%)")
    assert ours.incl_pct("luaL_loadfilex") <= 5
    assert ours.incl_pct("luaV_execute") >= 94
    assert ours.self_pct("ccall") < 5 and ref.self_pct("ccall") < 5
    assert ours.incl_pct("luaV_execute") == pytest.approx(ref.incl_pct("luaV_execute"), abs=5)
    heavy = [name for name in ref.incl if ref.incl_pct(name) >= 20]
    assert {"main", "luaV_execute", "ccall", "docall", "sort"} <= set(heavy)
    _assert_parents_agree(ours, ref, heavy)
