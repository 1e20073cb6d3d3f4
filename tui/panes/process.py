"""Process pane: the target's status (state, CPU overall and per thread, memory, fds,
I/O, history) on top, the heap over time (heap profiles), its output (stdout and
stderr, live) below.

Each part is one section, a container with its own id (`#proc-status`,
`#proc-output`), so another part (a heap chart) is one more section in
`compose`.  `o` gives the output the whole pane and back; after a target
that failed the pane opens that way, since its output is what the user is
after then.
"""

from __future__ import annotations

from typing import ClassVar

from proftui.collectors.model.profile import Profile, Timeline
from proftui.collectors.model.views import FlatEntry
from proftui.collectors.runtime.process_status import HISTORY, ProcStat
from proftui.tui.format import format_bytes
from proftui.tui.panes.base import Command, NavState, Pane
from proftui.tui.widgets.heap_chart import HeapChart
from proftui.tui.widgets.output_panel import HEAD_LINES, TAIL_LINES, OutputLog, OutputSource
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Sparkline, Static

MAX_THREAD_ROWS = 12
OUTPUT_POLL_S = 0.5  # how often the output panel looks for new output (cheap when none)


def _window(history: tuple[float, ...]) -> list[float]:
    return [0.0] * (HISTORY - len(history)) + list(history)


class ProcPane(Pane, Vertical):
    """Shows the latest `ProcStat`; or why there is no live process."""

    KEY, PANE_ID, TITLE, TAB = "4", "proc", "Process status", "Process"
    HINT = "CPU, memory, threads and output of the target"

    BINDINGS: ClassVar[list[BindingType]] = [Binding("o", "toggle_output", "Output")]

    DEFAULT_CSS = """
    ProcPane #proc-status { height: auto; max-height: 55%; overflow-y: auto; }
    ProcPane #proc-output { height: 1fr; min-height: 4; }
    ProcPane.-output-only #proc-status { display: none; }
    ProcPane.-no-output #proc-status { max-height: 100%; height: 1fr; }
    ProcPane.-no-output #proc-output { height: 1; min-height: 1; }
    ProcPane.-no-output #output-log { display: none; }
    ProcPane #output-title { height: 1; background: $boost; }
    ProcPane.-output-only #heap-chart { display: none; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._output_timer: Timer | None = None
        self._output_why = "no live process: no program output"
        self._output_dirty = False
        self._ended_note = ""
        self._failed = False
        self._timeline: Timeline | None = None  # the heap chart's data, drawn when shown
        self._drawn_timeline: tuple[int, int] | None = None  # (id, rows) last drawn
        self._live = False  # a live process: its status (above the chart) has the RSS

    def compose(self) -> ComposeResult:
        with Vertical(id="proc-status"):
            yield Static("no live process", id="proc-summary")
            yield Static("CPU % (history)", classes="spark-label")
            yield Sparkline([], id="cpu-spark", summary_function=max)
            yield Static("RSS (history)", classes="spark-label")
            yield Sparkline([], id="rss-spark", summary_function=max)
            yield Static("", id="proc-threads")
        chart = HeapChart(id="heap-chart")
        chart.display = False  # until a profile with a timeline (heap profiles) comes
        yield chart
        with Vertical(id="proc-output"):
            yield Static("", id="output-title")
            yield OutputLog(id="output-log")

    def begin(self, live: bool, has_profile: bool) -> None:
        self._live = live
        if live:
            self.show_message("waiting for the first process sample...")
            self._output_why = ""  # follow_output() comes next
        else:
            self.show_message("no live process: this is a saved profile" if has_profile
                              else "no live process")
            self._output_why = ("saved profile: the program's output is not part of it"
                                if has_profile else "no live process: no program output")
        self._show_output_title()

    # -- the target's output -----------------------------------------------------------

    def follow_output(self, source: OutputSource | None, mode: str) -> None:
        """Show `source` (the collector's captured output) live; None: say why not."""
        log = self.query_one(OutputLog)
        log.follow(source)
        if source is None:
            self._output_why = (
                "attached process: its output goes where it always did (proftui does not "
                "capture it)" if mode == "attach" else
                "the program writes to the terminal (not captured)")
        elif self._output_timer is None:
            self._output_timer = self.set_interval(OUTPUT_POLL_S, self._poll_output)
            self._poll_output()
        self._show_output_title()

    def target_ended(self, note: str, failed: bool) -> None:
        """The target ended (`note`: how); after a failure the output takes the pane."""
        self._ended_note, self._failed = note, failed
        if failed and self.query_one(OutputLog).source is not None:
            self.add_class("-output-only")
        self._poll_output()

    def _poll_output(self) -> None:
        log = self.query_one(OutputLog)
        if log.poll():
            self._output_dirty = True
            self._show_output_title()
        if self._output_dirty and self.display:  # hidden: drawn when shown
            log.draw()
            self._output_dirty = False
        if log.finished and self._output_timer is not None:
            self._output_timer.stop()
            self._output_timer = None
            self._show_output_title()

    def _show_output_title(self) -> None:
        log = self.query_one(OutputLog)
        title = Text(" Output ", style="bold")
        source = log.source
        if source is None:
            title.append(f"· {self._output_why or 'none yet'}", style="dim")
        else:
            lines = source.total_lines  # all it wrote, whatever the panel keeps
            title.append(f"stdout+stderr (a terminal) · {source.total_bytes:,} bytes · "
                         f"{lines:,} line{'' if lines == 1 else 's'}")
            if lines > HEAD_LINES + TAIL_LINES:
                title.append(f" (the first {HEAD_LINES:,} and last {TAIL_LINES:,} kept)",
                             style="dim")
            if log.finished:
                title.append(" · ended" + (f" ({self._ended_note})" if self._ended_note else ""),
                             style="bold yellow" if self._failed else "")
        if source is not None:
            title.append("  o: " + ("show status too" if self.has_class("-output-only")
                                    else "full height"), style="dim")
        self.query_one("#output-title", Static).update(title)
        # Nothing to show (saved profile, attach): the title line says why, the status
        # gets the room.
        self.set_class(source is None and bool(self._output_why), "-no-output")

    def action_toggle_output(self) -> None:
        """Give the output the whole pane, or share it with the status again."""
        if self.query_one(OutputLog).source is None:
            self.notify(f"no output to show: {self._output_why or 'none yet'}")
            return
        self.toggle_class("-output-only")
        self._show_output_title()

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        self._timeline = profile.timeline
        if state is not None:  # shown: draw now; hidden panes draw when shown (cheaper)
            self._draw_heap()

    def _draw_heap(self) -> None:
        timeline = self._timeline
        drawn = None if timeline is None else (id(timeline), len(timeline.times))
        if drawn != self._drawn_timeline or timeline is None:
            self._drawn_timeline = drawn
            self.query_one(HeapChart).show(timeline, rss_figure=not self._live)

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        if profile is not None:
            self._timeline = profile.timeline
        self._draw_heap()
        if self._output_dirty:
            self.query_one(OutputLog).draw()
            self._output_dirty = False

    def focus_widget(self) -> Widget | None:
        log = self.query_one(OutputLog)  # arrows, PgUp/PgDn, Home/End scroll the output
        return log if log.source is not None else None

    def commands(self) -> list[Command]:
        return [("Output full height / with status (o)",
                 "Give the target's output the whole Process pane, or share it",
                 self.action_toggle_output)]

    # -- the target's status -----------------------------------------------------------

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
        # (collectors/runtime/thread_names.py already escaped bytes and control characters).
        summary.add_row("pid", Text(f"{stat.pid}  {stat.name}"), "state", state)
        # A process that ended has no CPU share or RSS now: say what was last seen.
        cpu = f"{stat.cpu_percent:.1f}%" if stat.alive else "- (ended)"
        rss = format_bytes(stat.rss) if stat.alive else f"{format_bytes(stat.rss)} last seen"
        summary.add_row("CPU", cpu, "threads", str(stat.num_threads))
        summary.add_row("RSS", rss, "peak RSS", format_bytes(stat.peak_rss))
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
        peak_cpu = max(stat.cpu_history, default=0.0)
        # Left-pad to the full window: the graph fills from the right at a fixed time
        # scale, and zero is the bottom (Sparkline scales from the data's minimum).
        self.query_one("#cpu-spark", Sparkline).data = _window(stat.cpu_history)
        self.query_one("#rss-spark", Sparkline).data = _window(stat.rss_history)
        labels = list(self.query(".spark-label").results(Static))
        # "now" is the table's figure (one truth); once the process ended there is none.
        now = (f"now {stat.cpu_percent:.0f}%  ", f"now {format_bytes(stat.rss)}  ") \
            if stat.alive else ("", "")
        until = f"last {HISTORY} s" if stat.alive else f"its last {HISTORY} s"
        labels[0].update(f"CPU %  {now[0]}peak {peak_cpu:.0f}%  ({until})")
        labels[1].update(f"RSS  {now[1]}peak {format_bytes(max(stat.rss_history, default=0))}"
                         f"  ({until})")
        threads = Table(box=None, padding=(0, 2), header_style="bold")
        threads.add_column("tid", justify="right")
        threads.add_column("name")
        threads.add_column("CPU %", justify="right")
        for t in stat.threads[:MAX_THREAD_ROWS]:
            threads.add_row(str(t.tid), Text(t.name), f"{t.cpu_percent:5.1f}")
        if len(stat.threads) > MAX_THREAD_ROWS:
            threads.add_row("", f"… {len(stat.threads) - MAX_THREAD_ROWS} more", "")
        self.query_one("#proc-threads", Static).update(threads if stat.threads else "")
