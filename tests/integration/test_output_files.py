"""The files proftui writes for itself (issue 14): `record -o` and `export -o`.

Each case runs the CLI with TMPDIR pointed at an empty directory and checks
the target's output and exit status are its own, stderr is one line without
a traceback, the profile is kept somewhere the message names (or the target
never started), and nothing is left under TMPDIR or beside the output.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from proftui.collectors.formats.export import export_bytes
from proftui.collectors.model import storage

from tests.conftest import build_fixture

TARGET_OUT = "out 2\n"  # cli_exit.c with one argument prints this and exits with it


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    tmpdir = tmp_path / "tmpdir"
    home = tmp_path / "home"
    tmpdir.mkdir()
    home.mkdir()
    return {**os.environ, "TMPDIR": str(tmpdir), "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache")}


def proftui(env: dict[str, str], cwd: Path, *args: str,
            command: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m proftui.tui.cli ARGS` (or `command + ARGS`) and check the common rules."""
    prefix = [sys.executable, "-m", "proftui.tui.cli"] if command is None else command
    result = subprocess.run([*prefix, *args], capture_output=True, text=True, cwd=cwd, env=env,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stderr, result.stderr
    assert list(Path(env["TMPDIR"]).iterdir()) == [], "left under TMPDIR"
    return result


def proftui_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr lines of proftui itself (the target's own stderr is "err")."""
    return [line for line in result.stderr.splitlines() if line != "err"]


def target() -> Path:
    return build_fixture("cli_exit.c", ["-O1", "-g"])


def record(env: dict[str, str], cwd: Path, output: str) -> subprocess.CompletedProcess[str]:
    return proftui(env, cwd, "record", "-o", output, str(target()), "2")


def assert_not_started(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode != 0
    assert result.stdout == "", "the target must not start"
    [line] = proftui_lines(result)
    assert line.startswith("proftui: ") and text in line, result.stderr


def test_bad_output_path_is_refused_before_the_target_starts(tmp_path: Path, env) -> None:
    assert_not_started(record(env, tmp_path, ""), "empty output file name")
    assert_not_started(record(env, tmp_path, str(tmp_path)), "is a directory")
    assert_not_started(record(env, tmp_path, str(tmp_path / "no" / "x.proftui")),
                       "does not exist")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert_not_started(record(env, tmp_path, str(loop)), "loop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "loop", "tmpdir"]


def test_unwritable_directory_is_refused_before_the_target_starts(tmp_path: Path, env) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into a mode 0500 directory: covered by the read-only mount")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert_not_started(record(env, tmp_path, str(locked / "x.proftui")),
                           "Permission denied")
    finally:
        locked.chmod(0o700)


def test_read_only_mount_is_refused_before_the_target_starts(tmp_path: Path, env) -> None:
    """A read-only bind mount, made in a private mount namespace (unshare -rm)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0"',
                            str(ro)], capture_output=True, text=True) \
        if shutil.which("unshare") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot make a read-only mount here (unshare -rm and mount --bind "
                    f"failed: {probe.stderr.strip() if probe else 'no unshare'})")
    output = ro / "x.proftui"
    result = proftui(env, tmp_path, "unshare", "-rm", "sh", "-c",
                     'mount --bind -o ro "$0" "$0" && exec "$@"', str(ro),
                     sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(output),
                     str(target()), "2", command=[])
    assert result.returncode != 0 and result.stdout == ""
    assert proftui_lines(result) == [f"proftui: {output}: cannot write: Read-only file system"]
    assert list(ro.iterdir()) == []


def record_shell(env: dict[str, str], tmp_path: Path, script: str
                 ) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """(the result, OUT, WORK) of `proftui record -o OUT/run.proftui` run in WORK on
    `sh -c script`, where the script's {out} and {work} are those directories."""
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    work.mkdir()
    sh = shutil.which("sh")
    assert sh is not None
    result = proftui(env, work, "record", "-o", str(out / "run.proftui"), "--mode", "sampler",
                     sh, "-c", script.format(out=out, work=work))
    return result, out, work


def test_output_lost_at_the_end_goes_to_a_fallback_file(tmp_path: Path, env) -> None:
    """The output directory disappears while the target runs: the profile goes to
    the current directory, the message says where, the status is the target's."""
    result, out, work = record_shell(env, tmp_path, "rmdir {out}; echo ran; exit 3")
    assert (result.returncode, result.stdout) == (3, "ran\n")
    [line] = proftui_lines(result)
    [fallback] = list(work.glob("proftui-*.proftui"))
    assert f"{out / 'run.proftui'}: cannot write" in line and f"saved to {fallback}" in line
    assert stat.S_IMODE(fallback.stat().st_mode) == 0o600
    assert storage.load(fallback).meta.exit_status == 3


def test_fallback_to_home_when_the_working_directory_is_gone(tmp_path: Path, env) -> None:
    result, _out, _work = record_shell(env, tmp_path, "rmdir {out} {work}; exit 4")
    assert result.returncode == 4
    [line] = proftui_lines(result)
    [fallback] = list(Path(env["HOME"]).glob("proftui-*.proftui"))
    assert f"saved to {fallback}" in line
    assert storage.load(fallback).meta.exit_status == 4


def test_dev_null_stays_a_device(tmp_path: Path, env) -> None:
    before = os.stat("/dev/null")
    result = record(env, tmp_path, "/dev/null")
    assert (result.returncode, result.stdout) == (2, TARGET_OUT)
    assert proftui_lines(result) == ["proftui: sampler profile saved to /dev/null"]
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_full_disk_keeps_the_profile_elsewhere(tmp_path: Path, env) -> None:
    if not os.access("/dev/full", os.W_OK):
        pytest.skip("/dev/full is not writable here")
    result = record(env, tmp_path, "/dev/full")
    assert (result.returncode, result.stdout) == (2, TARGET_OUT)
    [line] = proftui_lines(result)
    assert "/dev/full: cannot write: No space left on device" in line
    [fallback] = list(tmp_path.glob("proftui-*.proftui"))
    assert f"saved to {fallback}" in line and storage.load(fallback).meta.mode == "sampler"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_export_to_a_fifo_writes_into_it(tmp_path: Path, env) -> None:
    profile_path = tmp_path / "run.proftui"
    assert record(env, tmp_path, str(profile_path)).returncode == 2
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = proftui(env, tmp_path, "export", "-f", "folded", "-o", str(fifo), str(profile_path))
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert received == [export_bytes(storage.load(profile_path), "folded")]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_symlink_output_is_written_through(tmp_path: Path, env) -> None:
    real = tmp_path / "real.proftui"
    link = tmp_path / "link.proftui"
    link.symlink_to(real.name)  # dangling: the target is created, like cp
    assert record(env, tmp_path, str(link)).returncode == 2
    assert link.is_symlink() and storage.load(real).meta.mode == "sampler"
    folded_real = tmp_path / "stacks.txt"
    folded_real.write_text("old\n")
    folded_link = tmp_path / "stacks.folded"
    folded_link.symlink_to(folded_real)
    result = proftui(env, tmp_path, "export", "-f", "folded", "-o", str(folded_link), str(real))
    assert result.returncode == 0, result.stderr
    assert folded_link.is_symlink()
    assert folded_real.read_bytes() == export_bytes(storage.load(real), "folded")


def test_planted_tmp_files_are_not_used(tmp_path: Path, env) -> None:
    """The old `<out>.tmp` names: a planted symlink must not redirect the write, a
    planted world-writable file must not receive the profile."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "run.proftui"
    (tmp_path / "run.proftui.tmp").symlink_to(victim)
    export_out = tmp_path / "run.pb.gz"
    planted = tmp_path / "run.pb.gz.tmp"
    planted.touch()
    planted.chmod(0o666)
    assert record(env, tmp_path, str(out)).returncode == 2
    result = proftui(env, tmp_path, "export", "-f", "pprof", "-o", str(export_out), str(out))
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n" and planted.read_bytes() == b""
    for written in (out, export_out):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600, written
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["home", "run.pb.gz", "run.pb.gz.tmp", "run.proftui", "run.proftui.tmp",
                     "tmpdir", "victim"]


def test_replacing_a_file_keeps_its_mode_only_when_it_is_ours(tmp_path: Path, env) -> None:
    out = tmp_path / "run.proftui"
    out.touch()
    out.chmod(0o644)  # the user made it shareable once
    assert record(env, tmp_path, str(out)).returncode == 2
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    if os.geteuid() != 0:
        return  # only root can give a file to someone else
    os.chown(out, 65534, 65534)
    out.chmod(0o666)
    assert record(env, tmp_path, str(out)).returncode == 2
    st = out.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)


@pytest.mark.parametrize("mode", ["sampler", "instrument"])
def test_plugin_replaced_by_a_fifo_does_not_hang(tmp_path: Path, env, mode: str) -> None:
    if mode == "sampler":
        plugin = build_fixture("smp_plugin_lib.c", ["-O2", "-g", "-shared", "-fPIC"],
                               output="libsmp_plugin.so")
        host = build_fixture("sec_fifo_plugin.c", ["-O2", "-g", "-fno-omit-frame-pointer",
                                                   "-ldl"])
        how = "spin"
    else:
        plugin = build_fixture("ins_plugin.c", ["-O2", "-g", "-shared", "-fPIC",
                                                "-finstrument-functions"],
                               output="libins_plugin.so")
        host = build_fixture("sec_fifo_plugin.c", ["-O2", "-g", "-finstrument-functions",
                                                   "-ldl"], output="sec_fifo_plugin_ins")
        how = "entry"
    copy = tmp_path / "libplugin.so"
    shutil.copy(plugin, copy)
    out = tmp_path / "run.proftui"
    result = proftui(env, tmp_path, "record", "-o", str(out), str(host), str(copy), how)
    assert (result.returncode, result.stdout) == (0, "plugin done\n"), result.stderr
    assert stat.S_ISFIFO(copy.lstat().st_mode)
    profile = storage.load(out)
    assert any(f"{copy}: not a readable ELF file (not a regular file)" in w
               for w in profile.meta.warnings), profile.meta.warnings
    assert any(f.function.startswith("libplugin.so+0x") for f in profile.frames)


def test_record_to_a_fifo_nobody_reads_does_not_hang(tmp_path: Path, env) -> None:
    """Issue 26: the save opened the FIFO and waited for a reader forever, SIGTERM
    included.  Now: one line, the profile in a fallback file, the target's status."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = record(env, tmp_path, str(fifo))  # proftui() times out after 120 s
    assert (result.returncode, result.stdout) == (2, TARGET_OUT)
    [line] = proftui_lines(result)
    assert f"{fifo}: a FIFO with no reader" in line and "saved to" in line, line
    [fallback] = list(tmp_path.glob("proftui-*.proftui"))
    assert storage.load(fallback).meta.exit_status == 2
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_record_refuses_another_users_symlink_in_a_sticky_directory(tmp_path: Path,
                                                                    env) -> None:
    """Issue 26: `record -o /tmp/victim.proftui` where another user made victim.proftui a
    symlink to a file of ours: refused before the target starts, the file untouched."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a symlink to another user (lchown)")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    link = shared / "victim.proftui"
    link.symlink_to(precious)
    os.lchown(link, 65534, 65534)
    assert_not_started(record(env, tmp_path, str(link)), "refusing to follow a symlink")
    assert precious.read_text() == "keep me\n"


def test_export_to_dev_stdout_when_stdout_is_a_pipe(tmp_path: Path, env) -> None:
    """Issue 26: /dev/stdout resolved (realpath) to /proc/PID/fd/pipe:[N], no such file."""
    profile_path = tmp_path / "run.proftui"
    assert record(env, tmp_path, str(profile_path)).returncode == 2
    result = proftui(env, tmp_path, "export", "-f", "folded", "-o", "/dev/stdout",
                     str(profile_path))  # capture_output: stdout is a pipe
    assert result.returncode == 0, result.stderr
    assert result.stdout.encode() == export_bytes(storage.load(profile_path), "folded")
