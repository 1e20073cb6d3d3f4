"""What an agent run counted beside its stacks (`Tally`), and the notes that say what
its profile does not hold."""

from __future__ import annotations

from dataclasses import dataclass, field

from proftui.collectors.attach import notes as attach_notes
from proftui.collectors.runtime.wire_attach import Buffers
from proftui.collectors.wording import count, verb

MAX_SYMBOL_NOTES = 20  # of the symbolizers' notes (a host has many files without debug info)


@dataclass
class Tally:
    """An agent run's counts of samples (of the processes the filter keeps, unless said)."""

    samples: int = 0
    sampled: set[int] = field(default_factory=set)  # keys of the processes they came from
    skipped: int = 0  # of processes the filter leaves out
    cut: int = 0  # with an incomplete stack
    unreadable: int = 0  # of those, whose stack could not be read at all
    lost: int = 0  # in the rings or the helper's table
    lost_table: int = 0  # of those, in the helper's table
    late: int = 0  # came after their process's last push
    forgets: int = 0  # FORGETs the helper did (--max-stacks)
    # (pid, program before, program after) of a pid sampled in two address spaces (exec,
    # or a pid reused): one process of the host profile, pushed apart.
    shared_pids: list[tuple[int, str, str]] = field(default_factory=list)

    def notes(self, buffers: Buffers | None, symbol_notes: list[str], *, keep_profile: bool,
              filter_names: list[str], max_stacks: int) -> list[str]:
        """What the profile does not hold, and what the run did to it, said."""
        notes = attach_notes.lost_warnings(self.lost, self.lost_table, buffers)
        notes.extend(attach_notes.cut_warnings(self.cut, self.samples, self.unreadable))
        notes.extend(symbol_notes[:MAX_SYMBOL_NOTES])
        if len(symbol_notes) > MAX_SYMBOL_NOTES:
            notes.append(f"... and {len(symbol_notes) - MAX_SYMBOL_NOTES} more notes on "
                         "symbols")
        if self.late:
            notes.append(f"{count(self.late, 'sample')} came after their process's last "
                         f"push and {verb(self.late, 'is', 'are')} not in the profile")
        if self.shared_pids and keep_profile:
            pids = len(self.shared_pids)
            shown = ", ".join(f"pid {pid}: {before} then {after}"
                              for pid, before, after in self.shared_pids[:5])
            more = f", and {pids - 5:,} more" if pids > 5 else ""
            notes.append(f"{count(pids, 'pid')} ran two programs in turn, "
                         f"by exec or reuse ({shown}{more}): this profile shows each as one "
                         "process and its threads, named after the last program (the fleet "
                         "server keeps them apart)")
        if self.forgets:
            notes.append(f"the agent forgot the stacks it held {count(self.forgets, 'time')} "
                         f"(at {max_stacks:,}, --max-stacks), after pushing their costs, "
                         "to bound its memory: nothing is lost")
        if self.skipped:
            which = ", ".join(filter_names)
            notes.append(f"{count(self.skipped, 'sample')} of processes outside the filter "
                         f"({which}) {verb(self.skipped, 'is', 'are')} not in the profile")
        return notes
