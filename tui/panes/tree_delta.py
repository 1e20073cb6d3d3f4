"""The call tree's Δ column: each row's change against the baseline's same calling context.

The app's `baseline` (`open --base`, a live mark) is aligned onto the shown
profile, so the same path of frame ids names the same context in both; the
tree pane derives the baseline's tree of the view it shows (top-down,
bottom-up, callers and callees of a focused function) and this class finds a
row's counterpart there.  Points are of each profile's whole (the thread shown),
as in the flat profile's Δ columns; "new" marks a context the baseline lacks, and
a context only the baseline has is a "gone" row under its parent (its Δ is minus
the baseline's cost).
"""

from __future__ import annotations

from collections.abc import Sequence

from proftui.collectors.model.diff import counterpart
from proftui.collectors.model.diffviews import change
from proftui.collectors.model.parts import part_total
from proftui.collectors.model.profile import CallNode, CallTree, Profile
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import bottom_up_tree, callee_tree, caller_tree, select_tree
from proftui.tui.format import format_cost
from rich.style import Style
from rich.text import Text

GROWN, SHRUNK = Style(color="red", bold=True), Style(color="blue", bold=True)
WIDTH = 8  # of the Δ cell, sign included


def base_trees(baseline: Profile, view: str, focus_id: int | None, part: str | None
               ) -> tuple[CallTree, ...]:
    """The baseline's trees of `view`, as the tree pane derives the shown profile's."""
    if view == "bottom-up":
        return (bottom_up_tree(baseline, part),)
    if view == "focus":
        if focus_id is None:
            return ()
        return callee_tree(baseline, focus_id, part), caller_tree(baseline, focus_id, part)
    return (select_tree(baseline, part),)


class TreeDeltas:
    """Δ cells for the rows of the shown trees (none when there is no baseline)."""

    def __init__(self) -> None:
        self.baseline: Profile | None = None
        self._bases: dict[int, CallTree] = {}  # id(a shown tree) -> the baseline's tree
        self.normalise = "shares"

    def set(self, baseline: Profile | None, shown: Sequence[CallTree],
            bases: Sequence[CallTree], normalise: str) -> None:
        """Pair the shown trees with the baseline's (same order); empty `bases`: no Δ."""
        self.baseline = baseline if bases else None
        self._bases = {id(tree): base for tree, base in zip(shown, bases, strict=False)}
        self.normalise = normalise

    def gone(self, call: CallNode, metric: int) -> list[CallNode]:
        """The baseline's children of `call`'s context that `call` lacks (costliest
        first): contexts that vanished.  None without a baseline."""
        if self.baseline is None:
            return []
        base_tree = self._bases.get(id(call.tree))
        found = counterpart(call, base_tree) if base_tree is not None else None
        if found is None:
            return []
        vanished = [child for fid, child in found.children.items() if fid not in call.children
                    and child.total_cost and child.total_cost[metric] > 0]
        return sorted(vanished, key=lambda c: -c.total_cost[metric])

    def gone_label(self, base: CallNode, profile: Profile, part: str | None, metric: int,
                   unit: str) -> Text:
        """A vanished context's row: no cost now, Δ minus the baseline's, its name."""
        assert self.baseline is not None
        value = change(0.0, base.total_cost[metric], part_total(profile, part, metric),
                       part_total(self.baseline, part, metric), self.normalise)
        text = Text(f"{'-':>6} {'-':>8} ", style="dim")
        text.append_text(self._delta_text(value, unit))
        frame = self.baseline.frames[base.frame_id]
        text.append("gone ", style="italic")
        text.append(display(frame.function), style="dim")
        if frame.module_name:
            text.append(f"  {display(frame.module_name)}", style="dim")
        return text

    def cell(self, call: CallNode, profile: Profile, part: str | None, metric: int,
             unit: str) -> Text | None:
        """The row's "Δ+12.3 " text, or None without a baseline."""
        if self.baseline is None:
            return None
        base_tree = self._bases.get(id(call.tree))
        if base_tree is None:
            return None
        found = counterpart(call, base_tree)
        total = call.total_cost[metric] if call.total_cost else 0.0
        if found is None or not found.total_cost or found.total_cost[metric] <= 0:
            return Text(f"{'Δ new':>{WIDTH}} ", style="italic green") if total > 0 else None
        value = change(total, found.total_cost[metric], part_total(profile, part, metric),
                       part_total(self.baseline, part, metric), self.normalise)
        return self._delta_text(value, unit)

    def _delta_text(self, value: float, unit: str) -> Text:
        if abs(value) < 1e-9:
            return Text(f"{'Δ ·':>{WIDTH}} ", style="dim")
        if self.normalise == "shares":
            shown = f"Δ{value:+.1f}"
        else:
            shown = f"Δ{'+' if value > 0 else '-'}{format_cost(abs(value), unit)}"
        return Text(f"{shown:>{WIDTH}} ", style=GROWN if value > 0 else SHRUNK)
