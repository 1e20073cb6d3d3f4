"""The call tree pane's derived trees: bottom-up, focused (callees and callers) and
threads as roots, computed away from the event loop (a thread worker).

A saved profile never changes, so the trees a key is most likely to ask for next
(`u`: bottom-up; `T`: threads as roots) are computed ahead, once its first screen
is drawn, while the user reads it: on a 200,000-node profile each takes a few
hundred milliseconds, which a key press would otherwise wait for.
"""

from __future__ import annotations

from proftui.collectors.model.profile import CallTree, Frame, Profile
from proftui.collectors.model.views import (
    bottom_up_tree,
    callee_tree,
    caller_tree,
    select_tree,
    threads_as_roots,
)
from proftui.tui.panes.base import View
from proftui.tui.panes.tree_delta import base_trees

# What a derived view is computed for: view, focused function, part, threads as roots.
Need = tuple[View, Frame | None, str | None, bool]
# The snapshot it was derived from, the profile its rows index, its trees, the
# baseline and the baseline's trees of the same view.
Derived = tuple[Profile, Profile, tuple[CallTree, ...], Profile | None, tuple[CallTree, ...]]


def derive(profile: Profile, need: Need, baseline: Profile | None) -> Derived:
    """The trees of `need` (none when its focused function is not in `profile`)."""
    view, focus, part, roots = need
    trees: tuple[CallTree, ...] = ()
    bases: tuple[CallTree, ...] = ()
    shown = profile  # the profile whose frame table the rows index
    if view != "focus" and roots:
        shown, tree = threads_as_roots(profile, part, inverted=view == "bottom-up")
        trees = (tree,)
    elif view == "bottom-up":
        trees = (bottom_up_tree(profile, part),)
    elif view == "top-down":
        trees = (select_tree(profile, part),)
    elif focus is not None:
        frame_id = profile.frames.find(focus)
        if frame_id is not None:  # and the part's whole tree: "% of total" is of it
            trees = (callee_tree(profile, frame_id, part),
                     caller_tree(profile, frame_id, part), select_tree(profile, part))
    if baseline is not None and not roots and trees:  # no Δ on thread rows
        focus_id = profile.frames.find(focus) if focus is not None else None
        bases = base_trees(baseline, view, focus_id, part)
    return profile, shown, trees, baseline, bases


def ahead_needs(profile: Profile, part: str | None) -> list[Need]:
    """What to derive ahead for a saved profile, the likeliest first: bottom-up, then
    threads as roots (top-down) when the profile has threads."""
    needs: list[Need] = [("bottom-up", None, part, False)]
    if profile.parts:
        needs.append(("top-down", None, part, True))
    return needs
