"""Saved profiles garbled the way a broken or hostile writer would: a real saved profile
(every table filled in) as JSON, the paths into it, and mutations of them (values swapped
for other types, keys dropped, numbers made negative, NaN, huge or out of range, lists
and objects exchanged)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from proftui.collectors.model import storage
from proftui.collectors.model.profile import (
    CPU_NS,
    SAMPLES,
    CodeSite,
    Frame,
    LeakFrame,
    LeakStack,
    Profile,
    ProfileMeta,
)


def rich_profile() -> Profile:
    """A profile with every saved table filled in (as a real instrument+sampler run has)."""
    meta = ProfileMeta(mode="sampler", argv=["/bin/prog", "-x"], pids=[10], threads={11: "w"},
                       period_ns=1_000_000, clock="perf task-clock", start_time=1.7e9,
                       end_time=1.7e9 + 2, exit_status=0, warnings=["w1"], lines_note="n")
    profile = Profile(meta, (SAMPLES, CPU_NS))
    ids = [profile.frames.intern(Frame(name, "/bin/prog", "/src/p.c", 10 + i, 0x1000 + 16 * i,
                                       f"_Z{name}", "ab12", name == "inl"))
           for i, name in enumerate(("main", "a", "leaf", "inl", "rec"))]
    main, a, leaf, inl, rec = ids
    profile.tree.add_stack([main, a, leaf], [60, 6e7], calls=3)
    profile.tree.add_stack([main, a, inl], [5, 5e6])
    profile.tree.add_stack([main, rec, rec, rec], [7, 7e6], calls=1)
    profile.tree.add_stack([main], [1, 1e6], calls=1)
    part = profile.parts.setdefault("pid 10 tid 11", type(profile.tree)(2))
    part.add_stack([main, a], [2, 2e6])
    profile.arcs = {(main, a): 3, (a, leaf): 3, (rec, rec): 2}
    profile.line_costs = {("/src/p.c", 12): [60, 6e7], ("/src/p.c", 13): [5, 5e6]}
    profile.address_costs = {("/bin/prog", 0x1024): [60, 6e7]}
    profile.address_sites = {("/bin/prog", 0x1024): CodeSite(0x1020, "/src/p.c", 12)}
    profile.sources = {"/src/p.c": "int main(void) { return 0; }\n"}
    profile.leaks = [LeakStack(500.0, 5.0, (LeakFrame("leaf", "/bin/prog", "/src/p.c", 12),
                                            LeakFrame("main", "/bin/prog", None, None, True)))]
    return profile.finalize()


BASE = storage.profile_to_dict(rich_profile())


# Values a broken or hostile writer puts where something else belongs.
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.just(""), st.just("\udcff\ud800"), st.text(max_size=8),
    st.integers(-(2**70), 2**70), st.sampled_from([-1, 0, 1, 2**31, 2**63, 2**64, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.just([]), st.just({}),
    st.just([[]]), st.just([None, None, None, None]), st.just({"0": "x"}),
    st.lists(st.integers(-3, 10), max_size=5),
)


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every JSON path in `value` (container items and object keys), iteratively."""
    out: list[tuple[Any, ...]] = []
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        out.append(at)
        if isinstance(item, dict):
            stack.extend((v, (*at, k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*at, i)) for i, v in enumerate(item))
    return sorted(out, key=repr)


PATHS = json_paths(BASE)[1:]  # not the document itself


def mutate(doc: Any, path: tuple[Any, ...], action: str, value: Any) -> None:
    """Apply one mutation to `doc` at `path`: drop the key, swap its type, negate or grow
    a number, or replace the value with `value`."""
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    if action == "drop":
        del parent[key]
    elif action == "swap":  # list <-> object, number <-> string, etc.
        parent[key] = ({str(i): v for i, v in enumerate(old)} if isinstance(old, list)
                       else list(old.values()) if isinstance(old, dict)
                       else str(old) if isinstance(old, int | float) and not isinstance(old, bool)
                       else [old])
    elif action == "negate" and isinstance(old, int | float) and not isinstance(old, bool):
        parent[key] = -old - 1
    elif action == "grow" and isinstance(old, int) and not isinstance(old, bool):
        parent[key] = old + 10**6  # out-of-range frame ids, parent indexes, metrics...
    else:
        parent[key] = value


MUTATION = st.tuples(st.sampled_from(range(len(PATHS))),
                     st.sampled_from(["drop", "swap", "negate", "grow", "replace", "replace"]),
                     HOSTILE)


def write_mutated(path: Path, mutations: list[tuple[int, str, Any]]) -> Path:
    """BASE with `mutations` (index into PATHS, action, value) applied, saved at `path` as
    a proftui profile; a mutation of a path an earlier one removed or retyped is passed
    over."""
    doc = json.loads(json.dumps(BASE))
    for index, action, value in mutations:
        try:
            mutate(doc, PATHS[index], action, value)
        except (KeyError, IndexError, TypeError):
            continue
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path
