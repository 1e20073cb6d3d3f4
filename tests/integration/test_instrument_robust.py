"""Instrument mode where entry/exit pairing breaks or the process misbehaves:
fork, longjmp, C++ exceptions, dlopen/dlclose, SIGKILL, pause, live reads."""

from __future__ import annotations

import signal
import time

import pytest

from tests.conftest import build_fixture
from tests.helpers.instrument import (
    FLAGS,
    build,
    build_plugin,
    calls_by_path,
    function_calls,
    record,
    start_spin,
    wait_for_ticks,
)


def test_fork_child_records_its_own_tree() -> None:
    profile, output = record([build("ins_fork.c")])
    assert sorted(output.splitlines()) == ["child done", "parent done"]
    assert profile.meta.exit_status == 12  # child's 2 + 10: the target is sacred
    assert len(profile.meta.pids) == 2
    parent, child = (f"pid {pid} tid {pid}" for pid in profile.meta.pids)
    assert calls_by_path(profile, parent) == {
        ("main",): 1, ("main", "before_fork"): 10, ("main", "spawn"): 1,
        ("main", "after_fork"): 3}
    # The child keeps the calls open at fork (0 new calls) and records its own.
    assert calls_by_path(profile, child) == {
        ("main",): 0, ("main", "spawn"): 0, ("main", "spawn", "in_child"): 7}
    assert profile.meta.complete


def test_longjmp_resynchronizes_the_shadow_stack() -> None:
    profile, output = record([build("ins_longjmp.c")])
    assert output == "jumped 50\n"
    assert calls_by_path(profile) == {
        ("main",): 1,
        ("main", "outer"): 50,
        ("main", "outer", "inner"): 50,
        ("main", "outer", "inner", "jumper"): 50,
        ("main", "after_jump"): 50,  # not under jumper: the skipped exits were popped
    }


def test_cxx_exceptions_through_c_frames() -> None:
    if not _has("g++"):
        pytest.skip("g++ is not installed")
    lib = build_fixture("ins_exc_c.c", [*FLAGS, "-shared", "-fPIC"], output="libins_exc_c.so")
    binary = build("ins_exc.cpp", ["-Wl,--no-as-needed", str(lib)], compiler="g++")
    profile, output = record([binary])
    assert output == "caught 40\n"
    paths = {tuple(n.split("(")[0] for n in path): calls
             for path, calls in calls_by_path(profile).items()}
    assert paths == {
        ("main",): 1,
        ("main", "catcher"): 40,
        ("main", "catcher", "c_middle"): 40,
        ("main", "catcher", "c_middle", "thrower"): 40,
        ("main", "catcher", "c_middle", "thrower", "deep_cpp"): 40,
        ("main", "catcher", "c_middle", "thrower", "deep_cpp", "deep_throw"): 40,
        ("main", "catcher", "after_catch"): 40,  # c_middle's exit hook never ran
    }


def test_dlclosed_plugin_still_resolves() -> None:
    plugin = build_plugin("ins_plugin.c")
    profile, output = record([build("ins_dlopen.c", ["-ldl"]), plugin])
    assert output == "plugin done\n"
    paths = calls_by_path(profile)
    assert paths[("main", "use_plugin", "plugin_entry")] == 4
    assert paths[("main", "use_plugin", "plugin_entry", "plugin_helper")] == 20
    assert paths[("main", "after_close")] == 1
    modules = {f.function: f.module for f in profile.frames}
    assert modules["plugin_helper"].endswith(plugin.name)


def test_sigkill_keeps_data_so_far_marked_incomplete() -> None:
    collector = start_spin()
    try:
        live = wait_for_ticks(collector, 1000)
        assert not live.meta.complete  # live snapshots are never complete
        assert collector.process is not None
        collector.process.send_signal(signal.SIGKILL)
        collector.process.wait()
        profile = collector.collect()
        assert profile.meta.exit_signal == signal.SIGKILL
        assert not profile.meta.complete
        assert function_calls(profile, "tick") >= function_calls(live, "tick")
        assert calls_by_path(profile)[("main", "spin", "tick")] >= 1000
        assert any("did not exit cleanly" in w for w in profile.meta.warnings)
    finally:
        collector.stop()


def test_pause_holds_the_counts_until_resume() -> None:
    collector = start_spin()
    try:
        wait_for_ticks(collector, 1000)
        collector.pause()
        time.sleep(0.1)  # calls already inside the hooks finish
        paused = function_calls(collector.collect(), "tick")
        time.sleep(0.3)
        assert function_calls(collector.collect(), "tick") == paused
        collector.resume()
        wait_for_ticks(collector, paused + 1000)
    finally:
        collector.stop()


def _has(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


def test_async_signal_handlers_nest_without_corrupting_the_tree() -> None:
    profile, output = record([build("ins_signal.c")])
    handled = int(output.split()[1])
    paths = calls_by_path(profile)
    assert paths[("main", "work")] == 100000
    allowed = {("main",), ("main", "work"), ("main", "on_signal"), ("main", "on_signal", "handled"),
               ("main", "work", "on_signal"), ("main", "work", "on_signal", "handled")}
    assert set(paths) <= allowed
    recorded = function_calls(profile, "on_signal")
    # A signal landing while the hooks run their guarded slow path is not recorded.
    assert handled - 3 <= recorded <= handled
    assert function_calls(profile, "handled") == recorded
    assert paths[("main", "on_signal")] >= 10  # the synchronous raise()s


def test_exec_keeps_profiling_the_new_image() -> None:
    profile, output = record([build("ins_exec.c")])
    assert output == "first image\nsecond image\n"
    assert profile.meta.exit_status == 4
    assert len(profile.meta.pids) == 1  # same process, two images, two files
    paths = calls_by_path(profile)
    assert paths[("main", "first_image")] == 3
    assert paths[("main", "second_image")] == 5
    assert profile.meta.complete  # the first image's file ended by exec, not a crash


def test_frames_larger_than_the_scan_window_resynchronize_too() -> None:
    profile, output = record([build("ins_bigframe.c")])
    assert output == "big frames\n"
    assert calls_by_path(profile) == {
        ("main",): 1, ("main", "big"): 10, ("main", "big", "jumper"): 10,
        ("main", "big", "leaf"): 15,  # before jumper always, after it in even rounds
        ("main", "leaf"): 10,  # after the longjmp: under main again
    }


def test_handler_on_an_alternate_stack_above_the_thread_stack() -> None:
    profile, output = record([build("ins_altstack.c")])
    assert output == "alt done\n"
    worker = next(label for label in profile.parts
                  if ("thread_main",) in calls_by_path(profile, label))
    assert calls_by_path(profile, worker) == {
        ("thread_main",): 1,
        ("thread_main", "outer"): 1,
        ("thread_main", "outer", "inner"): 1,
        ("thread_main", "outer", "inner", "after"): 5,
        ("thread_main", "outer", "inner", "handler"): 5,  # raise() runs it inside inner
        ("thread_main", "outer", "inner", "handler", "on_alt"): 5,
        ("thread_main", "outer", "after"): 1,
    }
