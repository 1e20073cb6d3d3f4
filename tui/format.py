"""Number formatting and heat colours shared by the panes (no widgets here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proftui.collectors.model.profile import Metric
from proftui.collectors.model.units import format_bytes
from rich.style import Style
from textual.color import Color, ColorParseError


def format_cost(value: float, unit: str) -> str:
    """A cost in its metric's unit: counts with separators, ns as s/ms/us, bytes as KiB..."""
    if unit == "ns":
        if value >= 1e9:
            return f"{value / 1e9:.2f}s"
        if value >= 1e6:
            return f"{value / 1e6:.1f}ms"
        if value >= 1e3:
            return f"{value / 1e3:.1f}us"
        return f"{value:.0f}ns"
    if unit == "bytes":
        return format_bytes(value)
    return f"{value:,.0f}"


def format_duration(seconds: float) -> str:
    """Elapsed time as M:SS or H:MM:SS."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def metric_label(metric: Metric) -> str:
    """A metric's name as panes and the header show it ("leaked", "CPU time"...)."""
    return metric.shown


def metric_word(metric: Metric) -> str:
    """`metric_label`, shortened for a column title."""
    return metric.column


def percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


@dataclass(frozen=True)
class HeatColors:
    """The heat colours: ANSI names by default, the theme's once the app sets them."""

    hot: str = "red"  # >= 25% of the whole (bold)
    warm: str = "bright_red"  # >= 10%
    mild: str = "yellow"  # >= 3%
    cool: str = "green"  # >= 0.5%


_heat = HeatColors()  # module state: set once per theme change, from the UI thread


def use_theme(variables: Mapping[str, str]) -> None:
    """Take the heat colours from a Textual theme's CSS variables ($error, $warning,
    $success), so a theme picked in the palette reaches the tables (the source view
    makes its own from the theme); the defaults stay for what a variable does not give."""
    global _heat

    def color(name: str) -> str | None:
        try:
            return Color.parse(variables[name]).hex6
        except (KeyError, ColorParseError):
            return None

    error, warning, success = color("error"), color("warning"), color("success")
    _heat = HeatColors(hot=error or "red", warm=error or "bright_red",
                       mild=warning or "yellow", cool=success or "green")


def heat_style(fraction: float) -> Style:
    """Foreground colour for a share of the whole (0..1): dim, green, yellow, red."""
    if fraction >= 0.25:
        return Style(color=_heat.hot, bold=True)
    if fraction >= 0.10:
        return Style(color=_heat.warm)
    if fraction >= 0.03:
        return Style(color=_heat.mild)
    if fraction >= 0.005:
        return Style(color=_heat.cool)
    return Style(dim=True)
