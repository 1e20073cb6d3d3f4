"""One address space the agent samples (`AgentProcess`): its mappings, symbols, stack
table and counts, the labels it is pushed under, and its generated code's names."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from proftui.collectors.attach.stacks import StackKey
from proftui.collectors.model.profile import CPU_NS, SAMPLES
from proftui.collectors.stacktable.builder import StackProfile
from proftui.collectors.symbols.elf import executable_build_id
from proftui.collectors.symbols.maps import AddressSpace
from proftui.collectors.symbols.stacks import StackFrames

METRICS = (SAMPLES, CPU_NS)
COMM_CHARS = 15  # a task's name is cut to this many characters (TASK_COMM_LEN - 1)


def process_table() -> StackProfile:
    """A table of one process's own: read stack by stack (the pusher, the host profile's
    fold, which keeps its own costs per source line), so it keeps none; stacks that
    differ only in addresses no view shows are one."""
    return StackProfile(METRICS, code_costs=False, merge_equal=True)


@dataclass
class AgentProcess:
    """One address space the agent sampled: a process from its first sample (or its
    exec) until it exits or execs again."""

    key: int  # the collector's own number for it, unique in the run
    pid: int
    exe: str
    user: str
    wanted: bool  # passes --program / --user
    space: AddressSpace
    frames: StackFrames
    table: StackProfile = field(default_factory=process_table)
    # A stack is known by the helper's id of its first STACK record ("canonical"): counts
    # then hash an int, not the tuple of addresses (a tid reused by a new thread of the
    # process sends the same stack again, under another id).
    sids: dict[StackKey, int] = field(default_factory=dict)  # stack -> canonical id
    keys: dict[int, StackKey] = field(default_factory=dict)  # canonical id -> stack
    index_of: dict[int, int] = field(default_factory=dict)  # canonical id -> table's index
    counts: dict[int, list[float]] = field(default_factory=dict)  # by id, since the last apply
    samples: int = 0  # all it was counted so far
    threads: dict[int, str] = field(default_factory=dict)  # tid -> name
    gone: bool = False  # exited, or exec'd into another address space
    gone_at: float = 0.0  # time.monotonic() when it went
    released: bool = False  # its last changes were pushed: its table is dropped
    renew: bool = False  # the helper forgot its stacks: a new table once this one is pushed
    unfolded: set[int] = field(default_factory=set)  # stacks moved since the host took them
    implicit: bool = False  # known from a TASK record alone, so far (_fill_in)
    build: str | None = None  # the executable's build-id, read once
    comm: str = ""  # its name from /proc/PID/comm, when its executable may not be read
    uid: int = -1  # its effective uid when first seen (-1: gone by then)

    @property
    def program(self) -> str:
        """Its executable's name; else the name it gives itself (comm: a process of a
        user the agent may not inspect); else "pid N"."""
        return os.path.basename(self.exe) if self.exe else self.comm or f"pid {self.pid}"

    def read_build(self) -> None:
        """Its executable's build-id, read now that its path is known, while
        /proc/PID/exe holds it (the file may be gone by the first push)."""
        if self.build is None and self.exe:
            self.build = executable_build_id(self.pid, self.exe)

    def labels(self) -> dict[str, str]:
        """The labels its fleet rows carry (beside the host's and the user's)."""
        if self.build is None:
            self.build = executable_build_id(self.pid, self.exe)
        labels = {"program": self.program, "pid": str(self.pid), "build": self.build}
        if self.user:
            labels["user"] = self.user
        return labels


def watch_jit(process: AgentProcess) -> None:
    """Name `process`'s generated code from its perf map and jitdump files (its first
    address outside every ELF file came): read through its root, aged by its start,
    owned by its user as first seen, as `--pid` does; once it is gone, from our /tmp,
    not aged."""
    if process.uid < 0:  # gone before it was seen: whose files to trust is unknown
        return
    alive = not process.gone and os.path.exists(f"/proc/{process.pid}")
    process.frames.watch_jit(process.pid, process.uid, alive)


def truncated_name_of(comm: str, programs: frozenset[str]) -> bool:
    """Whether `comm` is one of `programs` cut to the kernel's 15 characters."""
    return len(comm) == COMM_CHARS and any(p[:COMM_CHARS] == comm for p in programs)
