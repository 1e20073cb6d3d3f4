"""Attach accuracy (issue 26): a request-serving fixture against `perf record -p` over
the same window, stacks deeper than the perf sample's first stack copy, and what a
stack the unwinder could not finish looks like.

tests/fixtures/att_server.c is a small Redis: an epoll loop serving a client on
loopback, its CPU in parsing (att_parse) and in write().  The reference is perf
itself, attached to the same process over the same window (task-clock at the same
rate), so both see the same run.  tests/fixtures/att_deep.c keeps its hot leaf 26 KiB
of stack below main in code without frame pointers.
"""

from __future__ import annotations

import math
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.slices import range_profile
from proftui.collectors.symbols.stacks import PSEUDO_ROOTS
from proftui.collectors.symbols.symbolizer import Symbolizer

from tests.conftest import build_fixture
from tests.helpers.collect import attach, attached_profile
from tests.helpers.reference import (
    normal_name,
    perf_allowed,
    perf_user_shares,
    proftui_symbol_shares,
)
from tests.helpers.targets import ReadyTarget

NO_FP = ["-O2", "-g", "-fomit-frame-pointer"]
SECONDS = 2.0
HZ = 4000  # both tools: ~5,000 samples in the window (1 kHz gave ~1,000, chance alone 3 points)
# perf a little apart: two samplers at one rate fire in step, and the one just after the
# other's interrupt skews (two agents at one rate: 5 points, 1 run in 23; test_agent)
PERF_HZ = HZ - 3


def alias(name: str) -> str:
    """glibc's names for one function (perf reads __GI___libc_write from the DWARF,
    proftui write from the symbol table) as one name."""
    name = normal_name(name).replace("__GI_", "")
    return re.sub(r"^__+", "", re.sub(r"^__libc_", "", name))


def perf_record(target: ReadyTarget, data: Path) -> subprocess.Popen[bytes]:
    """`perf record -p` on `target` into `data` (task-clock at PERF_HZ, frame-pointer
    call chains, realtime stamps)."""
    return subprocess.Popen(["perf", "record", "-q", "-e", "task-clock", "-F", str(PERF_HZ),
                             "-g", "-k", "realtime", "-p", str(target.pid), "-o", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def perf_finish(perf: subprocess.Popen[bytes]) -> None:
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=60)
    assert perf.returncode in (0, -signal.SIGINT), err


def with_perf(target: ReadyTarget, method: str, tmp_path: Path, seconds: float = SECONDS,
              second: bool = False) -> tuple[Profile, dict[str, float], dict[str, float]]:
    """proftui attached with `method` for `seconds`, and `perf record -p` (started
    before it, stopped after) cut to the same window: the profile cut to its whole
    interior time slices, perf's shares over exactly those slices, and with `second`
    the shares of a second `perf record -p` started just after proftui ({} without)."""
    if not perf_allowed(tmp_path):
        pytest.skip("perf record cannot sample here (not installed or not permitted): "
                    "no reference to compare with")
    data, data2 = tmp_path / "perf.data", tmp_path / "perf2.data"
    perf = perf_record(target, data)
    perf2 = None
    try:
        time.sleep(0.3)  # perf has no "attached" signal
        collector = attach(target.pid, method, frequency_hz=HZ, duration_s=seconds)
        if second:
            perf2 = perf_record(target, data2)
        profile = collector.wait()
        collector.stop()
    finally:
        perf_finish(perf)
        if perf2 is not None:
            perf_finish(perf2)
    # The two samplers perturb the target together only while both are attached, and
    # a server's mix moves with the perturbation: compare the same seconds, not the
    # runs (perf's alone before and after once differed by 10 points in write()).
    slices = profile.slices
    assert slices is not None and len(slices) > 4, "the attach profile has no timeline"
    first, last = 1, len(slices) - 1  # whole slices inside the sampling window
    if perf2 is not None:  # and inside the second perf's, which starts after proftui
        started = perf_first_sample(data2)
        first = max(first, math.ceil((started - slices.start) / slices.width))
        assert last - first >= 4, ("the second perf started late", started, slices.start)
    profile = range_profile(profile, first * slices.width, last * slices.width)
    window = (slices.start + first * slices.width, slices.start + last * slices.width)
    comm = Path(target.proc.args[0]).name[:15]  # type: ignore[index]

    def shares(recorded: Path) -> dict[str, float]:
        reference = Counter[str]()
        for name, share in perf_user_shares(recorded, comm, window).items():
            reference[alias(name)] += share
        return dict(reference)

    return profile, shares(data), shares(data2) if perf2 is not None else {}


def perf_first_sample(data: Path) -> float:
    """The realtime stamp of the first sample in a `perf record -k realtime` file."""
    script = subprocess.run(["perf", "script", "-i", str(data), "-F", "time"],
                            capture_output=True, text=True, timeout=300)
    assert script.returncode == 0, script.stderr
    stamps = [float(line.strip().rstrip(":")) for line in script.stdout.splitlines()
              if line.strip()]
    assert stamps, "the second perf recorded no samples"
    return stamps[0]


def server(seconds: float = SECONDS) -> ReadyTarget:
    """The server, running 4 s longer than an attach of `seconds`."""
    # One connection, 1 KiB replies: the server sleeps in epoll_wait between requests,
    # as Redis does under redis-benchmark (the case of issue 26).
    return ReadyTarget([build_fixture("att_server.c", ["-O2", "-g"]), str(seconds + 4), "1", "1"])


def server_shares(method: str, tmp_path: Path, seconds: float = SECONDS, second: bool = False
                  ) -> tuple[Profile, dict[str, float], dict[str, float], dict[str, float]]:
    """The server attached with `method` and recorded by perf over the same window of
    `seconds`: the profile, its self shares, perf's (glibc's aliases as one name) and,
    with `second`, a second perf's (with_perf)."""
    target = server(seconds)
    try:
        profile, reference, reference2 = with_perf(target, method, tmp_path, seconds, second)
        out, status = target.finish()
    finally:
        target.kill()
    assert status == 0 and out.startswith("served "), out
    return profile, proftui_symbol_shares(profile, alias), reference, reference2


def test_perf_method_agrees_with_perf_on_a_server(tmp_path: Path) -> None:
    """proftui's perf method within 5 points of one of two `perf record -p` of the same
    seconds, one started before it and one just after.

    Samplers of one run do not see quite the same mix: a server sleeps and wakes
    thousands of times a second, the kernel stops and restarts every task-clock timer
    each time, and the timers fall into step (37-70% of a second perf's samples came
    within 10 us of the first's in 4 runs, where timers out of step give 8%): each
    sampler's share moves with the step it fell into. Two `perf record -p` of one run,
    beside two busy loops, differed by up to 7.0 points in att_parse (9 runs; 0.2-7.0),
    and a clean CI run had proftui 6.1 under the one perf then compared. The perf
    started just after proftui came within 0.1-0.4 points of it in 14 of 15 runs, quiet
    and beside two busy loops (2.7 in the 15th, 2,393 samples, where the first perf was
    2.8 off; the first perf: 0.5-2.8); a mistake of proftui's own (a sample charged to
    the wrong function, samples dropped) is far from both."""
    # 3.5 s at 4 kHz: about 5,000 samples each in the shared window, where 2 s at 1 kHz
    # (~1,000) let chance alone reach the bound.  The server runs 4 s longer.
    _profile, mine, first, second = server_shares("perf", tmp_path, seconds=3.5, second=True)
    # The workload's own shape by perf: both sides of the server weigh (write was 14.3%
    # once beside two busy loops, where 15 was asked).
    assert first.get("att_parse", 0) > 10 and first.get("write", 0) > 10, first
    samples = _profile.total()
    names = {*mine, *first, *second}

    def worst(reference: dict[str, float]) -> float:
        return max(abs(mine.get(n, 0) - reference.get(n, 0)) for n in names)

    reference = min((first, second), key=worst)
    print(f"worst {worst(reference):.1f} points over {samples:.0f} samples "
          f"(proftui, first perf, second perf):",
          {n: (round(mine.get(n, 0), 1), round(first.get(n, 0), 1), round(second.get(n, 0), 1))
           for n in sorted(names, key=lambda n: -first.get(n, 0))[:8]})

    def bound(share: float) -> float:
        """5 points, or 5 standard errors of the difference of two samplers of the same
        seconds when fewer samples make that wider: beside two busy loops the server got
        1,648 samples (quiet: ~8,500), and att_parse was 71.8 against 66.2."""
        p = share / 100
        return max(5.0, 500 * math.sqrt(2 * p * (1 - p) / max(samples, 1)))

    off = {n: (mine.get(n, 0), first.get(n, 0), second.get(n, 0)) for n in names
           if abs(mine.get(n, 0) - reference.get(n, 0)) > bound(reference.get(n, 0))}
    assert not off, (off, samples, sorted(mine.items(), key=lambda kv: -kv[1])[:6])


def test_ptrace_does_not_charge_the_places_a_server_sleeps(tmp_path: Path) -> None:
    """Stops that find the server back in epoll_wait would carry all the CPU time since
    the previous sample (epoll_wait 46-61% against perf's 11-12%): stops that do not land
    in running code are dropped, and the notes say so."""
    # ptrace's stops get few samples into the window on a loaded machine (35 in 2 s
    # beside two busy loops): a run with under 200 is tried again with a longer window
    # (3 runs at most), and the bound widens by 4 standard errors of the share at the
    # samples there are (at least 40).
    for seconds in (SECONDS, 2 * SECONDS, 4 * SECONDS):
        profile, mine, reference, _ = server_shares("ptrace", tmp_path, seconds)
        if profile.total(0) >= 200:
            break
    samples = profile.total(0)
    assert samples >= 40, (samples, mine, reference)
    share = reference.get("epoll_wait", 0) / 100
    error = 400 * math.sqrt(max(share * (1 - share), 0.01) / samples)
    assert mine.get("epoll_wait", 0) <= reference.get("epoll_wait", 0) + 5 + error, \
        (samples, mine, reference)
    assert mine.get("att_parse", 0) > 10, (mine, reference)
    notes = [w for w in profile.meta.warnings if w.startswith("ptrace: of ")]
    assert len(notes) <= 1, profile.meta.warnings  # said once, when anything was dropped


@pytest.mark.parametrize("method", ["perf", "ptrace"])
def test_deep_stacks_stay_under_main(method: str) -> None:
    """26 KiB of stack between main and the leaf, no frame pointers: perf's first 8 KiB
    copies fall short, the walk reads on and the copies grow; ptrace reads what it needs."""
    with ReadyTarget([build_fixture("att_deep.c", NO_FP), "8"]) as target:
        profile = attached_profile(target, method, frequency_hz=1000, duration_s=SECONDS)
    total = profile.tree.root.total_cost[0]
    assert total >= 100, total
    under_main = sum(node.total_cost[0] for node in profile.tree.nodes()
                     if profile.frames[node.frame_id].function == "main"
                     and node.parent is not None and node.parent.parent is not None
                     and profile.frames[node.parent.frame_id].function != "main")
    roots = {profile.frames[c.frame_id].function: c.total_cost[0]
             for c in profile.tree.root.children.values()}
    assert under_main >= 0.99 * total, (under_main, total, roots)
    leaf = [node for node in profile.tree.nodes()
            if profile.frames[node.frame_id].function == "deep_leaf"]
    assert max(len(node.path()) for node in leaf) >= 44  # _start ... main, deep_40 ... deep_0


def test_cut_stacks_start_at_a_root_that_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    """Frame pointers only (PROFTUI_ATTACH_UNWIND=fp) through code built without them: the
    chains stop early.  No raw address may stand as a root: a cut stack hangs under a
    [stack cut...] root, and the notes say how many."""
    monkeypatch.setenv("PROFTUI_ATTACH_UNWIND", "fp")
    with ReadyTarget([build_fixture("att_deep.c", NO_FP), "8"]) as target:
        profile = attached_profile(target, "perf", frequency_hz=1000, duration_s=1.0)
    roots = [profile.frames[c.frame_id] for c in profile.tree.root.children.values()]
    assert any(f.function in PSEUDO_ROOTS.values() for f in roots), roots
    for frame in roots:
        assert frame.function in PSEUDO_ROOTS.values() or frame.function == "_start", roots
    assert any("have incomplete stacks" in w for w in profile.meta.warnings), \
        profile.meta.warnings


def test_glibc_alias_is_not_inlined_into_itself() -> None:
    """A multi-threaded program's write() runs glibc's cancellable path, where the
    DWARF shows __libc_write inlined into itself; the out-of-line copy is named
    write (symbol table), so the chain read write -> __GI___libc_write [inlined]."""
    libc = next((line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                 if "/libc.so" in line), None)
    if libc is None or Symbolizer(use_cache=False).module(libc).debug_path is None:
        pytest.skip(f"{libc or 'libc'} has no DWARF here: no inline frames to check")
    with ReadyTarget([build_fixture("att_write.c", ["-O2", "-g", "-pthread"]), "6"]) as target:
        profile = attached_profile(target, "perf", frequency_hz=1000, duration_s=1.0)
    writes = [node for node in profile.tree.nodes()
              if profile.frames[node.frame_id].function == "write"]
    assert writes, "no sample in write"
    for node in writes:
        for child in node.children.values():
            frame = profile.frames[child.frame_id]
            assert not (frame.inlined and alias(frame.function) == "write"), frame
