"""The C runtimes' one CFI unwinder (csrc/common/pt_unwind.c), checked on its results.

The sampler walks its live stack in the signal handler; proftui-attach walks
the copy of the target's stack each sample carries.  Code built `-O2
-fomit-frame-pointer`, and glibc, keep no frame pointers: the known call
chains below appear only when the .eh_frame rows of the executable and of
libc are right, and must disappear when CFI is switched off
(PROFTUI_SAMPLER_UNWIND=fp, PROFTUI_ATTACH_UNWIND=fp), so these tests can fail.
"""

from __future__ import annotations

import platform

import pytest
from proftui.collectors.model.profile import Profile

from tests.conftest import build_fixture
from tests.helpers.collect import attached_profile, run_sampler
from tests.helpers.costs import names_on_paths
from tests.helpers.targets import ATT_NO_FP_FLAGS, ReadyTarget

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="CFI unwinding is x86-64 only")
# att_middle's last call to att_hot is a tail call (jmp) at -O2, so some
# samples rightly show att_outer -> att_hot: att_middle is optional.
HOT_CHAIN = ["main", "att_outer", "att_hot"]


def contains(path: list[str], chain: list[str]) -> bool:
    """`chain` appears in `path` in order (other frames may sit between); gcc's
    clones (`att_sort [clone .constprop.0]`, raw `att_sort.constprop.0`) count as
    their function."""
    it = iter(name.split(" [clone ", 1)[0].split(".", 1)[0] for name in path)
    return all(name in it for name in chain)


def profile_of(method: str, fixture: str, cfi: bool, monkeypatch: pytest.MonkeyPatch,
               seconds: str = "1.2") -> Profile:
    """Profile `fixture` (built without frame pointers) under the sampler or attached."""
    if not cfi:
        monkeypatch.setenv("PROFTUI_SAMPLER_UNWIND" if method == "sampler" else
                           "PROFTUI_ATTACH_UNWIND", "fp")
    binary = build_fixture(fixture, ATT_NO_FP_FLAGS)
    if method == "sampler":
        return run_sampler(binary, seconds, frequency_hz=500)[0]
    with ReadyTarget([binary, seconds]) as target:
        profile = attached_profile(target, method, frequency_hz=500, duration_s=0.7)
        target.finish(timeout=20)
    return profile


@pytest.mark.parametrize("method", ["sampler", "perf", "ptrace"])
@pytest.mark.parametrize("cfi", [True, False], ids=["cfi", "fp-only"])
def test_no_frame_pointer_chain_needs_cfi(method: str, cfi: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    profile = profile_of(method, "att_spin.c", cfi, monkeypatch)
    paths = names_on_paths(profile)
    hot = [p for p in paths if p and p[-1] == "att_hot"]
    assert hot, paths
    complete = sum(contains(p, HOT_CHAIN) for p in hot)
    if cfi:
        # Every stack that ends in att_hot is whole, up to main.
        assert complete == len(hot), hot
        assert any(p[-4:] == ["main", "att_outer", "att_middle", "att_hot"] for p in hot)
        if method != "sampler":
            assert any("DWARF CFI" in w for w in profile.meta.warnings)
    else:
        assert complete == 0, hot  # att_middle's caller is lost without CFI
        if method != "sampler":
            assert any("frame pointers only" in w for w in profile.meta.warnings)


@pytest.mark.parametrize("method", ["sampler", "perf", "ptrace"])
@pytest.mark.parametrize("cfi", [True, False], ids=["cfi", "fp-only"])
def test_unwinds_through_libc_callback(method: str, cfi: bool,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """att_cmp is called back from glibc's qsort: libc's own rows (read from
    its file through /proc/PID/root by attach, from memory by the sampler)
    lead back to att_sort and main."""
    profile = profile_of(method, "att_qsort.c", cfi, monkeypatch)
    paths = [p for p in names_on_paths(profile) if p and p[-1] == "att_cmp"]
    assert paths, names_on_paths(profile)
    whole = [p for p in paths if contains(p, ["main", "att_sort", "att_cmp"])]
    # Which libc frames sit between is glibc's business; that the chain
    # reaches main through them is ours.
    if cfi:
        assert len(whole) >= 0.9 * len(paths), paths
        assert all(len(p) > 3 for p in whole), whole  # libc's qsort frames are there
    else:
        assert len(whole) < 0.5 * len(paths), paths
