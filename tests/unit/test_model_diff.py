"""collectors/model/diff.py: frames match across builds, align and subtract keep costs."""

from __future__ import annotations

from proftui.collectors.model.diff import align, counterpart, frame_key, subtract
from proftui.collectors.model.profile import (
    CPU_NS,
    SAMPLES,
    Frame,
    FrameTable,
    Profile,
    ProfileMeta,
)


def _profile(frames: list[Frame], stacks: list[tuple[list[int], float]],
             metrics=(SAMPLES,)) -> Profile:
    profile = Profile(ProfileMeta("sampler"), tuple(metrics), FrameTable(frames))
    assert profile.tree is not None
    for stack, value in stacks:
        profile.tree.add_stack(stack, [value] * len(metrics))
        profile.parts.setdefault("pid 1 tid 1", type(profile.tree)(len(metrics))).add_stack(
            stack, [value] * len(metrics))
    return profile.finalize()


def test_frames_match_by_name_and_module_base_name_not_address() -> None:
    old = [Frame("main", "/old/prog", address=0x10), Frame("work", "/old/prog", address=0x20),
           Frame("gone", "/old/prog", address=0x30)]
    new = [Frame("work", "/new/prog", address=0x99), Frame("main", "/new/prog", address=0x88)]
    base = _profile(old, [([0, 1], 3.0), ([0, 2], 1.0)])
    now = _profile(new, [([1, 0], 5.0)])
    aligned = align(base, now)
    assert frame_key(aligned.frames[0]) == ("work", "prog")
    assert len(aligned.frames) == 3  # "gone" is added after new's own frames
    work_node = now.tree.root.children[1].children[0]
    other = counterpart(work_node, aligned.tree)
    assert other is not None and other.total_cost == [3.0]
    assert aligned.total() == 4.0
    assert aligned.parts["pid 1 tid 1"].root.total_cost == [4.0]


def test_align_reorders_metrics_by_name_and_zeroes_missing_ones() -> None:
    frames = [Frame("f", "a.out")]
    base = _profile(frames, [([0], 2.0)], metrics=(SAMPLES,))
    now = _profile(frames, [([0], 7.0)], metrics=(CPU_NS, SAMPLES))
    aligned = align(base, now)
    assert aligned.metrics == now.metrics
    assert aligned.tree.root.children[0].self_cost == [0.0, 2.0]


def test_subtract_gives_the_phase_after_the_mark() -> None:
    frames = [Frame("main", "p"), Frame("a", "p"), Frame("b", "p")]
    mark = _profile(frames, [([0, 1], 10.0)])
    current = _profile(frames, [([0, 1], 12.0), ([0, 2], 8.0)])
    since = subtract(current, mark)
    main = since.tree.root.children[0]
    assert main.children[1].total_cost == [2.0]
    assert main.children[2].total_cost == [8.0]
    assert since.total() == 10.0
    assert since.parts["pid 1 tid 1"].root.total_cost == [10.0]
