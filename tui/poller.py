"""The live update loop: snapshots of a running collector, paced, off the UI thread.

A worker thread of the app runs `Poller.run`.  It takes a snapshot when the
collector's data moved (`data_version()`; nothing is recomputed while paused or
while the target sleeps), every POLL_INTERVAL_S at most and less often when the
snapshots or drawing them cost more than their budget, computes the views the
panes show off the UI thread, and posts one `Snapshot` message; the process is
sampled once a second (`ProcUpdate`).  Once the target has ended it takes the
final profile (`collector.wait()`, carrying the exit status) and stops.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Protocol

from proftui.collectors.base import Collector
from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import FlatEntry
from proftui.collectors.runtime.launch import ExitInfo
from proftui.collectors.runtime.process_status import ProcSampler, ProcStat
from proftui.tui.diffstate import Views
from textual.message import Message

POLL_INTERVAL_S = 0.33  # snapshots per second: ~3
PROC_INTERVAL_S = 1.0  # psutil samples per second: 1
# At most this share of one CPU for the poll worker's snapshots: a huge profile is
# refreshed less often rather than starve the target (the observer must stay light).
POLL_MAX_DUTY = 0.08
# The whole app's CPU (drawing included) the refresh rate aims at: above it, live
# views refresh less often, in proportion, down to once every POLL_SLOWEST_S.
POLL_CPU_BUDGET = 0.10
POLL_SLOWEST_S = 2.0


@dataclass
class Snapshot(Message):
    """A profile from the poll worker (final=True once the target has ended)."""

    profile: Profile | None
    entries: list[FlatEntry]
    exit: ExitInfo | None
    final: bool
    error: str = ""
    part: str | None = None  # the thread or process `entries` are of
    views: Views | None = None  # `profile` as the panes show it (baseline, since the mark)
    marked_at: float | None = None  # Unix time: this snapshot was taken for a `b` mark


@dataclass
class ProcUpdate(Message):
    stat: ProcStat


@dataclass
class TargetEnded(Message):
    """The target has ended; its final profile is being read (seconds on a big run)."""

    exit: ExitInfo | None


class PollOwner(Protocol):
    """What the loop needs of the app (called from the worker thread)."""

    frozen: bool  # the display is frozen: take no snapshot

    def take_mark_request(self) -> bool: ...

    def snapshot_views(self, profile: Profile) -> tuple[str | None, Views]: ...

    def post_message(self, message: Message) -> bool: ...


class Poller:
    """The pacing and the counters of one live session (read by tests)."""

    def __init__(self, collector: Collector, owner: PollOwner) -> None:
        self.collector = collector
        self.owner = owner
        self.snapshots_taken = 0  # snapshots computed (not skipped)
        self.rounds = 0  # poll rounds done
        self.shown_version: object | None = None  # data_version() last snapshotted

    def run(self, stop: threading.Event, wake: threading.Event) -> None:
        """Poll until `stop` is set or the target ended; `wake` ends a wait early."""
        collector, owner = self.collector, self.owner
        sampler = ProcSampler(collector.pid) if collector.pid is not None else None
        last_proc = 0.0
        shown: object | None = None  # data_version() of the last snapshot taken
        next_snapshot = 0.0  # monotonic time before which no snapshot is taken
        share = 0.0  # the app's recent CPU use, in CPUs (smoothed)
        last_cpu, last_wall = time.process_time(), time.monotonic()
        while not stop.is_set():
            self.rounds += 1
            started = time.monotonic()
            cpu = time.process_time()
            if started > last_wall:
                share = 0.7 * share + 0.3 * (cpu - last_cpu) / (started - last_wall)
            last_cpu, last_wall = cpu, started
            info = collector.exit_info()
            ended = info is not None or not collector.is_running()
            if ended:  # say so now: reading the final profile can take a while
                owner.post_message(TargetEnded(info))
                if sampler is not None:
                    owner.post_message(ProcUpdate(sampler.sample()))
            version = None if ended or owner.frozen else collector.data_version()
            # A `b` mark wants the profile as it is now, not the last one shown (which
            # can be seconds old when snapshots are paced): take one at once.
            marking = not ended and owner.take_mark_request()
            if ended or marking or (not owner.frozen and started >= next_snapshot
                                    and (version is None or version != shown)):
                worker_cpu = time.thread_time()
                taken = time.time()
                try:
                    profile = collector.wait() if ended else collector.snapshot()
                    info = collector.exit_info() if ended else info
                    # the user may choose another part meanwhile: on_snapshot checks
                    part, views = owner.snapshot_views(profile)
                    owner.post_message(Snapshot(profile, views.entries, info, ended, part=part,
                                                views=views,
                                                marked_at=taken if marking else None))
                    shown = self.shown_version = version
                except (ProftuiError, OSError, ValueError) as exc:
                    owner.post_message(Snapshot(None, [], info, ended, str(exc)))
                self.snapshots_taken += 1
                next_snapshot = started + max(
                    POLL_INTERVAL_S, (time.thread_time() - worker_cpu) / POLL_MAX_DUTY,
                    min(POLL_SLOWEST_S, POLL_INTERVAL_S * share / POLL_CPU_BUDGET))
            if sampler is not None and not ended and started - last_proc >= PROC_INTERVAL_S:
                last_proc = started
                owner.post_message(ProcUpdate(sampler.sample()))
            if ended:
                return
            # Look again at the next allowed snapshot, or for the process pane's
            # once-a-second sample, whichever comes first.
            when = max(next_snapshot, started + POLL_INTERVAL_S)
            if sampler is not None:
                when = min(when, last_proc + PROC_INTERVAL_S)
            wake.wait(max(0.05, when - time.monotonic()))
            wake.clear()
