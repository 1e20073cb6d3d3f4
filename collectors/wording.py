"""Counts in notes, in the singular when there is one: "1 sample was lost"."""

from __future__ import annotations


def count(n: float, noun: str, plural: str | None = None) -> str:
    """"1 sample", "2,048 samples" (`plural` when the noun does not take an s)."""
    return f"{n:,.0f} {noun if n == 1 else plural or noun + 's'}"


def verb(n: float, one: str, many: str) -> str:
    """`one` ("was", "has") for a count of 1, else `many`."""
    return one if n == 1 else many
