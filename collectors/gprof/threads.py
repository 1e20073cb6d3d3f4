"""Whether a gprof target is multithreaded, and what gprof measures then.

Measured on glibc 2.36 (tests/fixtures/gp_threads.c, 4 threads): the
histogram holds every thread's CPU time (ITIMER_PROF counts the whole process
and the SIGPROF handler reads the pc of the thread it interrupts), with no
way to tell threads apart; glibc's mcount skips a call made while another
thread is inside mcount, so call counts come out low (7% of the calls were
lost in one run); and a thread's start function has no recorded caller (it is
called from start_thread, outside the program's text).

Two signals, either is enough: the program imports a thread-creating
function, or /proc/PID/task showed more than one thread while it ran
(TargetWatch in watch.py polls it).
"""

from __future__ import annotations

from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

# Imports that start threads: POSIX and C11 threads, std::thread, OpenMP.
THREAD_STARTERS = ("pthread_create", "thrd_create", "_ZNSt6thread15_M_start_thread",
                   "GOMP_parallel", "__kmpc_fork_call")

THREADS_NOTE = ("multithreaded program ({why}): gprof's histogram adds up every thread's "
                "CPU time with no split per thread, glibc's mcount drops calls made while "
                "another thread is inside it (call counts and the call tree's shares are "
                "too low), and thread start functions show no caller; use the sampler mode "
                "(--mode sampler) for per-thread profiles")


def thread_starter(path: Path) -> str | None:
    """The first thread-creating function `path` imports (or defines, when static)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            for section_name in (".dynsym", ".symtab"):
                table = elf.get_section_by_name(section_name)
                if not isinstance(table, SymbolTableSection):
                    continue
                for sym in table.iter_symbols():
                    if sym.name.startswith(THREAD_STARTERS):
                        return sym.name.split("@", 1)[0]
    except (OSError, ELFError, ValueError):
        return None
    return None


def threads_note(program: Path, most_seen: int) -> str | None:
    """The warning for a multithreaded target, or None."""
    if most_seen > 1:
        return THREADS_NOTE.format(why=f"{most_seen} threads seen at once")
    starter = thread_starter(program)
    if starter is not None:
        return THREADS_NOTE.format(why=f"it can start threads: it calls {starter}")
    return None
