"""The agent's host profile (`HostProfile`): every process of the run together, for `-o`
and `--all`, one part per thread ("pid P tid T")."""

from __future__ import annotations

from array import array

from proftui.collectors.agent.process import METRICS, AgentProcess
from proftui.collectors.model.profile import Profile, ProfileMeta
from proftui.collectors.stacktable.builder import StackProfile


class HostProfile:
    """Every process's stacks and costs in one table: a process's own table is folded in
    as its costs move (or is this table, when no process keeps one apart)."""

    def __init__(self) -> None:
        self.table = StackProfile(METRICS)
        self._index: dict[tuple[int, int], int] = {}  # (process key, its index) -> ours
        self._frames: dict[int, list[int]] = {}  # process key -> its frame id -> ours
        self._threads: dict[int, str] = {}  # names by tid, programs by pid (meta.threads)

    def fold(self, processes: list[AgentProcess]) -> None:
        """Take these processes' stacks and the costs that moved (`unfolded`)."""
        updates = []
        intern = self.table.frames.intern
        for process in processes:
            table = process.table
            ids = self._frames.setdefault(process.key, [])
            frames = table.frames
            ids.extend(intern(frames[f]) for f in range(len(ids), len(frames)))
            unfolded = sorted(process.unfolded)
            new = [i for i in unfolded if (process.key, i) not in self._index]
            if new:
                labels, flat, offsets = table.stack_paths(new)
                mapped = array("i", [ids[f] for f in flat])  # our frame ids
                for j, index in enumerate(new):
                    self._index[(process.key, index)] = self.table.stack_of_ids(
                        (process.key, index), labels[j], mapped[offsets[j]:offsets[j + 1]],
                        table.stack_site(index), (table, index))
            for index in unfolded:
                updates.append((self._index[(process.key, index)],
                                [c[index] for c in table.costs]))
            process.unfolded.clear()
        self.table.set_many(updates)

    def name_threads(self, process: AgentProcess) -> None:
        """Thread names by tid, and the process's program by its pid: the picker (`t`)
        names processes by pid and threads by tid."""
        self._threads.update(process.threads)
        self._threads[process.pid] = process.program

    def release(self, process: AgentProcess) -> None:
        """`process` is folded in for the last time: its frame map goes."""
        self._frames.pop(process.key, None)

    def snapshot(self, meta: ProfileMeta) -> Profile:
        meta.threads = dict(self._threads)
        return self.table.snapshot(meta)
