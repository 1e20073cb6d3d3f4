"""The preloaded runtimes against a target's own resource limits (issue 32, item 10;
docs/runtime-safety.md, "Address space").

The runtimes map their run files into the target.  They used to map the whole file
(the sampler 1.25 GiB, the hook library 64 MiB plus 72 MiB of shadow stack per
thread), so a program that lowers its RLIMIT_AS got NULL from every malloc, and one
under `ulimit -f` was killed by SIGXFSZ when the runtime sized its file.  Now only
what is used is mapped; a mapping that cannot be made is one true warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.model.storage import load as load_profile
from proftui.collectors.runtime.libraries import runtime_library_path

from tests.conftest import build_fixture
from tests.helpers.heap import by_site
from tests.helpers.instrument import function_calls

PLAIN = ["-O2", "-g", "-pthread"]
INSTRUMENT = [*PLAIN, "-finstrument-functions"]
MARGIN_KB = 64 << 10  # the address space the target gives itself beyond its own start
SMALL, BIG = 2816, 4  # rt_aslimit's blocks: 16 KiB (44 MiB live at once) and 4 MiB
# mode -> (record's mode arguments, the runtime library it preloads)
MODES = {
    "sampler": (["--mode", "sampler"], "proftui_sampler"),
    "instrument": (["--mode", "instrument"], "proftui_hook"),
    "heap": (["--mode", "heap"], "proftui_heap"),
    "sampler+heap": (["--mode", "sampler", "--heap"], "proftui_sampler"),
}


def fixture(mode: str) -> Path:
    if mode == "instrument":
        return build_fixture("rt_aslimit.c", INSTRUMENT, output="rt_aslimit_ins")
    return build_fixture("rt_aslimit.c", PLAIN)


def proftui(out: Path, mode: str, argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out),
                           *MODES[mode][0], *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp)})


def plain(argv: list[str], preload: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROFTUI")}
    if preload:
        env["LD_PRELOAD"] = runtime_library_path(preload)  # loaded, idle: no PROFTUI_DIR
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def same_as_plain(result: subprocess.CompletedProcess[str],
                  want: subprocess.CompletedProcess[str], out: Path) -> list[str]:
    """The target's output and status unchanged, a profile saved: its warnings."""
    assert "Traceback" not in result.stderr, result.stderr
    assert (result.stdout, result.returncode) == (want.stdout, want.returncode), result.stderr
    assert out.exists(), result.stderr
    return load_profile(out).meta.warnings


@pytest.mark.parametrize("mode", list(MODES))
def test_target_lowering_its_address_space_limit(tmp_path: Path, mode: str) -> None:
    """rt_aslimit lowers RLIMIT_AS to what it needs without proftui (its VmSize at the
    start of main, unprofiled) plus 64 MiB, then keeps 44 MiB live: it must run as
    without proftui, and the profile must be whole.  Before, every malloc failed
    under the sampler (1.25 GiB mapped) and the hook library (136 MiB), and the heap
    profiler's 26 MiB left too little."""
    binary = fixture(mode)
    base = plain([str(binary), "probe"])
    argv = [str(binary), "run", base.stdout.strip(), str(MARGIN_KB)]
    want = plain(argv)
    assert want.returncode == 0 and want.stdout.startswith("ok "), want.stdout
    # The VmSize proftui adds at the start of main (printed for the record).
    probe_out = tmp_path / "probe.proftui"
    probed = proftui(probe_out, mode, [str(binary), "probe"], tmp_path)
    added = int(probed.stdout) - int(base.stdout)
    print(f"{mode}: VmSize at main {base.stdout.strip()} kB plain, +{added} kB profiled")
    assert added < 32 << 10, f"{mode} adds {added} kB of address space at start"
    out = tmp_path / "run.proftui"
    warnings = same_as_plain(proftui(out, mode, argv, tmp_path), want, out)
    assert not [w for w in warnings if "could not map" in w or "ulimit" in w], warnings
    profile = load_profile(out)
    if mode == "instrument":  # every call counted: nothing was dropped
        assert function_calls(profile, "fill") == SMALL + BIG + 64
        assert function_calls(profile, "churn") == 1
    if mode == "heap":  # every allocation counted where it was made
        assert by_site(profile, "allocs")["churn"] == SMALL + BIG
        assert by_site(profile, "alloc_bytes")["churn"] == SMALL * (16 << 10) + BIG * (4 << 20)


@pytest.mark.parametrize("mode", ["sampler", "instrument", "heap"])
def test_address_space_too_small_for_the_runtime(tmp_path: Path, mode: str) -> None:
    """Under a limit just above what the program itself needs (its VmSize with the
    runtime loaded but idle, + 256 KiB), set before an exec as `ulimit -v` would, the
    runtime cannot map its run file: the program runs as without proftui and the
    profile says so in one line, naming the limit (before: no word, or "was
    LD_PRELOAD removed?")."""
    binary = fixture(mode)
    idle = plain([str(binary), "probe"], preload=MODES[mode][1])
    limit_kb = int(idle.stdout) + 256
    argv = [str(binary), "limit", "as", str(limit_kb), "small"]
    want = plain(argv)
    assert (want.stdout, want.returncode) == ("small ok\n", 0)
    out = tmp_path / "run.proftui"
    warnings = same_as_plain(proftui(out, mode, argv, tmp_path), want, out)
    said = [w for w in warnings if "RLIMIT_AS" in w]
    assert len(said) == 1, warnings
    assert "could not map" in said[0] and "for its run file" in said[0], said
    assert f"{limit_kb:,} kB" in said[0], said
    assert not [w for w in warnings if "LD_PRELOAD" in w], warnings
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.proftui"]  # run dir gone


@pytest.mark.parametrize("mode", ["sampler", "instrument", "heap"])
def test_file_size_limit(tmp_path: Path, mode: str) -> None:
    """Under `ulimit -f` 4 MiB the runtime made its file at its usual size and the
    kernel killed the target with SIGXFSZ (status 153, no output).  Now the file is
    made to fit and one warning says what the limit cost."""
    binary = fixture(mode)
    argv = [str(binary), "limit", "fsize", "4096", "small"]
    want = plain(argv)
    assert (want.stdout, want.returncode) == ("small ok\n", 0)
    out = tmp_path / "run.proftui"
    warnings = same_as_plain(proftui(out, mode, argv, tmp_path), want, out)
    said = [w for w in warnings if "RLIMIT_FSIZE" in w]
    assert len(said) == 1 and "4,096 kB" in said[0], warnings


def test_errno_survives_a_mapping_that_fails(tmp_path: Path) -> None:
    """Hooks that map memory (a new calling context's hash, a deeper shadow stack, a
    new window of the node pool) run inside the target's code, between its setting of
    errno and its reading of it.  With no address space left they fail: the target's
    errno must stay what it was (before: ENOMEM in 2,957 of 5,000 calls), and the
    profile says what could not be mapped and that calls were dropped."""
    binary = fixture("instrument")
    argv = [str(binary), "errno", "5000"]
    want = plain(argv)
    assert (want.stdout, want.returncode) == ("5000 levels, errno changed 0 times\n", 0)
    out = tmp_path / "run.proftui"
    warnings = same_as_plain(proftui(out, "instrument", argv, tmp_path), want, out)
    said = [w for w in warnings if "RLIMIT_AS" in w]
    assert said and all("could not map" in w for w in said), warnings
    assert [w for w in warnings if "calls not recorded (the note above" in w], warnings
