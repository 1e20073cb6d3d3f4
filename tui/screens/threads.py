"""The thread picker (`t`): all threads, one process or one thread, by share of the metric.

As perf report's thread filter and hotspot's thread list: every pane then
shows the chosen part only.  The choices come from `collectors.model.parts`.
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

ALL = ""  # what the picker returns for "all threads" (None means cancelled)
BAR_WIDTH = 10


def choice_text(info: PartInfo, whole: float, metric: int, unit: str, current: bool) -> Text:
    """One row: marker, share, bar, cost, then "thread 13 worker-2"."""
    value = info.cost[metric] if metric < len(info.cost) else 0.0
    share = percent(value, whole)
    text = Text("● " if current else "  ", style="bold cyan")
    text.append(f"{share:5.1f}% ", style=heat_style(value / whole if whole > 0 else 0.0))
    filled = round(BAR_WIDTH * share / 100)
    text.append("█" * filled + "·" * (BAR_WIDTH - filled), style="magenta")
    text.append(f" {format_cost(value, unit):>9}  ")
    if info.kind in ("all", "other"):
        text.append("All threads" if info.kind == "all" else display(info.title()),
                    style="bold" if info.kind == "all" else "")
        return text
    head = f"process {info.pid}" if info.kind == "process" else f"thread {info.tid}"
    text.append(f"{head:<15}", style="bold" if info.kind == "process" else "")
    if info.name:
        text.append(f" {display(info.name)}", style="green")
    if info.kind == "thread" and info.pid is not None and info.tid == info.pid:
        text.append("  (main)", style="dim")
    return text


class ThreadsScreen(ModalScreen[str | None]):
    """Returns the chosen part label, `ALL`, or None when cancelled (Escape)."""

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
    ]

    def __init__(self, choices: list[PartInfo], metric: int, metrics: tuple[Metric, ...],
                 current: str | None) -> None:
        super().__init__()
        self.choices = choices
        self.metric = metric
        self.metrics = metrics
        self.current = current

    def compose(self) -> ComposeResult:
        metric = self.metrics[self.metric] if self.metric < len(self.metrics) else None
        unit = metric.unit if metric is not None else "count"
        whole = self.choices[0].cost[self.metric] if self.choices and \
            self.metric < len(self.choices[0].cost) else 0.0
        label = metric_label(metric) if metric is not None else "cost"
        options = [Option(choice_text(info, whole, self.metric, unit, info.label == self.current),
                          id=f"part-{i}") for i, info in enumerate(self.choices)]
        with Vertical(id="threads-dialog"):
            yield Label(f"Show one thread or process (share of {label})", id="threads-title")
            yield OptionList(*options, id="threads-list")
            yield Label("Enter: show it · a: all threads · Esc: cancel", id="threads-help")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        index = next((i for i, info in enumerate(self.choices) if info.label == self.current), 0)
        options.highlighted = index
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        info = self.choices[event.option_index]
        self.dismiss(ALL if info.label is None else info.label)

    def action_choose_all(self) -> None:
        self.dismiss(ALL)

    def action_cancel(self) -> None:
        self.dismiss(None)
