"""Quantities for people, in one style wherever proftui prints them (TUI, reports, notes)."""

from __future__ import annotations


def format_bytes(value: float) -> str:
    """Bytes as B, KiB, MiB, GiB: "512B", "4.0KiB", "1.5MiB"."""
    for suffix in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{value:.0f}{suffix}" if suffix == "B" else f"{value:.1f}{suffix}"
        value /= 1024
    return f"{value:.1f}GiB"
