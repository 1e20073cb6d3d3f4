"""The preloaded runtimes (csrc/sampler, csrc/hook, csrc/heap) against a hostile
environment: a nearly full TMPDIR, recursion to the edge of the stack limit, a target
that overwrites its own run file (resource limits: test_runtime_limits.py).  The target's
output and exit status stay what they are without proftui, a profile comes
back (or one line says why not), no traceback, nothing is left in TMPDIR.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.model.storage import load as load_profile

from tests.conftest import build_fixture

NATIVE = Path(__file__).resolve().parents[2] / "collectors" / "runtime" / "native"
INSTRUMENT = ["-O2", "-g", "-finstrument-functions", "-pthread"]
PLAIN = ["-O2", "-g", "-pthread"]


def proftui(*args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def run_plain(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (root only: skips with the reason otherwise)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip() or 'not root'})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def assert_recorded(result: subprocess.CompletedProcess[str],
                    plain: subprocess.CompletedProcess[str], out: Path) -> list[str]:
    """Target output and status unchanged, no traceback; the profile's warnings,
    or [] when none was saved (then exactly one line says why)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert (result.stdout, result.returncode) == (plain.stdout, plain.returncode), result.stderr
    if not out.exists():
        lines = [line for line in result.stderr.splitlines() if line.startswith("proftui")]
        assert len(lines) == 1, result.stderr
        return []
    return load_profile(out).meta.warnings


@pytest.mark.parametrize("size", ["16k", "64k", "256k"])
@pytest.mark.parametrize("mode", ["sampler", "instrument"])
def test_nearly_full_tmpdir(tmp_path: Path, mode: str, size: str) -> None:
    """A tmpfs TMPDIR with 16-256 KiB free: no SIGBUS in the target or in proftui;
    what did not fit is counted as dropped and said in a warning."""
    if mode == "sampler":
        argv = [str(build_fixture("smp_work.c", PLAIN)), "100"]
    else:
        argv = [str(build_fixture("ins_recurse.c", INSTRUMENT)), "20000"]
    plain = run_plain(argv)
    out = tmp_path / "run.proftui"
    with small_tmpfs(tmp_path / "tmp", size) as tmpdir:
        result = proftui("record", "-o", str(out), "--mode", mode, *argv,
                         env={"TMPDIR": str(tmpdir)})
        left = list(tmpdir.iterdir())
    assert left == [], left
    warnings = assert_recorded(result, plain, out)
    assert out.exists(), result.stderr
    profile = load_profile(out)
    assert profile.meta.exit_status == plain.returncode
    if profile.meta.dropped:
        assert any("file system" in w and "is full" in w for w in warnings), warnings
    if mode == "instrument" and size != "256k":  # 20,000 contexts need ~800 KiB
        assert profile.meta.dropped > 0


@pytest.mark.parametrize("mode", ["sampler", "instrument"])
def test_recursion_to_the_stack_limit(tmp_path: Path, mode: str) -> None:
    """Recursion to 1 KiB of a 256 KiB stack limit: the sampler's handler runs on its
    own alternate stack and the hooks take a few hundred bytes, so the profiled run
    ends like the plain one (it died of SIGSEGV with the handler on the target's stack)."""
    flags = INSTRUMENT if mode == "instrument" else PLAIN
    binary = build_fixture("rt_deep.c", flags,
                           output=f"rt_deep_{'ins' if mode == 'instrument' else 'plain'}")
    argv = [str(binary), "256", "1024", "40"]
    plain = run_plain(argv)
    assert (plain.stdout, plain.returncode) == ("rounds 40, deep: yes\n", 0), plain.stderr
    out = tmp_path / "run.proftui"
    result = proftui("record", "-o", str(out), "--mode", mode, "-F", "5000", *argv,
                     env={"TMPDIR": str(tmp_path)})
    assert_recorded(result, plain, out)
    profile = load_profile(out)
    names = {f.function for f in profile.frames}
    assert "dive" in names, sorted(names)[:20]
    assert [p.name for p in tmp_path.iterdir()] == ["run.proftui"]


def test_hook_stack_use_is_small(tmp_path: Path) -> None:
    """Bytes of the target's stack an instrumented call takes with the hook runtime:
    a few hundred on the fast and slow paths, and no 16 KiB buffer on the first call."""
    binary = build_fixture("rt_stackuse.c", INSTRUMENT)
    plain = dict(line.split() for line in run_plain([str(binary)]).stdout.splitlines())
    env = {**os.environ, "PROFTUI_DIR": str(tmp_path),
           "LD_PRELOAD": str(NATIVE / "proftui_hook.abi3.so")}
    hooked_run = subprocess.run([str(binary)], capture_output=True, text=True, env=env,
                                timeout=60)
    hooked = dict(line.split() for line in hooked_run.stdout.splitlines())
    used = {case: int(hooked[case]) - int(plain[case]) for case in plain}
    print("hook stack bytes beyond the plain call:", used)
    assert used["fast"] <= 256, used
    assert used["slow"] <= 1024, used
    assert used["first"] <= 8192, used  # start-up: clock, calibration, /proc reads


@pytest.mark.parametrize("tables", [False, True])
@pytest.mark.parametrize("mode", ["sampler", "instrument", "heap"])
def test_target_overwriting_the_run_file_header(tmp_path: Path, mode: str, tables: bool) -> None:
    """The target scribbles over the headers of its own run file (with `tables`, over
    the start of every table they point to as well), then meets new calling contexts,
    new stacks, a new thread and new allocation paths: the runtime must take its
    bounds from its own memory, never from the header (the hook library wrote outside
    the file and died in pt_new_node; the sampler and the heap profiler as soon as a
    thread or a stack came after the damage).  The target's output and status are
    unchanged, what the tables still hold is salvaged and one warning says what was
    lost."""
    flags = INSTRUMENT if mode == "instrument" else PLAIN
    binary = build_fixture("rt_scribble.c", flags,
                           output=f"rt_scribble_{'ins' if mode == 'instrument' else 'plain'}")
    kind = {"instrument": "hook", "sampler": "sampler", "heap": "heap"}[mode]
    argv = [str(binary), kind, "256", *(["tables"] if tables else [])]
    plain = run_plain(argv)
    assert (plain.stdout, plain.returncode) == ("scribbled\n", 3)
    out = tmp_path / "run.proftui"
    result = proftui("record", "-o", str(out), "--mode", mode, *argv,
                     env={"TMPDIR": str(tmp_path)})
    warnings = assert_recorded(result, plain, out)
    assert [p.name for p in tmp_path.iterdir()] == ["run.proftui"]
    damaged = [w for w in warnings if f"{kind}." in w and ".ptw" in w]  # names the file
    assert len(damaged) == 1, warnings
    assert not [w for w in warnings if "did not start" in w or "no clock could tick" in w], \
        warnings
    if tables or mode == "heap":  # the tables' own data is gone (heap: no salvage)
        return
    assert "overwrote the file's header" in damaged[0]
    profile = load_profile(out)
    names = {f.function for f in profile.frames}
    assert {"work_a", "work_b", "work_c"} <= names, sorted(names)[:20]
    if mode == "instrument":  # calls are exact even without the header's clock
        assert "calls only" in damaged[0]
        from tests.helpers.instrument import function_calls
        assert function_calls(profile, "work_a") == 200 + 1
        assert function_calls(profile, "work_b") == 200 + 20
        assert function_calls(profile, "work_c") == 20 + 1


def test_sampler_headers_rebuilt_from_the_layout(tmp_path: Path) -> None:
    """A sampler file whose headers were junk before proftui first read it: the
    layout is rebuilt from its size, its records drain and name their stacks; a size
    that fits no layout is one error, and a file truncated under the reader is one
    error too."""
    from proftui.collectors.errors import ProftuiError
    from proftui.collectors.runtime.wire_sampler import SLOTS_OFFSET, SamplerFile

    from tests.helpers.sampler_file import SamplerWriter

    w = SamplerWriter(tmp_path / "sampler.4242.ptw", ring_words=512, pid=4242)
    w.slot(3, 4242)
    sid = w.sample(3, 4242, [0x401000, 0x402000])
    w.put(0, bytes(((i * 7) ^ 0x5A) & 0xFF for i in range(SLOTS_OFFSET)))
    w.close()
    path = w.path
    with pytest.raises(ProftuiError, match="bad magic"):
        SamplerFile(path)
    sfile = SamplerFile(path, salvage_period_ns=1_000_000)
    assert sfile.salvaged and sfile.header.pid == 4242 and sfile.sampler.ring_words == 512
    assert [(r.tid, list(r.ids)) for r in sfile.drain()] == [(4242, [sid])]
    assert [tuple(s.ips) for s in sfile.new_stacks()] == [(0x401000, 0x402000)]
    sfile.close()
    short = tmp_path / "sampler.7.ptw"
    with open(short, "wb") as f:
        f.truncate(w.size - 8)
    with pytest.raises(ProftuiError, match="fits no sampler layout"):
        SamplerFile(short, salvage_period_ns=1_000_000)
    sfile = SamplerFile(path, salvage_period_ns=1_000_000)
    os.truncate(path, 100_000)  # shorter than the rings: a read past the end
    with pytest.raises(ProftuiError, match="truncated"):
        sfile.drain()
    sfile.close()


@pytest.mark.parametrize("kernel", ["default", "user-only"])
def test_blocking_calls_under_the_sampling_signal(tmp_path: Path, kernel: str) -> None:
    """What the sampling signal does to the target's blocking calls
    (docs/runtime-safety.md, "EINTR").  The handler is SA_RESTART, so read() is
    never cut short; with user time only (PROFTUI_SAMPLER_KERNEL=0) a sample is
    only ever taken in user mode, so no call at all sees EINTR.  Counting kernel
    time (the default where allowed) may cut nanosleep/poll/select short: the
    rate is printed, the program's output and status must not change."""
    binary = build_fixture("rt_eintr.c", PLAIN)
    argv = [str(binary), "3000", "100000"]
    plain = run_plain(argv)
    assert plain.stderr == "eintr nanosleep 0 poll 0 select 0 read 0\n"
    env = {"TMPDIR": str(tmp_path)}
    if kernel == "user-only":
        env["PROFTUI_SAMPLER_KERNEL"] = "0"
    out = tmp_path / "run.proftui"
    result = proftui("record", "-o", str(out), "--mode", "sampler", *argv, env=env)
    assert_recorded(result, plain, out)
    counts = next(line for line in result.stderr.splitlines() if line.startswith("eintr"))
    print(f"{kernel}: {counts} (of 9000 interruptible calls)")
    fields = counts.split()
    interrupted = dict(zip(fields[1::2], map(int, fields[2::2]), strict=True))
    assert interrupted["read"] == 0  # SA_RESTART
    if kernel == "user-only":
        assert interrupted == {"nanosleep": 0, "poll": 0, "select": 0, "read": 0}


@pytest.mark.parametrize("mode", ["sampler", "heap"])
def test_huge_buffer_from_the_environment_is_capped(tmp_path: Path, mode: str) -> None:
    """Issue 26: PROFTUI_BUFFER_BYTES=10^14 inherited by proftui made the sampler back a
    quarter of the free disk per thread ring (32 s for a 0.3 s run, gigabytes read).
    Now it is held to --buffer's range with one warning; the target is unchanged."""
    argv = [str(build_fixture("smp_work.c", PLAIN)), "40"]
    plain = run_plain(argv)
    out = tmp_path / "run.proftui"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    result = proftui("record", "-o", str(out), "--mode", mode, *argv,
                     env={"TMPDIR": str(tmpdir), "PROFTUI_BUFFER_BYTES": "100000000000000"})
    warnings = assert_recorded(result, plain, out)
    assert [w for w in warnings if w.startswith("PROFTUI_BUFFER_BYTES=100000000000000 in the "
                                                "environment is outside --buffer's range")], \
        warnings
    assert sum(f.stat().st_size for f in tmpdir.rglob("*")) == 0  # the run directory is gone
