"""Checks before attaching to a pid, and the real reason when the kernel says no.

Everything here reads /proc and /proc/sys only; messages are one line each,
for ProftuiError.
"""

from __future__ import annotations

import os
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.procfs import proc_status
from proftui.collectors.runtime.tasks import live_task, task_state
from proftui.collectors.runtime.thread_names import read_comm

PF_KTHREAD = 0x00200000  # task flag of kernel threads (/proc/PID/stat field 9)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def process_name(pid: int) -> str:
    return read_comm(f"/proc/{pid}/comm") or "?"  # any bytes, escaped (runtime/thread_names.py)


def check_target(pid: int) -> None:
    """Raise ProftuiError unless `pid` is a live user-space process we may try."""
    if pid <= 0:
        raise ProftuiError(f"invalid pid {pid}")
    if pid == os.getpid():
        raise ProftuiError("proftui cannot attach to itself")
    stat = _read(f"/proc/{pid}/stat")
    status = proc_status(pid)
    if stat is None or not status:
        raise ProftuiError(f"no process with pid {pid}")
    tgid = int(status.get("Tgid", pid) or pid)
    if tgid != pid:
        raise ProftuiError(
            f"pid {pid} is a thread of process {tgid} ({process_name(tgid)}); "
            f"use --pid {tgid} (all its threads are sampled)")
    fields = stat[stat.rfind(")") + 2 :].split()
    state, flags = fields[0], int(fields[6])
    name = process_name(pid)
    if state in ("Z", "X") and live_task(pid) is None:
        raise ProftuiError(
            f"process {pid} ({name}) is a zombie: it has exited and waits for its parent "
            "to reap it, so there is nothing to sample")
    if flags & PF_KTHREAD:
        raise ProftuiError(
            f"process {pid} ({name}) is a kernel thread: it has no user-space code to sample")


def stopped_note(pid: int) -> str | None:
    """One line when every live thread of `pid` is stopped (SIGSTOP, Ctrl-Z):
    it will not be sampled until it continues."""
    live = live_task(pid)
    if live is None or task_state(pid, live) != "T":
        return None
    return (f"process {pid} ({process_name(pid)}) was stopped (SIGSTOP or job control) when "
            "attached: nothing is sampled until it continues (kill -CONT), and it is left "
            "stopped on detach")


def _sysctl(name: str) -> str | None:
    value = _read(f"/proc/sys/{name.replace('.', '/')}")
    return value.strip() if value is not None else None


def _uids(pid: int) -> tuple[int, int]:
    """(real uid of the target, our effective uid)."""
    uid_field = proc_status(pid).get("Uid", "")
    target = int(uid_field.split()[0]) if uid_field else -1
    return target, os.geteuid()


def _has_cap(bit: int) -> bool:
    eff = proc_status(os.getpid()).get("CapEff", "0")
    return bool(int(eff, 16) >> bit & 1)


CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON = 19, 21, 38


def tracer_of(pid: int) -> int:
    """Pid of the process already ptrace-attached to `pid`, or 0."""
    try:
        return int(proc_status(pid).get("TracerPid", "0") or 0)
    except ValueError:
        return 0


def ptrace_denied_reason(pid: int) -> str:
    """Why PTRACE_SEIZE on `pid` fails with EPERM, as precisely as /proc tells."""
    tracer = tracer_of(pid)
    if tracer:
        return (f"process {pid} is already traced by pid {tracer} ({process_name(tracer)}); "
                "only one tracer may attach (detach the debugger, or use --method perf)")
    scope = _sysctl("kernel.yama.ptrace_scope")
    privileged = _has_cap(CAP_SYS_PTRACE)
    if scope == "3":
        return ("ptrace is disabled on this machine (kernel.yama.ptrace_scope=3, "
                "cannot be lowered until reboot); use --method perf")
    if scope == "2" and not privileged:
        return ("kernel.yama.ptrace_scope=2 allows ptrace only with CAP_SYS_PTRACE; "
                "run proftui as root or use --method perf")
    target_uid, our_uid = _uids(pid)
    if target_uid not in (-1, our_uid) and not privileged:
        return (f"process {pid} belongs to uid {target_uid} and you are uid {our_uid}; "
                "attaching needs CAP_SYS_PTRACE (run as root)")
    if scope == "1" and not privileged:
        return ("kernel.yama.ptrace_scope=1 lets a process trace only its own descendants; "
                "run `sudo sysctl kernel.yama.ptrace_scope=0`, run proftui as root, or use "
                "--method perf")
    return ("the kernel refused ptrace (the target may be setuid/non-dumpable, or a security "
            "module such as SELinux/AppArmor denies it)")


def perf_denied_reason(pid: int) -> str:
    """Why perf_event_open on `pid` fails with EACCES/EPERM."""
    paranoid = _sysctl("kernel.perf_event_paranoid")
    target_uid, our_uid = _uids(pid)
    privileged = _has_cap(CAP_PERFMON) or _has_cap(CAP_SYS_ADMIN)
    if paranoid is not None and int(paranoid) > 2 and not privileged:
        return (f"kernel.perf_event_paranoid={paranoid} forbids perf_event_open for "
                "unprivileged users; run `sudo sysctl kernel.perf_event_paranoid=2`, or use "
                "--method ptrace")
    if target_uid not in (-1, our_uid) and not privileged:
        return (f"process {pid} belongs to uid {target_uid} and you are uid {our_uid}; "
                "perf_event_open needs CAP_PERFMON or CAP_SYS_ADMIN for it")
    return (f"perf_event_open was denied (kernel.perf_event_paranoid={paranoid}; "
            "a security module may forbid it); try --method ptrace")


def kernel_time_denied_reason() -> str:
    """Why perf_event counts user time only (exclude_kernel was required)."""
    paranoid = _sysctl("kernel.perf_event_paranoid")
    if os.environ.get("PROFTUI_ATTACH_KERNEL") == "0":
        return "PROFTUI_ATTACH_KERNEL=0 asked perf_event to leave kernel time out"
    return (f"kernel.perf_event_paranoid={paranoid} lets perf_event count kernel time only "
            "at <= 1 or with CAP_PERFMON (run proftui as root, `sudo sysctl "
            "kernel.perf_event_paranoid=1`, or use --method ptrace)")


def explain_failure(pid: int, method: str, helper_text: str) -> str:
    """One line for a failed attach, from the helper's own message and /proc facts."""
    text = helper_text.strip().splitlines()[-1] if helper_text.strip() else "no message"
    if (not Path(f"/proc/{pid}").exists() or live_task(pid) is None
            or "No such process" in text or "has exited" in text):
        return f"process {pid} exited before proftui could attach"
    denied = "Permission denied" in text or "Operation not permitted" in text
    if denied and text.startswith("perf_event_open"):
        return f"cannot sample process {pid} with perf_event: {perf_denied_reason(pid)}"
    if denied and text.startswith("ptrace"):
        prefix = "perf_event_open was denied and " if method == "auto" else ""
        return f"cannot attach to process {pid}: {prefix}{ptrace_denied_reason(pid)}"
    return f"cannot attach to process {pid}: {text}"


def perf_permission_note() -> str:
    """What `--method perf` needs to count time in system calls, and how this machine
    stands, as one clause for the notes of a ptrace profile."""
    paranoid = _sysctl("kernel.perf_event_paranoid")
    if _has_cap(CAP_PERFMON) or _has_cap(CAP_SYS_ADMIN):
        here = "proftui has CAP_PERFMON here"
    elif paranoid is not None and paranoid.lstrip("-").isdigit() and int(paranoid) <= 1:
        here = f"allowed here: kernel.perf_event_paranoid={paranoid}"
    else:
        here = (f"here kernel.perf_event_paranoid={paranoid} and proftui lacks CAP_PERFMON: "
                "perf would count user time only")
    return ("--method perf samples each thread's own clock, system calls included, where "
            "perf may count kernel time: kernel.perf_event_paranoid <= 1, or CAP_PERFMON "
            f"(root) ({here})")
