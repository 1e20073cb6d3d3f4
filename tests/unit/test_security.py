"""What proftui reads and writes for itself, against hostile paths (issue 14).

The source gate (collectors/model/sourcefiles.py), the symbol cache
directory checks (collectors/symbols/cachedir.py) and the output writer
(collectors/safefile.py), each on files made here.
"""

from __future__ import annotations

import itertools
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from proftui.collectors import safefile as outfile
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta
from proftui.collectors.model.sourcefiles import (
    MAX_SOURCE_READ,
    ORIGINS,
    Reader,
    own_reader,
    process_reader,
    read_source,
    reader_of,
    source_text,
)
from proftui.collectors.model.storage import gather_sources
from proftui.collectors.symbols.cachedir import CacheDir

NOBODY = Reader(65534, 65534, frozenset({65534}))
_keys = itertools.count()


def named(root: Path, *files: Path) -> None:
    """As a symbolizer does: a unit compiled in `root` named `files`."""
    key = f"test-module-{next(_keys)}"
    ORIGINS.note_module(key, lambda: frozenset({str(root)}))
    for file in files:
        ORIGINS.note_path(str(file), key)


def test_only_files_under_the_units_roots(tmp_path: Path) -> None:
    build, elsewhere = tmp_path / "build", tmp_path / "elsewhere"
    build.mkdir()
    elsewhere.mkdir()
    ok, secret = build / "ok.c", elsewhere / "secret.txt"
    ok.write_text("int x;\n")
    secret.write_text("password\n")
    escape = build / "escape.c"
    escape.symlink_to(secret)  # inside the root by name, outside by target
    named(build, ok, secret, escape)
    me = own_reader()
    assert read_source(str(ok), me) == "int x;\n"
    assert read_source(str(secret), me) is None
    assert read_source(str(escape), me) is None
    unnamed = build / "unnamed.c"
    unnamed.write_text("int y;\n")
    assert read_source(str(unnamed), me) is None  # no debug info named it: never saved
    # ...but the source pane shows the user's own readable file of a profile read from disk
    assert read_source(str(unnamed), me, need_origin=False) == "int y;\n"
    assert read_source(str(unnamed), NOBODY, need_origin=False) is None
    assert read_source("ok.c", me, need_origin=False) is None  # relative: never
    assert read_source(str(ok), None) is None  # owner unknown: nothing


def test_sources_that_are_not_plain_files_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.c"
    os.mkfifo(fifo)
    big = tmp_path / "big.c"
    big.write_bytes(b"x" * (MAX_SOURCE_READ + 1))
    binary = tmp_path / "bin.c"
    binary.write_bytes(b"\x7fELF\0\0")
    named(tmp_path, fifo, big, binary, Path("/dev/zero"))
    named(Path("/dev"), Path("/dev/zero"))
    started = time.monotonic()
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(read_source(str(fifo), own_reader())),
                              daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done == [None] and time.monotonic() - started < 10, "a FIFO must not block"
    for path in (big, binary, Path("/dev/zero")):
        assert read_source(str(path), own_reader()) is None, path


def test_owner_permissions_decide(searchable_dir: Path) -> None:
    """Another owner (attach by root to a user's process): mode bits on the file and
    search permission on each directory above it, as that user."""
    if own_reader().uid == NOBODY.uid:
        pytest.skip("running as uid 65534 itself")
    tmp_path = searchable_dir
    public, private = tmp_path / "public.c", tmp_path / "private.c"
    public.write_text("public\n")
    private.write_text("private\n")
    public.chmod(0o644)
    private.chmod(0o600)
    hidden_dir = tmp_path / "hidden"
    hidden_dir.mkdir(mode=0o700)
    hidden = hidden_dir / "h.c"
    hidden.write_text("hidden\n")
    hidden.chmod(0o644)
    named(tmp_path, public, private, hidden)
    assert read_source(str(public), NOBODY) == "public\n"
    assert read_source(str(private), NOBODY) is None
    assert read_source(str(hidden), NOBODY) is None
    group = Reader(65534, 65534, frozenset({65534, os.stat(private).st_gid}))
    private.chmod(0o640)
    assert read_source(str(private), group) == "private\n"
    assert read_source(str(private), own_reader()) == "private\n"


def test_a_file_everyone_may_read_is_read_wherever_it_lies(searchable_dir: Path) -> None:
    """No debug info named it, it lies under no unit's root, the owner is unknown or
    another user: a file readable by others under directories searchable by others leaks
    nothing (a system header).  Take one of those bits away and the gate is back."""
    header = searchable_dir / "include" / "tree.h"
    header.parent.mkdir(mode=0o755)
    header.write_text("template <class T> struct tree;\n")
    header.chmod(0o644)
    for reader in (own_reader(), NOBODY, None):
        assert read_source(str(header), reader) == "template <class T> struct tree;\n"
    header.chmod(0o640)
    assert read_source(str(header), NOBODY) is None
    header.chmod(0o644)
    header.parent.chmod(0o750)  # others cannot reach it
    try:
        assert read_source(str(header), NOBODY) is None
        assert read_source(str(header), None) is None
    finally:
        header.parent.chmod(0o755)
    for pseudo in ("/proc/self/cmdline", "/proc/version", "/sys/kernel/osrelease"):
        assert read_source(pseudo, own_reader(), need_origin=False) is None, pseudo


def test_attach_profiles_use_the_targets_owner(tmp_path: Path) -> None:
    if own_reader().uid == NOBODY.uid:
        pytest.skip("running as uid 65534 itself")
    private = tmp_path / "private.c"
    private.write_text("secret\n")
    private.chmod(0o600)
    named(tmp_path, private)
    pid = 2 ** 22 + 12345  # beyond pid_max: never a real process
    ORIGINS.note_process(pid, NOBODY)
    attach = Profile(ProfileMeta(mode="attach", pids=[pid]), (SAMPLES,))
    attach.frames.intern(Frame("f", module="/bin/x", file=str(private), line=1))
    launched = Profile(ProfileMeta(mode="sampler", pids=[pid]), (SAMPLES,))
    launched.frames.intern(Frame("f", module="/bin/x", file=str(private), line=1))
    assert reader_of("attach", [pid]) == NOBODY
    assert gather_sources(attach) == {}
    assert source_text(attach, str(private)) is None  # the live pane follows the same rule
    assert gather_sources(launched) == {str(private): "secret\n"}
    assert reader_of("attach", []) is None


def test_process_reader_reads_real_ids() -> None:
    me = process_reader(os.getpid())
    assert me is not None
    assert (me.uid, me.gid) == (os.getuid(), os.getgid())
    assert process_reader(2 ** 22 + 1) is None


# -- the symbol cache directory ----------------------------------------------------


def test_cache_dirs_are_created_private(tmp_path: Path) -> None:
    base = tmp_path / "cache"
    base.mkdir(mode=0o700)
    warnings: list[str] = []
    cache = CacheDir(base / "proftui" / "symbols", base, warnings)
    assert not cache.usable()  # not there yet, and not created by a read
    assert not (base / "proftui").exists()
    old = os.umask(0)
    try:
        assert cache.usable(create=True)
    finally:
        os.umask(old)
    for directory in (base / "proftui", base / "proftui" / "symbols"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert warnings == []


@pytest.mark.parametrize("where", ["base", "proftui", "symbols"])
def test_cache_writable_by_others_is_refused_with_one_warning(tmp_path: Path, where: str) -> None:
    base = tmp_path / "shared"
    (base / "proftui" / "symbols").mkdir(parents=True)
    for d in (base, base / "proftui", base / "proftui" / "symbols"):
        d.chmod(0o700)
    {"base": base, "proftui": base / "proftui",
     "symbols": base / "proftui" / "symbols"}[where].chmod(0o777)
    warnings: list[str] = []
    cache = CacheDir(base / "proftui" / "symbols", base, warnings)
    assert not cache.usable() and not cache.usable(create=True)
    [warning] = warnings
    assert "symbol cache not used" in warning and "writable by other users" in warning


def test_cache_symlink_below_the_base_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "cache"
    base.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (base / "proftui").symlink_to(elsewhere)
    warnings: list[str] = []
    assert not CacheDir(base / "proftui" / "symbols", base, warnings).usable(create=True)
    assert len(warnings) == 1 and "not a directory" in warnings[0]


def test_cache_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")
    base = tmp_path / "cache"
    (base / "proftui").mkdir(parents=True, mode=0o700)
    base.chmod(0o700)
    os.chown(base / "proftui", 65534, 65534)
    warnings: list[str] = []
    assert not CacheDir(base / "proftui" / "symbols", base, warnings).usable(create=True)
    assert len(warnings) == 1 and "belongs to another user" in warnings[0]


# -- the output writer ---------------------------------------------------------------


def test_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outfile.os, "fsync", broken_fsync)
    with pytest.raises(ProftuiError, match=r"out.bin: cannot write: No space left on device"):
        outfile.write_output(out, b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"] and out.read_bytes() == b"old"

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(outfile.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        outfile.write_output(out, b"new")
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_new_files_are_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        written = outfile.write_output(tmp_path / "new.bin", b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_output_problems_are_one_line(tmp_path: Path) -> None:
    sock_path = tmp_path / "sock"
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(ProftuiError, match="is a socket"):
            outfile.write_output(sock_path, b"x")
    with pytest.raises(ProftuiError, match="empty output file name"):
        outfile.check_output("")
    with pytest.raises(ProftuiError, match="is a directory"):
        outfile.write_output(tmp_path, b"x")


def test_demo_is_not_built_in_a_cache_others_can_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shared, world-writable XDG_CACHE_HOME could hold someone else's 'demo'
    binary: proftui builds its own in a private directory instead, and says why."""
    from proftui.tui.demo import build_demo

    shared = tmp_path / "shared-cache"
    (shared / "proftui" / "demo").mkdir(parents=True)
    for directory in (shared, shared / "proftui", shared / "proftui" / "demo"):
        directory.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    binary = build_demo("sampler")
    assert not binary.is_relative_to(shared)
    assert stat.S_IMODE(binary.parent.stat().st_mode) == 0o700
    assert "demo cache not used" in capsys.readouterr().err
