"""A module that cannot be opened is said in one line, and only a process that exited
first leaves it unsettled: a container's files are read through each process's own
/proc/PID/root, so the next process of that container may still read them."""

from __future__ import annotations

import errno
import os
import subprocess

from proftui.collectors.symbols.elf import ElfFile
from proftui.collectors.symbols.maps import unreadable_reason
from proftui.collectors.symbols.symbolizer import Symbolizer

from tests.conftest import build_fixture


def _gone_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    assert not os.path.exists(f"/proc/{child.pid}")
    return child.pid


def test_a_file_through_an_exited_process_is_read_through_the_next_one() -> None:
    binary = str(build_fixture("smp_work.c", ["-O1", "-g"]))
    with ElfFile(binary) as elf:
        symtab = elf.section(".symtab")
        assert symtab is not None
        main = next(value for value, _size, _bind, name in elf.function_symbols(symtab)
                    if name == "main")
    symbols = Symbolizer(use_cache=False)
    pid = _gone_pid()
    first = symbols.frame(binary, main, f"/proc/{pid}/root{binary}")
    assert first.function == f"{os.path.basename(binary)}+0x{main:x}"
    assert symbols.warnings == [f"{binary}: pid {pid} exited before this file could be read "
                                f"through /proc/{pid}/root"]
    again = symbols.frame(binary, main, f"/proc/{pid}/root{binary}")
    assert again.function == first.function and len(symbols.warnings) == 1  # not retried
    alive = symbols.frame(binary, main, f"/proc/{os.getpid()}/root{binary}")
    assert alive.function == "main" and alive.line is not None
    assert symbols.frame(binary, main, f"/proc/{pid}/root{binary}").function == "main"


def test_a_process_that_may_not_be_read_names_the_capability() -> None:
    reason, gone = unreadable_reason(
        "/usr/bin/x", f"/proc/{os.getpid()}/root/usr/bin/x",
        PermissionError(errno.EACCES, "Permission denied"))
    assert not gone
    assert reason == (f"/usr/bin/x: cannot be read through /proc/{os.getpid()}/root "
                      "(permission denied: reading another user's process in its own mount "
                      "namespace needs CAP_SYS_PTRACE)")


def test_an_unreadable_vdso_is_said_as_such() -> None:
    reason, gone = unreadable_reason("[vdso]", "[vdso]",
                                     FileNotFoundError(errno.ENOENT, "No such file"))
    assert (reason, gone) == ("[vdso]: the process's memory cannot be read, so its vDSO "
                              "functions are unnamed", False)


def test_other_failures_keep_the_error() -> None:
    reason, gone = unreadable_reason("/x", "/x", ValueError("bad magic"))
    assert (reason, gone) == ("/x: not a readable ELF file (bad magic)", False)
