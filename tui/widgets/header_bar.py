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


def _metric_shown(profile: Profile, metric: int | None) -> int:
    """The metric the header sums: the one shown, else samples, else the first."""
    if metric is not None and 0 <= metric < len(profile.metrics):
        return metric
    names = [m.name for m in profile.metrics]
    return names.index("samples") if "samples" in names else 0


def _part_text(profile: Profile, part: str, index: int) -> str:
    """ "thread 13 worker-2 40.1%": the thread shown and its share of metric `index`."""
    info = describe_part(profile, part)
    mine = info.cost[index] if index < len(info.cost) else 0.0
    total = profile.total(index) if profile.metrics else 0.0
    share = f" {100 * mine / total:.1f}%" if total > 0 and math.isfinite(mine / total) else ""
    return f"{_short(info.title())}{share}"


def since(start: float, end: float | None) -> str:
    """Seconds from `start` to `end` (or now): "12.3 s" under a minute, then M:SS."""
    seconds = (end if end is not None else time.time()) - start
    if not math.isfinite(seconds):
        return "?"
    seconds = min(max(seconds, 0.0), 1e9)
    return f"{seconds:.1f} s" if seconds < 60 else format_duration(seconds)


PIDS_SHOWN = 4  # processes the header names; more are counted ("and 3 more")


def pid_list(pids: list[int]) -> str:
    """ "pid 12", "pids 12, 13, 14", or "pids 12, 13, 14, 15 and 3 more": every process
    of the profile is named or counted."""
    if len(pids) == 1:
        return f"pid {pids[0]}"
    shown = ", ".join(map(str, pids[:PIDS_SHOWN]))
    rest = len(pids) - PIDS_SHOWN
    return f"pids {shown}" + (f" and {rest} more" if rest > 0 else "")


# What goes first when the line is wider than the terminal (lowest first); 0: never.
DROP_PID, DROP_QUIET, DROP_TIME, DROP_SAVED, KEEP = 1, 1, 2, 3, 0


class HeaderBar(Static):
    """Shows what is being profiled and how far along it is; on a narrow terminal the
    least telling parts (pid, a zero drop count, elapsed time) go first."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._segments: list[tuple[Text, int]] = []

    def show(self, profile: Profile | None, *, pid: int | None, state: str,
             paused: bool = False, error: str = "", part: str | None = None,
             reset_at: float | None = None, delta: str = "", running: bool | None = None,
             metric: int | None = None) -> None:
        """Redraw from `profile`'s metadata; `state` is e.g. "running", "exited with status 7";
        `running`: the target still runs (default: `state` is "running"), so a profile
        short of the end is not "incomplete" yet; `metric`: the metric the panes show,
        whose total (and name) the header gives;
        `part` is the thread or process shown (a `Profile.parts` label; None: all);
        `reset_at`: when the counters were last reset (time.time()), if they were;
        `delta`: what the diff views compare with ("Δ vs base.proftui (shares)")."""
        segments: list[tuple[Text, int]] = [(Text(" proftui ", style="bold reverse"), KEEP)]

        def add(text: str, style: str, drop: int) -> None:
            segments.append((Text(text, style=style), drop))

        if profile is None:
            add("  waiting for the first snapshot...", "", KEEP)
            self._draw(segments)
            return
        meta = profile.meta
        add(f" {_short(str(meta.mode))} ", "bold", KEEP)
        if pid is not None and len(meta.pids) <= 1:
            add(f"pid {pid} ", "", DROP_PID)
        elif meta.pids:  # every process of a --follow run, or how many are not shown
            add(f"{pid_list(meta.pids)} ", "" if pid is not None else "dim", DROP_PID)
        index = _metric_shown(profile, metric)
        if part is not None:  # first: it changes what every number below the header means
            add(f"· {_part_text(profile, part, index)} ", "bold magenta", KEEP)
        style = "bold green" if state == "running" else "bold yellow"
        add(f"· {display(state)} ", style, DROP_SAVED if state == "saved profile" else KEEP)
        if paused:
            add("· PAUSED ", "bold reverse yellow", KEEP)
        elapsed = _elapsed(meta.start_time, meta.end_time)
        if elapsed is not None:
            add(f"· {elapsed} ", "", DROP_TIME)
        if reset_at is not None:
            add(f"· {since(reset_at, meta.end_time)} since reset ", "bold", KEEP)
        if delta:  # early: it changes what the numbers below mean
            add(f"· {display(delta)} ", "bold cyan", KEEP)
        if profile.metrics:
            shown = profile.metrics[index]
            total = profile.total(index)
            value = format_cost(total, shown.unit) if math.isfinite(total) else "?"
            # The metric shown, named (KEEP: what the numbers below mean must stay said).
            add(f"· {value} {_short(metric_label(shown))} ", "bold", KEEP)
        add(f"· {meta.dropped:,} dropped ", "bold red" if meta.dropped else "dim",
            KEEP if meta.dropped else DROP_QUIET)
        if not meta.complete and not (state == "running" if running is None else running):
            add("· incomplete (w) ", "bold red", KEEP)  # the notes say why
        if error:
            add(f"· {display(error)}", "bold red", KEEP)
        self._draw(segments)

    def _draw(self, segments: list[tuple[Text, int]]) -> None:
        self._segments = segments
        width = self.size.width  # 0 before the first layout: everything
        length = sum(text.cell_len for text, _drop in segments)
        dropped: set[int] = set()
        # Lowest priority first; among equals the rightmost.
        for _drop, minus_i in sorted((drop, -i) for i, (_t, drop) in enumerate(segments) if drop):
            if not width or length <= width:
                break
            dropped.add(-minus_i)
            length -= segments[-minus_i][0].cell_len
        self.update(Text().join(t for i, (t, _d) in enumerate(segments) if i not in dropped))

    def on_resize(self) -> None:
        if self._segments:
            self._draw(self._segments)
