"""Source text in saved profiles and the symbol cache, end to end (issue 14).

A target's DWARF names a file outside its build directory (`#line`), or a
file its owner cannot read: neither may end up in the saved profile, while
the program's own source still does.  A shared symbol cache is not used.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.model import storage

SOURCE = """\
#include <stdio.h>
static volatile double sink;
__attribute__((noinline)) static void own_work(long n) {
    double x = sink;
    for (long i = 0; i < n; i++) x = x * 0.9999999 + 1.5;
    sink = x;
}
#line 1 "@NAMED@"
__attribute__((noinline)) static void named_work(long n) {
    double x = sink;
    for (long i = 0; i < n; i++) x = x * 0.9999998 + 2.5;
    sink = x;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? 40000000L : 0;
    for (int r = 0; r < (argc > 2 ? 1000 : 1); r++) { own_work(n); named_work(n); }
    puts("done");
    return 5;
}
"""


def build(directory: Path, named: Path) -> tuple[Path, Path]:
    """prog.c compiled in `directory` (its compile dir), one function's lines in `named`."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    source = directory / "prog.c"
    source.write_text(SOURCE.replace("@NAMED@", str(named)))
    binary = directory / "prog"
    subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(binary),
                    "prog.c"], cwd=directory, check=True, capture_output=True)
    return binary, source


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(tmpdir), **(env or {})})
    assert "Traceback" not in result.stderr, result.stderr
    assert list(tmpdir.iterdir()) == []
    return result


def named_files(profile_path: Path) -> set[str]:
    profile = storage.load(profile_path)
    return {f.file for f in profile.frames if f.file} | {p for p, _ in profile.line_costs}


def test_file_outside_the_build_directory_is_not_embedded(tmp_path: Path) -> None:
    build_dir, secret_dir = tmp_path / "build", tmp_path / "secret"
    build_dir.mkdir()
    secret_dir.mkdir()
    secret = secret_dir / "key.txt"
    secret.write_text("not for the profile\n" * 20)
    binary, source = build(build_dir, secret)
    out = tmp_path / "run.proftui"
    result = run_cli(tmp_path, "record", "-o", str(out), str(binary), "go")
    assert (result.returncode, result.stdout) == (5, "done\n"), result.stderr
    assert {str(source), str(secret)} <= named_files(out)  # the DWARF names both
    sources = storage.load(out).sources
    assert str(source) in sources and str(secret) not in sources
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_attach_as_root_embeds_only_what_the_targets_owner_can_read(
        tmp_path: Path, searchable_dir: Path) -> None:
    """Root attaches to a process of uid 65534 whose DWARF names a root-only file in
    its own build directory: the profile gets the program's source, not that file."""
    if os.geteuid() != 0:
        pytest.skip("needs root (attach by root to another user's process)")
    private = searchable_dir / "private.txt"
    private.write_text("root only\n" * 20)
    private.chmod(0o600)
    binary, source = build(searchable_dir, private)
    source.chmod(0o644)
    binary.chmod(0o755)

    def drop() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)

    target = subprocess.Popen([str(binary), "go", "long"], stdout=subprocess.PIPE,
                              preexec_fn=drop)
    try:
        time.sleep(0.3)
        out = tmp_path / "attach.proftui"
        result = run_cli(tmp_path, "attach", str(target.pid), "--duration", "1.5",
                         "-o", str(out))
        assert result.returncode == 0 or out.exists(), result.stderr
    finally:
        target.kill()
        target.wait()
    assert str(private) in named_files(out), "the DWARF names the private file"
    sources = storage.load(out).sources
    assert str(source) in sources and str(private) not in sources
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_world_writable_cache_is_not_used(tmp_path: Path) -> None:
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    binary, _source = build(build_dir, build_dir / "named.c")
    shared = tmp_path / "shared-cache"
    (shared / "proftui" / "symbols").mkdir(parents=True)
    shared.chmod(0o777)
    out = tmp_path / "run.proftui"
    result = run_cli(tmp_path, "record", "-o", str(out), str(binary), "go",
                     env={"XDG_CACHE_HOME": str(shared)})
    assert result.returncode == 5, result.stderr
    warnings = storage.load(out).meta.warnings
    assert [w for w in warnings if "symbol cache not used" in w] == [
        f"symbol cache not used: {shared} is writable by other users (mode 777)"]
    assert list((shared / "proftui" / "symbols").iterdir()) == []  # nothing written there
    assert {"own_work", "named_work"} <= {f.function for f in storage.load(out).frames}


def pyelftools_roots(path: Path) -> frozenset[str]:
    """The same roots read with pyelftools (slow, but an independent reader)."""
    from elftools.elf.elffile import ELFFile

    roots: set[str] = set()
    with open(path, "rb") as f:
        for unit in ELFFile(f).get_dwarf_info(relocate_dwarf_sections=False).iter_CUs():
            attributes = unit.get_top_DIE().attributes
            comp_dir = attributes["DW_AT_comp_dir"].value.decode() \
                if "DW_AT_comp_dir" in attributes else None
            name = attributes["DW_AT_name"].value.decode() if "DW_AT_name" in attributes else None
            if comp_dir:
                roots.add(os.path.normpath(comp_dir))
            if name:
                roots.add(os.path.dirname(os.path.normpath(os.path.join(comp_dir or "", name))))
    return frozenset(r for r in roots if os.path.isabs(r))


@pytest.mark.parametrize("flags", [["-gdwarf-4"], ["-gdwarf-5"], ["-gdwarf-2"],
                                   ["-gsplit-dwarf"], ["-gz=zlib"]],
                         ids=lambda f: f[0])
def test_source_roots_agree_with_pyelftools(tmp_path: Path, flags: list[str]) -> None:
    from proftui.collectors.symbols.compdirs import source_roots

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src_dir, build_dir = tmp_path / "src", tmp_path / "build"
    src_dir.mkdir()
    build_dir.mkdir()
    (src_dir / "a.c").write_text("int a(int x) { return x * 3; }\n")
    (src_dir / "main.c").write_text("int a(int);\nint main(void) { return a(1); }\n")
    binary = build_dir / "prog"
    result = subprocess.run(["gcc", "-O1", "-g", *flags, "-o", str(binary), "../src/a.c",
                             "../src/main.c"], cwd=build_dir, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"gcc {' '.join(flags)} failed: {result.stderr.strip()[:200]}")
    ours = source_roots(str(binary))
    assert ours == pyelftools_roots(binary)
    # out-of-tree: both roots (a split-DWARF skeleton unit names no source file)
    expected = {str(build_dir)} if "-gsplit-dwarf" in flags else {str(build_dir), str(src_dir)}
    assert ours == expected
