"""The command line's contract: one-line errors, exit statuses, subcommand words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def proftui(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, stdin=subprocess.DEVNULL)


def assert_one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proftui: "), result.stderr
    assert text in lines[0]


def test_help_explains_modes() -> None:
    result = proftui("--help")
    assert result.returncode == 0
    for word in ("record", "report", "open", "demo", "gprof", "instrument", "sampler"):
        assert word in result.stdout


def test_version_is_printed() -> None:
    from importlib.metadata import version

    result = proftui("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"proftui {version('proftui')}"


def test_missing_program() -> None:
    assert_one_line_error(proftui("./definitely-not-here"), "no such file")
    assert_one_line_error(proftui("definitely-not-a-command-xyz"), "command not found")


def test_not_elf(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    assert_one_line_error(proftui(str(script)), "script")
    data = tmp_path / "data"
    data.write_bytes(b"\0" * 64)
    data.chmod(0o755)
    assert_one_line_error(proftui(str(data)), "not an ELF")


def test_fifo_program_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "prog"
    os.mkfifo(fifo, 0o755)  # nobody writes it: reading its ELF magic would block for ever
    assert_one_line_error(proftui(str(fifo)), "not a regular file")


def test_not_executable(tmp_path: Path) -> None:
    path = tmp_path / "prog"
    path.write_bytes(b"\x7fELF")
    assert_one_line_error(proftui(str(path)), "not executable")


def test_setuid_is_refused(tmp_path: Path, compile_c) -> None:
    binary = compile_c("cli_exit.c", ["-O1"])
    copy = tmp_path / "suid"
    copy.write_bytes(binary.read_bytes())
    copy.chmod(0o4755)
    assert_one_line_error(proftui(str(copy)), "setuid")


def test_corrupt_profile_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.proftui"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert_one_line_error(proftui("report", str(bad)), str(bad))


def test_forced_mode_mismatch(compile_c) -> None:
    binary = compile_c("cli_exit.c", ["-O1"])
    assert_one_line_error(proftui("--mode", "gprof", str(binary)), "-pg")
    assert_one_line_error(proftui("--mode", "instrument", str(binary)),
                          "-finstrument-functions")


def test_options_a_mode_does_not_honour_are_refused(compile_c) -> None:
    """Each mode declares the options it honours (Collector.options_honoured); any other
    one set on the command line is one line, not silently ignored, and nothing runs."""
    binary = str(compile_c("cli_exit.c", ["-O1"]))
    pg = str(compile_c("cli_exit.c", ["-O1", "-pg"], output="cli_exit_pg"))
    for argv, flag, mode in (
            (["--mode", "heap", "--wall", binary], "--wall", "heap"),
            (["--mode", "sampler", "-N", "main", binary], "-N", "sampler"),
            (["--duration", "1", binary], "--duration", "sampler"),
            (["-F", "4000", pg], "-F", "gprof"),
            (["--method", "perf", binary], "--method", "sampler"),
            (["--timed", binary], "--timed", "sampler")):
        assert_one_line_error(proftui("--text", *argv, "0"),
                              f"{flag} does not apply to {mode} mode")
    assert_one_line_error(proftui("--mode", "instrument", "--timed", "--count-only", binary),
                          "exclude each other")


def test_static_binary_in_sampler_mode(compile_c) -> None:
    try:
        binary = compile_c("cli_exit.c", ["-O1", "-static"], output="cli_exit_static")
    except subprocess.CalledProcessError:
        pytest.skip("static libc is not installed (libc6-dev static archives)")
    assert_one_line_error(proftui("--mode", "sampler", str(binary)), "attach")


def test_unknown_option() -> None:
    result = proftui("--no-such-option", "x")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert_one_line_error(result, "--no-such-option")
    assert_one_line_error(proftui("-F", "0", "x"), "between 1 and 10000")
    # A word where a number goes says so, not the name of a function inside proftui.
    assert_one_line_error(proftui("-F", "lots", "x"), "not a whole number of Hz: 'lots'")
    assert_one_line_error(proftui("agent", "--every", "x"), "not a number of seconds")
    assert_one_line_error(proftui("report"), "file")


def test_report_takes_text_as_run_does(tmp_path: Path) -> None:
    """Issue 26: `proftui report --text FILE` exited 2 though text is report's default."""
    from proftui.collectors.model import storage

    from tests.helpers.profiles import sample_profile

    saved = tmp_path / "run.proftui"
    storage.save(sample_profile(), saved)
    plain, text = proftui("report", str(saved)), proftui("report", "--text", str(saved))
    assert (text.returncode, text.stdout) == (0, plain.stdout) and plain.returncode == 0
    assert_one_line_error(proftui("report", "--text", "--json", str(saved)), "not allowed")


def elf32(path: Path) -> Path:
    """A 32-bit x86 ELF executable header asking for /lib/ld-linux.so.2 (never run: the
    refusal comes first; gcc -m32 needs multilib, absent on most machines)."""
    import struct

    interp = b"/lib/ld-linux.so.2\0"
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0x8048000, 52, 0, 0, 52, 32, 1,
                                 40, 0, 0)
    program = struct.pack("<IIIIIIII", 3, 84, 0x8048054, 0x8048054, len(interp), len(interp),
                          4, 1)  # PT_INTERP: dynamically linked
    path.write_bytes(header + program + interp)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("options", [[], ["--mode", "heap"], ["--mode", "instrument"],
                                     ["--heap"]])
def test_32bit_programs_are_refused_in_preloaded_modes(tmp_path: Path,
                                                       options: list[str]) -> None:
    """Issue 26: the 64-bit runtimes cannot be preloaded into a 32-bit program, which then
    ran unprofiled: an empty profile and a misleading warning.  Now one line, status 2."""
    result = proftui("--text", *options, str(elf32(tmp_path / "prog32")))
    assert result.returncode == 2
    assert_one_line_error(result, "is a 32-bit x86 program")
