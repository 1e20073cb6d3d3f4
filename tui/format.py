"""Number formatting and heat colours shared by the panes (no widgets here)."""

from __future__ import annotations

from proftui.collectors.model.profile import Metric
from rich.style import Style


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


def format_bytes(value: float) -> str:
    """Bytes as B, KiB, MiB, GiB."""
    for suffix in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or suffix == "GiB":
            return f"{value:.0f}{suffix}" if suffix == "B" else f"{value:.1f}{suffix}"
        value /= 1024
    return f"{value:.1f}TiB"  # unreachable; keeps type checkers calm


def format_duration(seconds: float) -> str:
    """Elapsed time as M:SS or H:MM:SS."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_LABELS = {
    "samples": "samples", "cpu_ns": "CPU time", "wall_ns": "wall time", "calls": "calls",
    # heap metrics: what a heaptrack or memray user calls them
    "alloc_bytes": "allocated", "allocs": "allocations", "live_bytes": "live",
    "live_allocs": "live blocks", "peak_bytes": "at peak", "leaked_bytes": "leaked",
    "leaks": "leaked blocks", "temporary": "temporary allocs",
}


def metric_label(metric: Metric) -> str:
    """A metric's name as panes and the header show it ("leaked", "CPU time"...)."""
    return _LABELS.get(metric.name, metric.name)


def percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def heat_style(fraction: float) -> Style:
    """Foreground colour for a share of the whole (0..1): dim, green, yellow, red."""
    if fraction >= 0.25:
        return Style(color="red", bold=True)
    if fraction >= 0.10:
        return Style(color="bright_red")
    if fraction >= 0.03:
        return Style(color="yellow")
    if fraction >= 0.005:
        return Style(color="green")
    return Style(dim=True)


def heat_background(fraction: float) -> Style:
    """Background for a hot source line: darker red as the share grows (0..1)."""
    if fraction <= 0:
        return Style()
    level = min(1.0, fraction ** 0.5)  # sqrt so that 1-5% lines still show
    red = 50 + int(150 * level)
    return Style(bgcolor=f"rgb({red},{30 + int(20 * (1 - level))},{30})")
