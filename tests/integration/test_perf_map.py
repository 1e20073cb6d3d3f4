"""perf map files (/tmp/perf-PID.map) under the launched sampler: code a JIT generates
in anonymous memory is shown with the name the runtime wrote, in module `[jit]`; a
map file that is not the target's own (another owner, group/world writable, a
symlink) or that holds garbage is ignored with one warning, and never names code an
ELF file maps (collectors/symbols/perfmap.py).

tests/fixtures/smp_jit.c copies a countdown loop with a frame-pointer prologue into
anonymous executable memory, writes the map in the way its first argument says, and
spins in main -> run_jit -> jit_spin.
"""

from __future__ import annotations

import os
import platform
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler, start_sampler
from tests.helpers.costs import names_on_paths, paths_to

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the fixture generates x86-64 code")


@pytest.fixture
def jit_run() -> Iterator[object]:
    """Runs smp_jit MODE under the sampler: (profile, its perf map warnings); removes
    the map files it wrote afterwards."""
    written: list[Path] = []

    def run(mode: str) -> tuple[Profile, list[str]]:
        binary = build_fixture("smp_jit.c", ["-O2", "-g"])
        profile, output = run_sampler(binary, mode, "0.5", frequency_hz=500)
        found = re.search(r"jit pid (\d+) done\n", output)
        assert found, output
        written.extend(Path(f"/tmp/perf-{found[1]}.map{tail}") for tail in ("", ".real"))
        written.append(Path(f"/tmp/jit-{found[1]}.dump"))
        assert profile.meta.exit_status == 0
        return profile, [w for w in profile.meta.warnings if "perf map" in w or "jitdump" in w]

    yield run
    for path in written:
        if path.is_symlink() or path.exists():
            path.unlink()


def jit_rows(profile: Profile) -> list[str]:
    return [e.frame.function for e in flat_profile(profile) if e.frame.module == "[jit]"]


def test_jit_code_is_named_from_the_perf_map(jit_run) -> None:
    profile, warnings = jit_run("good")
    assert warnings == []
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert "jit_spin" in rows and rows["jit_spin"].frame.module == "[jit]", list(rows)
    whole = profile.total(0)
    assert whole >= 50, f"too few samples: {whole}"
    # The loop is all the fixture does: nearly every sample is in it.
    assert rows["jit_spin"].self_cost[0] >= 0.8 * whole, (rows["jit_spin"], whole)
    # Unwound through the JIT frame by its frame pointer, back into the C callers.
    paths = paths_to(profile, "jit_spin")
    through = sum(1 for p in paths if p[-3:] == ["main", "run_jit", "jit_spin"])
    assert through == len(paths), paths


@pytest.mark.parametrize("mode, why", [
    ("writable", "writable by others"),
    ("symlink", "cannot be opened safely"),
    ("foreign", "owned by uid 65534"),
])
def test_untrusted_map_is_ignored_with_one_warning(jit_run, mode: str, why: str) -> None:
    if mode == "foreign" and os.geteuid() != 0:
        pytest.skip("only root can make a file another user owns")
    profile, warnings = jit_run(mode)
    assert len(warnings) == 1 and why in warnings[0], warnings
    assert jit_rows(profile) == []
    assert not any(e.frame.function == "jit_spin" for e in flat_profile(profile))


def test_hostile_map_lines_are_ignored_never_trusted_over_elf(jit_run) -> None:
    profile, warnings = jit_run("hostile")
    assert len(warnings) == 1, warnings
    assert "4 malformed lines" in warnings[0] and "file-backed" in warnings[0], warnings
    names = {e.frame.function for e in flat_profile(profile)}
    assert "jit_spin" in names and "main" in names and "evil_main" not in names, names
    assert jit_rows(profile) == ["jit_spin"]


def test_entries_written_later_name_samples_taken_before(jit_run) -> None:
    """Live: the JIT names its code only after it ran a while (SIGUSR1); the samples
    shown unnamed until then are named in the end (the map is re-read as it grows and
    the unresolved stacks looked at again)."""
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    collector = start_sampler(binary, "late", "0.3", frequency_hz=500)
    assert collector.process is not None
    pid = collector.process.pid
    try:
        deadline = time.monotonic() + 30
        unnamed = 0.0
        while unnamed < 20 and time.monotonic() < deadline:
            time.sleep(0.05)  # polling a live profile, not waiting for an event
            unnamed = sum(e.self_cost[0] for e in flat_profile(collector.snapshot())
                          if e.frame.function.startswith("0x"))
        assert unnamed >= 20, "no unnamed JIT samples seen in 30 s"
        collector.process.send_signal(signal.SIGUSR1)
        profile = collector.wait()
    finally:
        collector.stop()
        for tail in ("", ".real"):
            Path(f"/tmp/perf-{pid}.map{tail}").unlink(missing_ok=True)
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert not [name for name in rows if name.startswith("0x")], list(rows)
    assert rows["jit_spin"].self_cost[0] >= unnamed


def test_call_stub_without_frame_pointer_is_unwound(jit_run) -> None:
    """Generated code shaped as CPython 3.12/3.13's perf trampoline (sub rsp; call;
    no frame pointer, no unwind tables), entered with a frame pointer that leads
    nowhere: the walk steps over it into its C caller (the stub step of
    csrc/common/pt_unwind.c), so the stub is named and its callers are whole."""
    profile, warnings = jit_run("stub")
    assert warnings == []
    whole = profile.total(0)
    assert whole >= 50, f"too few samples: {whole}"
    paths = paths_to(profile, "stub_spin")
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert rows["stub_spin"].self_cost[0] >= 0.8 * whole, (rows["stub_spin"], whole)
    plain = [[name.split(" [clone")[0] for name in p] for p in paths]
    through = [p for p in plain if p[-5:] == ["main", "run_stub", "call_stub", "jit_stub",
                                              "stub_spin"]]
    assert len(through) == len(paths), paths
    assert not [w for w in profile.meta.warnings if "cut short" in w], profile.meta.warnings


def test_jit_code_is_named_from_a_jitdump(jit_run) -> None:
    """No perf map, a jitdump in perf's format (collectors/symbols/jitdump.py): its
    JIT_CODE_LOAD names the code, the unwinding-info record before it is skipped."""
    profile, warnings = jit_run("dump")
    assert warnings == []
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert "jit_spin" in rows and rows["jit_spin"].frame.module == "[jit]", list(rows)
    whole = profile.total(0)
    assert whole >= 50, f"too few samples: {whole}"
    assert rows["jit_spin"].self_cost[0] >= 0.8 * whole, (rows["jit_spin"], whole)
    paths = paths_to(profile, "jit_spin")
    assert all(p[-3:] == ["main", "run_jit", "jit_spin"] for p in paths), paths


def test_hostile_jitdump_is_one_warning_never_trusted_over_elf(jit_run) -> None:
    profile, warnings = jit_run("dump-hostile")
    assert len(warnings) == 1, warnings
    assert "1 entry over file-backed code ignored" in warnings[0], warnings
    assert "cut short" in warnings[0], warnings
    names = {e.frame.function for e in flat_profile(profile)}
    assert "jit_spin" in names and "main" in names and "evil_main" not in names, names
    assert jit_rows(profile) == ["jit_spin"]


def test_writable_jitdump_is_ignored_with_one_warning(jit_run) -> None:
    profile, warnings = jit_run("dump-writable")
    assert len(warnings) == 1 and "writable by others" in warnings[0], warnings
    assert jit_rows(profile) == []


def test_jit_code_without_frame_pointer_is_unwound_by_its_jitdump_tables(jit_run) -> None:
    """Generated code that moves rsp and keeps no frame pointer, entered with rbp = 1:
    only the .eh_frame of its JIT_CODE_UNWINDING_INFO record unwinds it.  The
    sampler's runtime reads that record from the jitdump it finds among the
    process's mappings (csrc/common/pt_jit.c); without it every stack was cut at
    the leaf (100% cut short).  A sample taken before the runtime's first poll saw
    the file may still be cut."""
    profile, warnings = jit_run("dump-cfi")
    assert warnings == []
    whole = profile.total(0)
    assert whole >= 50, f"too few samples: {whole}"
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert rows["jit_cfi"].frame.module == "[jit]", list(rows)
    assert rows["jit_cfi"].self_cost[0] >= 0.8 * whole, (rows["jit_cfi"], whole)
    paths = [[name.split(" [clone")[0] for name in p] for p in paths_to(profile, "jit_cfi")]
    whole_paths = [p for p in paths if p[-4:] == ["main", "run_cfi", "call_stub", "jit_cfi"]]
    assert whole_paths and all(p in whole_paths or p == ["jit_cfi"] for p in paths), paths
    assert rows["run_cfi"].total_cost[0] >= 0.95 * rows["jit_cfi"].total_cost[0], rows


def test_hostile_jitdump_unwinding_records_are_survived_never_trusted_over_elf(
        jit_run) -> None:
    """Unwinding records that lie about their sizes, whole tables for a load over
    main's own code and garbage ones for code never run, before the good ones: the
    target runs to its end, jit_cfi is still unwound by its own tables, and main's
    frames are not taken for generated code."""
    profile, warnings = jit_run("dump-cfi-hostile")
    assert len(warnings) == 1 and "file-backed code ignored" in warnings[0], warnings
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert "evil_main" not in rows and "main" in rows, list(rows)
    assert rows["run_cfi"].total_cost[0] >= 0.95 * rows["jit_cfi"].total_cost[0], rows
    assert rows["main"].total_cost[0] >= 0.95 * profile.total(0), rows["main"]


def test_writable_jitdump_tables_are_not_trusted(jit_run) -> None:
    """The same code with its jitdump writable by others: the front end names
    nothing from it, and the runtime builds no tables from it: the stacks stay cut
    at the generated code.  run_cfi may still show: a sample in its own code, before
    or after the call, or in its clock (1 of ~245 in some runs), never through the
    generated code."""
    profile, warnings = jit_run("dump-cfi-writable")
    assert len(warnings) == 1 and "writable by others" in warnings[0], warnings
    rows = {e.frame.function: e for e in flat_profile(profile)}
    assert "jit_cfi" not in rows, list(rows)
    through = [p for p in names_on_paths(profile) if "run_cfi" in p and
               any(name.startswith("0x") for name in p[p.index("run_cfi"):])]
    assert through == [], through
    inside = rows["run_cfi"].total_cost[0] if "run_cfi" in rows else 0
    assert inside <= 0.05 * profile.total(0), (inside, profile.total(0))


def test_follow_names_each_process_from_its_own_file() -> None:
    """--follow: a shell runs the fixture twice, once with a perf map, once with a
    jitdump; each process's JIT code is named from its own file."""
    binary = build_fixture("smp_jit.c", ["-O2", "-g"])
    profile, output = run_sampler(Path("/bin/sh"), "-c", f"{binary} good 0.4; {binary} dump 0.4",
                                  frequency_hz=500, follow_children=True)
    pids = re.findall(r"jit pid (\d+) done\n", output)
    for pid in pids:
        Path(f"/tmp/perf-{pid}.map").unlink(missing_ok=True)
        Path(f"/tmp/jit-{pid}.dump").unlink(missing_ok=True)
    assert len(pids) == 2 and profile.meta.exit_status == 0, output
    assert not [w for w in profile.meta.warnings if "perf map" in w or "jitdump" in w]
    rows = {e.frame.function: e for e in flat_profile(profile)}
    whole = profile.total(0)
    assert rows["jit_spin"].frame.module == "[jit]"
    assert rows["jit_spin"].self_cost[0] >= 0.8 * whole, (rows["jit_spin"], whole)
    paths = paths_to(profile, "jit_spin")
    assert all(p[-3:] == ["main", "run_jit", "jit_spin"] for p in paths), paths
