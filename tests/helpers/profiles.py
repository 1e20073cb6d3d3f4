"""Profiles for the tests: hand-built ones (no runtime, no compiler), and the check that
a profile survives saving and loading."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import (
    CALLS,
    CPU_NS,
    SAMPLES,
    Frame,
    FrameTable,
    Metric,
    Profile,
    ProfileMeta,
)


def sample_profile() -> Profile:
    """main -> a -> leaf (60), main -> b -> leaf (30), main (10), rec -> rec -> rec (5)."""
    profile = Profile(ProfileMeta(mode="sampler", argv=["prog"], pids=[1]), (SAMPLES,))
    ids = {n: profile.frames.intern(Frame(n, module="/bin/prog")) for n in
           ("main", "a", "b", "leaf", "rec")}
    tree = profile.tree
    assert tree is not None
    tree.add_stack([ids["main"], ids["a"], ids["leaf"]], [60])
    tree.add_stack([ids["main"], ids["b"], ids["leaf"]], [30])
    tree.add_stack([ids["main"]], [10])
    tree.add_stack([ids["main"], ids["rec"], ids["rec"], ids["rec"]], [5])
    return profile.finalize()


def frame_id(profile: Profile, name: str) -> int:
    for i, frame in enumerate(profile.frames):
        if frame.function == name:
            return i
    raise KeyError(name)


def stacks_profile(frames: list[Frame], stacks: list[tuple[list[int], float]],
                   metrics: Sequence[Metric] = (SAMPLES,), argv: Sequence[str] = ("prog",),
                   part: str | None = None) -> Profile:
    """A sampler profile of `argv` and `frames` whose tree holds `stacks` (frame indexes,
    outermost first, with one value for every metric), and part `part` the same if given."""
    profile = Profile(ProfileMeta("sampler", argv=list(argv)), tuple(metrics),
                      FrameTable(frames))
    for stack, value in stacks:
        profile.tree.add_stack(stack, [value] * len(metrics))
        if part is not None:
            profile.parts.setdefault(part, type(profile.tree)(len(metrics))).add_stack(
                stack, [value] * len(metrics))
    return profile.finalize()


def template_profile() -> Profile:
    """main -> std::vector<int, std::allocator<int> >::push_back(int const&) (3 samples,
    3 ms of CPU), main (1, 1 ms): a long template name, in samples and CPU time."""
    metrics = (Metric("samples", "count"), Metric("cpu_ns", "ns"))
    profile = Profile(ProfileMeta(mode="sampler"), metrics)
    main = profile.frames.intern(Frame("main", "/bin/x"))
    work = profile.frames.intern(Frame("std::vector<int, std::allocator<int> >::push_back("
                                       "int const&)", "/bin/x"))
    profile.tree.add_stack([main, work], [3.0, 3e6])
    profile.tree.add_stack([main], [1.0, 1e6])
    return profile.finalize()


def deep_chain(depth: int = 100_000) -> Profile:
    """main -> rec -> rec ... `depth` levels of rec, each with self cost 100 ns and 1 call."""
    profile = Profile(ProfileMeta(mode="instrument", argv=["rec"], pids=[1]), (CPU_NS, CALLS))
    main = profile.frames.intern(Frame("main", "/bin/rec", address=0x1000))
    rec = profile.frames.intern(Frame("rec", "/bin/rec", address=0x1100))
    node = profile.tree.root.child(main)
    node.self_cost, node.calls = [10.0, 1.0], 1
    for _ in range(depth):
        node = node.child(rec)
        node.self_cost, node.calls = [100.0, 1.0], 1
    return profile.finalize()


def distinct_deep_stacks(count: int = 2000, depth: int = 128, seed: int = 7) -> Profile:
    """`count` samples whose stacks are `depth` frames deep and nearly all distinct, as a
    recursion that takes one of two functions at each level makes them: main, then
    `left` or `right` drawn at every level (about `depth` tree nodes a sample), 2
    metrics (samples and cpu_ns), one thread."""
    rng = random.Random(seed)
    profile = Profile(ProfileMeta(mode="sampler", argv=["deep"], pids=[1]), (SAMPLES, CPU_NS))
    main = profile.frames.intern(Frame("main", "/bin/deep", address=0x1000))
    sides = [profile.frames.intern(Frame(name, "/bin/deep", address=0x1100 + 0x100 * i))
             for i, name in enumerate(("left", "right"))]
    for _ in range(count):
        stack = [main, *(sides[rng.getrandbits(1)] for _ in range(depth - 1))]
        profile.tree.add_stack(stack, [1.0, 1e6])
    profile.parts["pid 1 tid 1"] = profile.tree
    return profile.finalize()


def parts_profile(stacks: dict[str, list[tuple[list[str], float]]], threads: dict[int, str],
          whole_processes: bool = False) -> Profile:
    """A profile with `stacks` per part label (outermost first), merged into the tree."""
    profile = Profile(meta=ProfileMeta(mode="sampler", threads=threads), metrics=(SAMPLES,))
    for label, items in stacks.items():
        part = profile.parts.setdefault(label, type(profile.tree)(1))
        for names, cost in items:
            ids = [profile.frames.intern(Frame(n, module="/bin/x", address=0x1000 + len(n)))
                   for n in names]
            part.add_stack(ids, [cost])
            profile.tree.add_stack(ids, [cost])
    return profile.finalize()


def two_processes() -> Profile:
    """Two processes: pid 10 (threads 10 and 11, prog and worker) and pid 20 (child)."""
    return parts_profile({
        "pid 10 tid 10": [(["main", "a"], 10.0)],
        "pid 10 tid 11": [(["start", "b"], 30.0)],
        "pid 20 tid 20": [(["main", "c"], 60.0)],
    }, {10: "prog", 11: "worker", 20: "child"})


def assert_round_trips(profile: Profile, path: Path) -> Profile:
    """`profile` saved at `path` and loaded back is the same profile, with the sources it
    names embedded; the loaded one."""
    storage.save(profile, path)
    loaded = load_any(path)
    expected = storage.profile_to_dict(profile)
    expected["sources"] = storage.gather_sources(profile)
    assert storage.profile_to_dict(loaded) == expected
    return loaded
