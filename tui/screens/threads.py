"""The thread picker (`t`): all threads, one process or one thread, by share of the metric.

As perf report's thread filter and hotspot's thread list: every pane then
shows the chosen part only.  The choices come from `collectors.model.parts`.
`b` makes the highlighted part the baseline that the part shown next is compared
with (two threads, two hosts of a fleet); in a fleet profile `g` breaks it down
another way (by host, program, build, thread: the answer shown regrouped, a new
query only for threads it lacks).
"""

from __future__ import annotations

from typing import ClassVar

from proftui.collectors.model.parts import PartInfo
from proftui.collectors.model.profile import Metric
from proftui.collectors.model.textsafe import display
from proftui.tui.format import format_cost, heat_style, metric_label, percent
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

ALL = ""  # the label the picker returns for "all threads"
BAR_WIDTH = 10
# What the picker answers (None: cancelled): an action and a part label (ALL: all).
SHOW, MARK, REGROUP = "show", "mark", "regroup"
Picked = tuple[str, str]


def choice_text(info: PartInfo, whole: float, metric: int, unit: str, current: bool,
                all_text: str = "All threads") -> Text:
    """One row: marker, share, bar, cost, then "thread 13 worker-2" (`all_text` for the
    whole profile)."""
    value = info.cost[metric] if metric < len(info.cost) else 0.0
    share = percent(value, whole)
    text = Text("● " if current else "  ", style="bold cyan")
    text.append(f"{share:5.1f}% ", style=heat_style(value / whole if whole > 0 else 0.0))
    filled = round(BAR_WIDTH * share / 100)
    text.append("█" * filled + "·" * (BAR_WIDTH - filled), style="magenta")
    text.append(f" {format_cost(value, unit):>9}  ")
    if info.kind in ("all", "other"):
        text.append(all_text if info.kind == "all" else display(info.title()),
                    style="bold" if info.kind == "all" else "")
        return text
    head = f"process {info.pid}" if info.kind == "process" else f"thread {info.tid}"
    text.append(f"{head:<15}", style="bold" if info.kind == "process" else "")
    if info.name:
        text.append(f" {display(info.name)}", style="green")
    if info.kind == "thread" and info.pid is not None and info.tid == info.pid:
        text.append("  (main)", style="dim")
    return text


class ThreadsScreen(ModalScreen[Picked | None]):
    """Returns (SHOW, the chosen part label or ALL), (MARK, the highlighted one: the
    baseline), (REGROUP, ALL) for `g`, or None when cancelled (Escape)."""

    DEFAULT_CSS = """
    ThreadsScreen {
        align: center middle;
    }
    #threads-dialog {
        width: auto;
        min-width: 50;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: thick $accent;
        background: $surface;
        padding: 0 1;
    }
    #threads-title {
        width: 100%;
        text-style: bold;
    }
    #threads-list {
        width: auto;
        height: auto;
        max-height: 30;
    }
    #threads-help {
        color: $text-muted;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t,q", "cancel", "Cancel"),
        Binding("a", "choose_all", "All threads"),
        Binding("b", "mark", "Baseline"),
        Binding("g", "regroup", "Break down"),
    ]

    def __init__(self, choices: list[PartInfo], metric: int, metrics: tuple[Metric, ...],
                 current: str | None, breakdown: str = "", next_breakdown: str = "",
                 marked: str = "") -> None:
        """`breakdown`: what a fleet profile's parts are per, and `next_breakdown` what
        `g` asks next (both empty: not a fleet profile, `g` does nothing); `marked`:
        what the baseline is now, if a part."""
        super().__init__()
        self.choices = choices
        self.metric = metric
        self.metrics = metrics
        self.current = current
        self.breakdown = breakdown
        self.next_breakdown = next_breakdown
        self.marked = marked

    def compose(self) -> ComposeResult:
        metric = self.metrics[self.metric] if self.metric < len(self.metrics) else None
        unit = metric.unit if metric is not None else "count"
        whole = self.choices[0].cost[self.metric] if self.choices and \
            self.metric < len(self.choices[0].cost) else 0.0
        label = metric_label(metric) if metric is not None else "cost"
        all_text = "All parts" if self.breakdown else "All threads"
        options = [Option(choice_text(info, whole, self.metric, unit, info.label == self.current,
                                      all_text), id=f"part-{i}")
                   for i, info in enumerate(self.choices)]
        title = (f"Show one part, by {self.breakdown} (share of {label})" if self.breakdown
                 else f"Show one thread or process (share of {label})")
        keys = "Enter: show it · a: all · b: baseline to compare with · Esc: cancel"
        with Vertical(id="threads-dialog"):
            yield Label(title, id="threads-title")
            yield OptionList(*options, id="threads-list")
            if self.marked:
                yield Label(f"baseline: {display(self.marked)} (x forgets it)",
                            id="threads-marked")
            if self.next_breakdown:
                keys += f" · g: by {self.next_breakdown}"
            yield Label(keys, id="threads-help")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        index = next((i for i, info in enumerate(self.choices) if info.label == self.current), 0)
        options.highlighted = index
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        info = self.choices[event.option_index]
        self.dismiss((SHOW, ALL if info.label is None else info.label))

    def action_choose_all(self) -> None:
        self.dismiss((SHOW, ALL))

    def action_mark(self) -> None:
        index = self.query_one(OptionList).highlighted
        if index is not None:
            label = self.choices[index].label
            self.dismiss((MARK, ALL if label is None else label))

    def action_regroup(self) -> None:
        if self.next_breakdown:
            self.dismiss((REGROUP, ALL))
        else:
            self.notify("g breaks a fleet profile down by host, program, build or thread; "
                        "this profile's parts are its threads and processes")

    def action_cancel(self) -> None:
        self.dismiss(None)
