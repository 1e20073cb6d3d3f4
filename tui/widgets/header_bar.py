"""The one-line header: mode, pid, state, elapsed time, sample count, dropped records."""

from __future__ import annotations

import time

from proftui.collectors.model.profile import Profile
from proftui.tui.format import format_cost, format_duration, metric_label
from rich.text import Text
from textual.widgets import Static


class HeaderBar(Static):
    """Shows what is being profiled and how far along it is."""

    def show(self, profile: Profile | None, *, pid: int | None, state: str,
             paused: bool = False, error: str = "") -> None:
        """Redraw from `profile`'s metadata; `state` is e.g. "running", "exited with status 7"."""
        text = Text(" proftui ", style="bold reverse")
        if profile is None:
            text.append("  waiting for the first snapshot...")
            self.update(text)
            return
        meta = profile.meta
        text.append(f" {meta.mode} ", style="bold")
        if pid is not None:
            text.append(f"pid {pid} ", style="")
        elif meta.pids:
            text.append(f"pid {', '.join(map(str, meta.pids[:3]))} ", style="dim")
        style = "bold green" if state == "running" else "bold yellow"
        text.append(f"· {state} ", style=style)
        if paused:
            text.append("· PAUSED ", style="bold reverse yellow")
        if meta.start_time is not None:
            end = meta.end_time if meta.end_time is not None else time.time()
            text.append(f"· {format_duration(end - meta.start_time)} ", style="")
        if profile.metrics:
            names = [m.name for m in profile.metrics]
            index = names.index("samples") if "samples" in names else 0
            metric = profile.metrics[index]
            text.append(f"· {format_cost(profile.total(index), metric.unit)} "
                        f"{metric_label(metric)} ")
        dropped_style = "bold red" if meta.dropped else "dim"
        text.append(f"· {meta.dropped:,} dropped ", style=dropped_style)
        if not meta.complete and state != "running":
            text.append("· incomplete ", style="bold red")
        if error:
            text.append(f"· {error}", style="bold red")
        self.update(text)
