"""Functions too short for their hooks: the profile's note naming them, and the remedy.

Every instrumented call runs the enter and exit hooks, about the same few nanoseconds
whatever the function does.  In a sampled run the hooks' own ticks are the
[instrumentation] rows, so their cost per call is known (those ticks over the calls
counted), and a function's share of it is its calls times that.  Where that is more than
the ticks in the function's own code, the hooks cost more than the function: its callers
pay for the measurement more than for the work, and the hooks' cache traffic shifts the
program's shares.  Only recompiling without its hooks takes that cost away (`-N` hides
the function, but its hooks still run).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from proftui.collectors.model.profile import Profile

LISTED = 5  # functions named at most
MIN_SHARE = 1.0  # percent of the run the hooks of a function must cost to be named
_ARGS = re.compile(r"\(.*$")
_TEMPLATE = re.compile(r"<[^<>]*>")


def _source_name(function: str) -> str:
    """A function's name as -finstrument-functions-exclude-function-list matches it
    (a substring of the name): no parameters, no template arguments (their commas would
    split the list)."""
    name = _ARGS.sub("", function)
    while True:
        shorter = _TEMPLATE.sub("", name)
        if shorter == name:
            return name.split()[-1] if name.split() else function
        name = shorter


def short_functions_note(profile: Profile, hook_frame: int) -> str | None:
    """The note naming the functions whose hooks (estimated: their calls times the
    run's hook ticks per call) cost more than their own code, the costliest first, with
    the compiler option that drops their hooks; None when there is none of at least
    MIN_SHARE % of the samples.  `hook_frame`: the [instrumentation] frame's id."""
    tree = profile.tree
    samples = tree.root.total_cost[0]
    by_frame: Counter[int] = Counter()
    own_by_frame: defaultdict[int, float] = defaultdict(float)
    hook_samples = 0.0
    for node in tree.nodes():
        if node.frame_id == hook_frame:
            hook_samples += node.self_cost[0]
        elif node.calls is not None:
            by_frame[node.frame_id] += node.calls
            own_by_frame[node.frame_id] += node.self_cost[0]
    calls: Counter[str] = Counter()  # by name: a function's inlined copies are frames too
    own: defaultdict[str, float] = defaultdict(float)
    for frame, n in by_frame.items():
        name = profile.frames[frame].function
        calls[name] += n
        own[name] += own_by_frame[frame]
    total_calls = sum(calls.values())
    if not samples or not hook_samples or not total_calls:
        return None
    per_call = hook_samples / total_calls
    short = sorted(((calls[f] * per_call, f) for f in calls
                    if calls[f] * per_call > max(own[f], samples * MIN_SHARE / 100)),
                   reverse=True)[:LISTED]
    if not short:
        return None
    listed = ", ".join(f"{name} ({calls[name]:,} calls: {100 * cost / samples:.1f}% of the "
                       f"samples in its hooks, {100 * own[name] / samples:.1f}% in its code)"
                       for cost, name in short)
    sources = ",".join(dict.fromkeys(_source_name(name) for _, name in short))
    return (f"functions shorter than their hooks: {listed}. Their hooks cost more than "
            f"they do and shift the program's shares; rebuild with "
            f"-finstrument-functions-exclude-function-list={sources} to drop them "
            "(-N only hides them: their hooks still run)")
