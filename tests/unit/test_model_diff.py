"""collectors/model/diff.py: frames match across builds, align and subtract keep costs."""

from __future__ import annotations

from collections.abc import Sequence

from proftui.collectors.base import Collector
from proftui.collectors.model.diff import align, counterpart, frame_key, subtract
from proftui.collectors.model.profile import (
    ALLOC_BYTES,
    CPU_NS,
    LIVE_BYTES,
    SAMPLES,
    Frame,
    Metric,
    Profile,
    ProfileMeta,
)

from tests.helpers.profiles import stacks_profile


def _profile(frames: list[Frame], stacks: list[tuple[list[int], float]],
             metrics: Sequence[Metric] = (SAMPLES,)) -> Profile:
    return stacks_profile(frames, stacks, metrics, part="pid 1 tid 1")


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


def test_align_matches_metrics_by_name() -> None:
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


class _Phases(Collector):
    """A collector whose collect() returns the given snapshots in turn."""

    mode = "sampler"

    def __init__(self, snapshots: list[Profile]) -> None:
        super().__init__([])
        self._snapshots = iter(snapshots)

    @property
    def pid(self) -> int | None:
        return None

    def start(self) -> None:
        pass

    def collect(self) -> Profile:
        return next(self._snapshots)

    def exit_info(self) -> None:
        return None

    def is_running(self) -> bool:
        return True


def _phase_profiles() -> tuple[Profile, Profile]:
    """Two snapshots of one run: two static functions share a name and module (matched
    by name they would be one), and live bytes shrink after the first (negative)."""
    def snapshot(a: float, b: float, live: float) -> Profile:
        profile = Profile(ProfileMeta(mode="heap"), (ALLOC_BYTES, LIVE_BYTES))
        main = profile.frames.intern(Frame("main", "/bin/prog", "m.c", 1, 0x100))
        one = profile.frames.intern(Frame("helper", "/bin/prog", "a.c", 3, 0x200))
        two = profile.frames.intern(Frame("helper", "/bin/prog", "b.c", 9, 0x300))
        profile.tree.add_stack([main, one], [a, live])
        profile.tree.add_stack([main, two], [b, 0.0])
        return profile.finalize()

    return snapshot(100.0, 10.0, 80.0), snapshot(150.0, 40.0, 30.0)


def test_reset_and_mark_give_the_same_numbers_for_a_phase() -> None:
    mark, later = _phase_profiles()
    collector = _Phases([mark, later])
    collector.reset()  # `r`: counters from now on
    reset = collector.snapshot()
    marked = subtract(later, mark)  # `b`: the phase since the mark
    for phase in (reset, marked):
        by_file = {phase.frames[n.frame_id].file: tuple(n.self_cost)
                   for n in phase.tree.nodes() if phase.frames[n.frame_id].function == "helper"}
        # each static helper keeps its own numbers; live bytes freed since are negative
        assert by_file == {"a.c": (50.0, -50.0), "b.c": (30.0, 0.0)}
    assert tree_costs(reset) == tree_costs(marked)


def tree_costs(profile: Profile) -> list[tuple[tuple[str, ...], tuple[float, ...]]]:
    return sorted((tuple(profile.frames[f].file or "" for f in n.path()), tuple(n.total_cost))
                  for n in profile.tree.nodes())
