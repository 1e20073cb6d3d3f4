"""The mtrace/valgrind-style leak summary at the end of the text report."""

from __future__ import annotations

from proftui.collectors.formats.export.text import leak_summary, render_text
from proftui.collectors.model.lines import add_code_cost
from proftui.collectors.model.profile import (
    ALLOCS,
    LEAKED_BYTES,
    LEAKS,
    LIVE_BYTES,
    SAMPLES,
    CodeSite,
    Frame,
    Profile,
    ProfileMeta,
)

MAIN = Frame("main", "/bin/prog", "/src/prog.c", 40, 0x1000)
OUTER = Frame("leak_outer", "/bin/prog", "/src/prog.c", 30, 0x1100)
LEAF = Frame("site_leak", "/bin/prog", "/src/prog.c", 20, 0x1200)
HALF = Frame("site_half", "/bin/prog", "/src/prog.c", 10, 0x1300)
INL = Frame("make_buf", "/bin/prog", "/src/buf.h", 5, None, inlined=True)


def heap_profile(with_blocks: bool = True) -> Profile:
    metrics = (LIVE_BYTES, LEAKED_BYTES, LEAKS, ALLOCS) if with_blocks else \
        (LIVE_BYTES, LEAKED_BYTES, ALLOCS)
    profile = Profile(ProfileMeta(mode="heap"), metrics)
    ids = {f.function: profile.frames.intern(f) for f in (MAIN, OUTER, LEAF, HALF, INL)}

    def add(path: list[str], live: float, blocks: float, allocs: float) -> list[float]:
        values = [live, live, blocks, allocs] if with_blocks else [live, live, allocs]
        profile.tree.add_stack([ids[n] for n in path], values)
        return values

    values = add(["main", "leak_outer", "site_leak"], 204800, 50, 50)
    add_code_cost(profile, "/bin/prog", 0x1210, CodeSite(0x1200, "/src/prog.c", 22), values)
    values = add(["main", "site_half"], 500000, 5, 10)
    add_code_cost(profile, "/bin/prog", 0x1310, CodeSite(0x1300, "/src/prog.c", 12), values)
    values = add(["main", "site_half", "make_buf"], 100, 1, 1)  # an inlined leaf
    add_code_cost(profile, "/bin/prog", 0x1320, CodeSite(0x1300, "/src/buf.h", 7), values)
    add(["main"], 0, 0, 100)  # allocated and freed: no leak
    return profile.finalize()


def test_summary_lists_each_leaking_path_with_its_lines() -> None:
    lines = leak_summary(heap_profile())
    text = "\n".join(lines)
    assert "reachability not checked" in lines[1]
    assert "  704,900 bytes in 56 blocks leaked from 3 call paths" in lines
    first = lines.index("  500,000 bytes in 5 blocks leaked, path 1 of 3:")
    assert lines[first + 1:first + 3] == ["    at site_half (prog.c:12)", "    by main (prog.c:40)"]
    second = lines.index("  204,800 bytes in 50 blocks leaked, path 2 of 3:")
    assert lines[second + 1:second + 4] == ["    at site_leak (prog.c:22)",
                                            "    by leak_outer (prog.c:30)",
                                            "    by main (prog.c:40)"]
    assert "  100 bytes in 1 block leaked, path 3 of 3:" in lines
    assert "    at make_buf [inlined] (buf.h:7)" in lines
    assert "site_freed" not in text and text.count("path ") == 3


def test_summary_ends_the_text_report() -> None:
    report = render_text(heap_profile())
    assert report.rstrip().endswith("by main (prog.c:40)")
    assert report.index("Call tree") < report.index("Leak summary")


def test_summary_counts_the_paths_past_its_limit() -> None:
    short = leak_summary(heap_profile(), limit=1)
    assert short[-1] == "  ... and 2 more leaking call paths (204,900 bytes)"


def test_without_block_counts_says_so() -> None:
    lines = leak_summary(heap_profile(with_blocks=False))
    assert "  704,900 bytes leaked from 3 call paths (block counts not known)" in lines
    assert "  500,000 bytes leaked, path 1 of 3:" in lines


def test_summary_of_a_heap_profile_without_leaks() -> None:
    profile = Profile(ProfileMeta(mode="heap"), (LEAKED_BYTES, LEAKS))
    profile.frames.intern(MAIN)
    profile.tree.add_stack([0], [0, 0])
    lines = leak_summary(profile.finalize())
    assert lines[-1] == "  no leaks: every allocation was freed before exit"
    profile.meta.complete = False  # still running
    assert leak_summary(profile)[-1] == "  none known yet: the target has not exited"


def test_no_summary_without_heap_metrics() -> None:
    cpu = Profile(ProfileMeta(mode="sampler"), (SAMPLES,))
    assert leak_summary(cpu.finalize()) == []
    assert "Leak summary" not in render_text(cpu)


def test_deep_paths_are_cut() -> None:
    profile = Profile(ProfileMeta(mode="heap"), (LEAKED_BYTES,))
    ids = [profile.frames.intern(Frame(f"f{i}", "/bin/p")) for i in range(40)]
    profile.tree.add_stack(ids, [64])
    lines = leak_summary(profile.finalize())
    assert lines[-1] == "    ... 24 outer callers"
    assert "    at f39 (p)" in lines and "    by f24 (p)" in lines
