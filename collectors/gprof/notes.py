"""One-line explanations of what a gprof run's gmon.out lacks, from what TargetWatch saw.

Three gaps glibc leaves silent:
* no gmon.out at all: the target never ran its exit handlers, or could not
  reach the run directory when they ran (chroot, another user);
* calls into a dlopen'ed `-pg` plugin: glibc's mcount checks only the
  caller's pc against the main program's text, so calls from the program
  into the plugin are recorded with the plugin's address (minus the
  program's load bias) while the plugin's own time and inner calls are not;
* no histogram ticks although calls were counted and CPU time was used: the
  target blocked or ignored SIGPROF, or replaced the ITIMER_PROF timer or
  SIGPROF handler that profil() installs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from proftui.collectors.gprof.analysis import GprofSymbolTable
from proftui.collectors.gprof.gmon import GmonData
from proftui.collectors.gprof.watch import TargetWatch
from proftui.collectors.runtime.launch import ExitInfo
from proftui.collectors.symbols.symbolizer import Symbolizer

NO_TICKS_MIN_CPU_S = 0.2  # 20 expected ticks at glibc's 100 Hz: zero is no accident
MAX_NAMED_ARCS = 4  # calls into other objects named in the warning, the most frequent first


def missing_gmon_message(program: str, exit_info: ExitInfo, watch: TargetWatch | None,
                         run_dir: Path) -> str:
    """Why `program` left no gmon.out: what proftui saw, else every cause it cannot rule out."""
    tail = ("glibc writes gmon.out only at a normal exit, so use the sampler mode "
            "(--mode sampler) for this program")
    if exit_info.signal is not None:
        return f"{program} wrote no gmon.out: it was {exit_info.describe()}; {tail}"
    seen: list[str] = []
    if watch is not None and watch.new_root is not None:
        seen.append(f"it changed its root directory to {watch.new_root} (chroot), where the "
                    "run directory proftui gave it in GMON_OUT_PREFIX does not exist")
    if watch is not None and watch.fsuid is not None and not _writable_by(run_dir, watch.fsuid):
        seen.append(f"it switched to user id {watch.fsuid}, which cannot write proftui's "
                    "private run directory")
    if seen:
        why = " and ".join(seen)
        return f"{program} wrote no gmon.out: it {exit_info.describe()}, but {why}"
    return (f"{program} wrote no gmon.out: it {exit_info.describe()} without glibc writing "
            "the profile: it ended through _exit() or a crash handler (exit handlers never "
            "ran), or cleared GMON_OUT_PREFIX from its environment (gmon.out then goes to "
            "its working directory), or changed its root or user too briefly for proftui "
            f"to see; {tail}")


def _writable_by(directory: Path, uid: int) -> bool:
    """Whether `uid` can create files in `directory` (owner bits or root; others' bits)."""
    if uid == 0:
        return True
    try:
        info = os.stat(directory)
    except OSError:
        return False
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IWUSR)
    return bool(info.st_mode & stat.S_IWOTH)


def foreign_arcs_note(data: GmonData, table: GprofSymbolTable, program: str,
                      watch: TargetWatch | None) -> str | None:
    """The warning for calls from the program into code outside it (dlopen'ed plugins)."""
    calls: dict[tuple[int, int], int] = {}
    for (from_pc, self_pc), count in data.arcs.items():
        if table.lookup(self_pc) is None and not _in_histogram(data, self_pc):
            calls[(from_pc, self_pc)] = calls.get((from_pc, self_pc), 0) + count
    if not calls:
        return None
    named: dict[str, int] = {}
    objects: set[str] = set()
    base = watch.main_base() if watch is not None else None
    symbolizer = Symbolizer()
    for (from_pc, self_pc), count in sorted(calls.items(), key=lambda kv: -kv[1]):
        caller_index = table.lookup(from_pc)
        caller = table.symbols[caller_index].name if caller_index is not None else "?"
        callee = f"0x{self_pc:x}"
        if watch is not None and base is not None:
            resolved = watch.space.resolve(self_pc + base)
            if resolved is not None:
                frame = symbolizer.frames(resolved[0], resolved[1],
                                          watch.space.readable_path(resolved[0]))[0]
                objects.add(os.path.basename(resolved[0]))
                callee = f"{frame.function} ({os.path.basename(resolved[0])})"
        key = f"{caller} -> {callee}"
        named[key] = named.get(key, 0) + count
    total = sum(calls.values())
    shown = "; ".join(f"{key}: {count}" for key, count in list(named.items())[:MAX_NAMED_ARCS])
    more = len(named) - MAX_NAMED_ARCS
    where = ", ".join(sorted(objects)) if objects else "a shared object (dlopen'ed plugin?)"
    plural = "s" if total != 1 else ""
    return (f"this profile lacks {total} call{plural} from {os.path.basename(program)} into "
            f"{where} ({shown}{f'; {more} more' if more > 0 else ''}): glibc's gprof times and "
            f"counts only the main program's own code, so the time spent in {where} and the "
            "calls made inside it were not recorded (gprof drops them too); use the sampler "
            "mode (--mode sampler) to profile the plugin")


def _in_histogram(data: GmonData, pc: int) -> bool:
    return any(h.low_pc <= pc < h.high_pc for h in data.histograms)


def no_ticks_note(data: GmonData, watch: TargetWatch | None) -> str | None:
    """The warning for a run whose calls were counted but whose CPU time was not sampled."""
    if watch is None or not data.arcs:
        return None
    if any(any(h.counts) for h in data.histograms):
        return None
    if watch.cpu_s < NO_TICKS_MIN_CPU_S:
        return None
    head = (f"gmon.out counted {sum(data.arcs.values())} calls but holds no time samples "
            f"although the target used {watch.cpu_s:.2f} s of CPU: all times read 0.00; ")
    if watch.sigprof_blocked:
        return head + ("it blocked SIGPROF in every thread (seen in /proc), so glibc's "
                       "profil() never sampled; keep SIGPROF unblocked or use the sampler "
                       "mode (--mode sampler)")
    if watch.sigprof_ignored:
        return head + ("it set SIGPROF to be ignored (seen in /proc), so glibc's profil() "
                       "never sampled; use the sampler mode (--mode sampler)")
    return head + ("most likely it set its own ITIMER_PROF timer or SIGPROF handler "
                   "(setitimer, sigaction, a profiler library), replacing the ones glibc's "
                   "profil() installs, or blocked SIGPROF too briefly for proftui to see; "
                   "less likely, it spent all of its time in shared libraries or the kernel; "
                   "use the sampler mode (--mode sampler)")
