"""Process status pane: state, CPU (overall and per thread), memory, fds, I/O, history."""

from __future__ import annotations

from proftui.collectors.runtime.procstat import HISTORY, ProcStat
from proftui.tui.format import format_bytes
from proftui.tui.panes.base import Pane
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

MAX_THREAD_ROWS = 12


def _window(history: tuple[float, ...]) -> list[float]:
    return [0.0] * (HISTORY - len(history)) + list(history)


class ProcPane(Pane, Vertical):
    """Shows the latest `ProcStat`; or why there is no live process."""

    KEY, PANE_ID, TITLE, TAB = "4", "proc", "Process status", "Process"
    HINT = "CPU, memory, threads of the target"

    def compose(self) -> ComposeResult:
        yield Static("no live process", id="proc-summary")
        yield Static("CPU % (history)", classes="spark-label")
        yield Sparkline([], id="cpu-spark", summary_function=max)
        yield Static("RSS (history)", classes="spark-label")
        yield Sparkline([], id="rss-spark", summary_function=max)
        yield Static("", id="proc-threads")

    def begin(self, live: bool, has_profile: bool) -> None:
        if live:
            self.show_message("waiting for the first process sample...")
        else:
            self.show_message("no live process: this is a saved profile" if has_profile
                              else "no live process")

    def show_process(self, stat: ProcStat, note: str) -> None:
        self.show_stat(stat, note)

    def show_message(self, message: str) -> None:
        """No process to show (saved profile, or nothing yet)."""
        self.query_one("#proc-summary", Static).update(Text(message, style="bold"))
        self.query_one("#proc-threads", Static).update("")
        for spark in self.query(Sparkline):
            spark.display = False
        for label in self.query(".spark-label"):
            label.display = False

    def show_stat(self, stat: ProcStat, exit_note: str = "") -> None:
        summary = Table.grid(padding=(0, 2))
        summary.add_column(style="dim", justify="right")
        summary.add_column()
        summary.add_column(style="dim", justify="right")
        summary.add_column()
        state = Text(stat.state or "?", style="bold green" if stat.alive else "bold yellow")
        if not stat.alive:
            state = Text(exit_note or stat.error or "gone", style="bold yellow")
        io = "n/a" if stat.read_bytes is None else (
            f"read {format_bytes(stat.read_bytes)}  write {format_bytes(stat.write_bytes or 0)}")
        # Names are the target's choice: Text() keeps "[...]" from reading as Rich markup
        # (collectors/runtime/names.py already escaped bytes and control characters).
        summary.add_row("pid", Text(f"{stat.pid}  {stat.name}"), "state", state)
        summary.add_row("CPU", f"{stat.cpu_percent:.1f}%", "threads", str(stat.num_threads))
        summary.add_row("RSS", format_bytes(stat.rss), "peak RSS", format_bytes(stat.peak_rss))
        summary.add_row("VMS", format_bytes(stat.vms), "open fds",
                        "n/a" if stat.num_fds is None else str(stat.num_fds))
        summary.add_row("ctx switches", f"{stat.ctx_voluntary:,} voluntary", "",
                        f"{stat.ctx_involuntary:,} involuntary")
        summary.add_row("I/O", io, "", "")
        self.query_one("#proc-summary", Static).update(summary)
        for spark in self.query(Sparkline):
            spark.display = True
        for label in self.query(".spark-label"):
            label.display = True
        cpu_now = stat.cpu_history[-1] if stat.cpu_history else 0.0
        peak_cpu = max(stat.cpu_history, default=0.0)
        # Left-pad to the full window: the graph fills from the right at a fixed time
        # scale, and zero is the bottom (Sparkline scales from the data's minimum).
        self.query_one("#cpu-spark", Sparkline).data = _window(stat.cpu_history)
        self.query_one("#rss-spark", Sparkline).data = _window(stat.rss_history)
        labels = list(self.query(".spark-label").results(Static))
        labels[0].update(f"CPU %  now {cpu_now:.0f}%  peak {peak_cpu:.0f}%  "
                         f"(last {HISTORY} s)")
        labels[1].update(f"RSS  now {format_bytes(stat.rss)}  "
                         f"peak {format_bytes(max(stat.rss_history, default=0))}")
        threads = Table(box=None, padding=(0, 2), header_style="bold")
        threads.add_column("tid", justify="right")
        threads.add_column("name")
        threads.add_column("CPU %", justify="right")
        for t in stat.threads[:MAX_THREAD_ROWS]:
            threads.add_row(str(t.tid), Text(t.name), f"{t.cpu_percent:5.1f}")
        if len(stat.threads) > MAX_THREAD_ROWS:
            threads.add_row("", f"… {len(stat.threads) - MAX_THREAD_ROWS} more", "")
        self.query_one("#proc-threads", Static).update(threads if stat.threads else "")
