"""Mode detection against readelf on programs built for each mode."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.detect import GPROF_SYMBOLS, INSTRUMENT_SYMBOLS, inspect_binary
from proftui.collectors.errors import ProftuiError

needs_readelf = pytest.mark.skipif(shutil.which("readelf") is None,
                                   reason="readelf (binutils) missing")


def readelf_facts(binary: Path) -> tuple[str, bool]:
    """(mode, static) as readelf's tables tell them."""
    def run(*args: str) -> str:
        return subprocess.run(["readelf", "-W", *args, str(binary)], capture_output=True,
                              text=True, check=True).stdout

    static = "INTERP" not in run("-l")
    # A dynamic program imports the mode's hooks; a static one defines them.
    table = run("--syms") if static else run("--dyn-syms")
    names = {line.split()[7].split("@")[0] for line in table.splitlines()
             if len(line.split()) >= 8 and line.split()[0].endswith(":")}
    mode = ("instrument" if names & INSTRUMENT_SYMBOLS else
            "gprof" if names & GPROF_SYMBOLS else "sampler")
    return mode, static


def static_works(tmp_path: Path) -> bool:
    source = tmp_path / "s.c"
    source.write_text("int main(void) { return 0; }\n")
    done = subprocess.run(["gcc", "-static", "-o", str(tmp_path / "s"), str(source)],
                          capture_output=True)
    return done.returncode == 0


@needs_readelf
@pytest.mark.parametrize("flags,mode", [
    (["-O2"], "sampler"), (["-O2", "-g"], "sampler"), (["-O2", "-pg"], "gprof"),
    (["-O2", "-pg", "-mfentry"], "gprof"), (["-O2", "-finstrument-functions"], "instrument"),
    (["-O1", "-g", "-static"], "sampler"), (["-O2", "-pg", "-static"], "gprof"),
    (["-O2", "-finstrument-functions", "-static"], "instrument")])
def test_modes_match_readelf(compile_c, tmp_path: Path, flags: list[str], mode: str) -> None:
    if "-static" in flags and not static_works(tmp_path):
        pytest.skip("no static C library (libc.a) to link against")
    binary = compile_c("sym_lines.c", flags)
    facts = inspect_binary(binary)
    assert (facts.mode, facts.static) == readelf_facts(binary)
    assert facts.mode == mode and facts.static == ("-static" in flags)


@needs_readelf
def test_stripped_program(compile_c, tmp_path: Path) -> None:
    binary = tmp_path / "stripped"
    shutil.copy(compile_c("sym_lines.c", ["-O2", "-g", "-pg"]), binary)
    subprocess.run(["strip", "--strip-all", str(binary)], check=True)
    facts = inspect_binary(binary)
    assert (facts.mode, facts.static) == readelf_facts(binary) == ("gprof", False)


def test_bad_files_raise_one_clear_error(compile_c, tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"#!/bin/sh\necho hi\n")
    whole = compile_c("sym_lines.c", ["-O2"]).read_bytes()
    truncated = tmp_path / "truncated"
    truncated.write_bytes(whole[:200])  # headers promise tables past the end
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path in (junk, truncated, empty, tmp_path / "missing"):
        with pytest.raises(ProftuiError, match="not a readable ELF file"):
            inspect_binary(path)
