"""collectors/runtime/notes.py: a runtime's note lines (csrc/common/pt_note.c) become one
true warning each; the file is the target's, so anything else in it is skipped."""

from __future__ import annotations

import errno
from pathlib import Path

from proftui.collectors.runtime.notes import MAX_BYTES, parse_line, read_notes


def test_address_space_limit_is_named() -> None:
    note = parse_line(f"map what=file bytes=1052736 errno={errno.ENOMEM} as=2988 fsize=inf "
                      "nofile=1024", "sampler", 77, "the sampler")
    assert note is not None and note.what == "file" and note.pid == 77
    assert note.text == ("pid 77: the sampler could not map 1.0 MiB for its run file: the "
                         "address-space limit (RLIMIT_AS, ulimit -v) of 2,988 kB is reached; "
                         "the process ran unprofiled from then on")


def test_each_cause_is_its_own() -> None:
    def text(err: int, what: str = "stacks", **limits: str) -> str:
        fields = {"as": "inf", "fsize": "inf", "nofile": "inf", **limits}
        line = f"map what={what} bytes=65536 errno={err} " + " ".join(
            f"{k}={v}" for k, v in fields.items())
        note = parse_line(line, "sampler", 1, "the sampler")
        assert note is not None, line
        return note.text

    assert "out of memory" in text(errno.ENOMEM) and "RLIMIT_AS" not in text(errno.ENOMEM)
    assert "RLIMIT_FSIZE, ulimit -f) is 4,096 kB" in text(errno.EFBIG, fsize="4096")
    assert "RLIMIT_NOFILE 64" in text(errno.EMFILE, nofile="64")
    assert "file system is full" in text(errno.ENOSPC)
    assert "removed or replaced" in text(errno.ESTALE)
    assert "64 KiB for its stack table" in text(errno.ENOMEM)
    assert "samples on stacks first seen after that were dropped" in text(errno.ENOMEM)
    assert "could not create" in text(errno.EFBIG, what="file", fsize="100")


def test_jit_table_cap_is_said_as_a_cap() -> None:
    """csrc/common/pt_jit.c's cap on tables of generated code is its own line, never a
    mapping failure (it once said "the file system is full")."""
    note = parse_line("cap what=jit count=16384 bytes=67108864", "sampler", 9, "the sampler")
    assert note is not None and note.what == "cap-jit"
    assert note.text == ("pid 9: the sampler kept unwind tables for 16,384 pieces of generated "
                         "code (from its jitdump, in at most 64.0 MiB) and no more: code past "
                         "that is walked by frame pointers and the call-stub step (it may be "
                         "cut short)")
    assert parse_line("cap what=jit count=x bytes=1", "sampler", 9, "the sampler") is None
    assert parse_line("cap what=disk count=1 bytes=1", "sampler", 9, "the sampler") is None


def test_file_size_cap_is_said() -> None:
    note = parse_line("fsize what=file bytes=3774873 fsize=4096", "hook", 5,
                      "the hook library")
    assert note is not None and note.what == "fsize"
    assert note.text.startswith("pid 5: the file-size limit (RLIMIT_FSIZE, ulimit -f) of "
                                "4,096 kB kept the hook library's run file to 3.6 MiB")


def test_junk_is_skipped(tmp_path: Path) -> None:
    good = "map what=ring bytes=262224 errno=12 as=9000 fsize=inf nofile=1024\n"
    junk = ["", "map", "map what=evil bytes=1 errno=12", "map what=ring bytes=x errno=12",
            "map what=ring bytes=1 errno=-3", "fsize what=file bytes=1 fsize=inf",
            "\xff\xfe garbage what=ring bytes=1 errno=12 as=1"]
    (tmp_path / "sampler.42.note").write_text("\n".join(junk) + "\n" + good + good)
    (tmp_path / "sampler.x.note").write_text(good)  # not a pid: not a note file
    (tmp_path / "heap.43.note").write_text(good)  # another runtime's
    notes = read_notes(tmp_path, "sampler", "the sampler")
    assert [(n.pid, n.what) for n in notes] == [(42, "ring")]  # once, though written twice
    assert "a thread's sample ring" in notes[0].text and "9,000 kB" in notes[0].text


def test_a_huge_note_file_is_read_in_part(tmp_path: Path) -> None:
    line = "map what=maplog bytes=6144 errno=12 as=100 fsize=inf nofile=1\n"
    (tmp_path / "sampler.9.note").write_text(line * (2 * MAX_BYTES // len(line)))
    assert len(read_notes(tmp_path, "sampler", "the sampler")) == 1
