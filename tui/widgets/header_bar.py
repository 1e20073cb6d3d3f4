"""The one-line header: mode, pid, state, elapsed time (and time since the last reset),
what the diff views compare with, sample count, dropped records.

It draws whatever a profile's metadata holds, so it must not fail on odd but
loadable values: no argv or pids, no exit status, zero or huge totals, start
after end, metric or mode names with escape sequences or undecodable bytes.
"""

from __future__ import annotations

import math
import time

from proftui.collectors.model.parts import describe_part
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.textsafe import display
from proftui.tui.format import format_cost, format_duration, metric_label
from rich.text import Text
from textual.widgets import Static

MAX_FIELD = 40  # characters of one name (mode, metric) shown in the header


def _short(text: str) -> str:
    text = display(text)
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD - 1] + "…"


def _elapsed(start: float | None, end: float | None) -> str | None:
    """Elapsed time, or None when the times do not make one (missing, not finite)."""
    if start is None:
        return None
    seconds = (end if end is not None else time.time()) - start
    if not math.isfinite(seconds):
        return None
    return format_duration(min(max(seconds, 0.0), 1e9))


def _part_text(profile: Profile, part: str) -> str:
    """ "thread 13 worker-2 40.1%": the thread shown and its share of the samples."""
    info = describe_part(profile, part)
    names = [m.name for m in profile.metrics]
    index = names.index("samples") if "samples" in names else 0
    mine = info.cost[index] if index < len(info.cost) else 0.0
    total = profile.total(index) if profile.metrics and profile.tree is not None else 0.0
    share = f" {100 * mine / total:.1f}%" if total > 0 and math.isfinite(mine / total) else ""
    return f"{_short(info.title())}{share}"


def since(start: float, end: float | None) -> str:
    """Seconds from `start` to `end` (or now): "12.3 s" under a minute, then M:SS."""
    seconds = (end if end is not None else time.time()) - start
    if not math.isfinite(seconds):
        return "?"
    seconds = min(max(seconds, 0.0), 1e9)
    return f"{seconds:.1f} s" if seconds < 60 else format_duration(seconds)


class HeaderBar(Static):
    """Shows what is being profiled and how far along it is."""

    def show(self, profile: Profile | None, *, pid: int | None, state: str,
             paused: bool = False, error: str = "", part: str | None = None,
             reset_at: float | None = None, delta: str = "") -> None:
        """Redraw from `profile`'s metadata; `state` is e.g. "running", "exited with status 7";
        `part` is the thread or process shown (a `Profile.parts` label; None: all);
        `reset_at`: when the counters were last reset (time.time()), if they were;
        `delta`: what the diff views compare with ("Δ vs base.proftui (shares)")."""
        text = Text(" proftui ", style="bold reverse")
        if profile is None:
            text.append("  waiting for the first snapshot...")
            self.update(text)
            return
        meta = profile.meta
        text.append(f" {_short(str(meta.mode))} ", style="bold")
        if pid is not None:
            text.append(f"pid {pid} ", style="")
        elif meta.pids:
            text.append(f"pid {', '.join(map(str, meta.pids[:3]))} ", style="dim")
        if part is not None:  # first: it changes what every number below the header means
            text.append(f"· {_part_text(profile, part)} ", style="bold magenta")
        style = "bold green" if state == "running" else "bold yellow"
        text.append(f"· {display(state)} ", style=style)
        if paused:
            text.append("· PAUSED ", style="bold reverse yellow")
        elapsed = _elapsed(meta.start_time, meta.end_time)
        if elapsed is not None:
            text.append(f"· {elapsed} ", style="")
        if reset_at is not None:
            text.append(f"· {since(reset_at, meta.end_time)} since reset ", style="bold")
        if delta:  # early: it changes what the numbers below mean
            text.append(f"· {display(delta)} ", style="bold cyan")
        if profile.metrics:
            names = [m.name for m in profile.metrics]
            index = names.index("samples") if "samples" in names else 0
            metric = profile.metrics[index]
            total = profile.total(index) if profile.tree is not None else 0.0
            value = format_cost(total, metric.unit) if math.isfinite(total) else "?"
            text.append(f"· {value} {_short(metric_label(metric))} ")
        dropped_style = "bold red" if meta.dropped else "dim"
        text.append(f"· {meta.dropped:,} dropped ", style=dropped_style)
        if not meta.complete and state != "running":
            text.append("· incomplete ", style="bold red")
        if error:
            text.append(f"· {display(error)}", style="bold red")
        self.update(text)
