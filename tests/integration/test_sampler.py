"""Sampler mode end to end: fixtures run under the preloaded sampler.

Accuracy (the 60/30/10 fixture against its own CPU clock on the same run,
1:2:3:4 threads) is asserted on proportions with and without frame pointers
(the CFI unwinder), call chains by name and order, and every run checks the
target's output and exit status.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.registry import COLLECTORS
from proftui.collectors.sampler.collector import SamplerCollector

from tests.conftest import build_fixture
from tests.helpers.collect import run_sampler, start_sampler
from tests.helpers.costs import paths_to, self_costs, total_of
from tests.helpers.reference import fixture_cpu_shares
from tests.helpers.targets import FP_FLAGS, NOFP_FLAGS


def sampled_shares(costs: dict[str, float]) -> dict[str, float]:
    """The sampler's work_a/b/c costs as % of the three."""
    work = {name: costs.get(name, 0.0) for name in ("work_a", "work_b", "work_c")}
    return {name: 100 * cost / sum(work.values()) for name, cost in work.items()}


@pytest.mark.parametrize("flags", [FP_FLAGS, NOFP_FLAGS], ids=["frame-pointers", "cfi"])
def test_smp_work_profile_matches_its_own_clock(flags: list[str], tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", flags)
    plain = subprocess.run([str(binary), "1000"], capture_output=True, text=True)
    timings = tmp_path / "timings"
    # 8 kHz over ~0.8 s: work_c's calls (~80 us) are shorter than a period, so
    # each gets one sample or none; at 2 kHz that spread reached 2.3 points
    # (rms 1.1 over 20 runs), at 8 kHz 0.5 (rms 0.2).
    profile, output = run_sampler(binary, "1000", str(timings), frequency_hz=8000)
    assert (output, profile.meta.exit_status) == (plain.stdout, plain.returncode)
    assert plain.stdout == "done 1000\n" and plain.returncode == 7
    assert profile.meta.mode == "sampler" and profile.meta.complete
    assert "perf" in profile.meta.clock or "timer" in profile.meta.clock
    costs = self_costs(profile)
    total = profile.total(0)
    assert total > 2000, f"too few samples: {total}"
    assert sum(costs.get(f, 0.0) for f in ("work_a", "work_b", "work_c")) > 0.95 * total
    # Held to the fixture's own CPU clock on this run, not to the 6:3:1 iteration
    # split: CI's shared VM gave work_a 56.7 % of the time for 60 % of the work.
    shares, measured = sampled_shares(costs), fixture_cpu_shares(timings)
    for name in ("work_a", "work_b", "work_c"):
        assert abs(shares[name] - measured[name]) <= 3, (shares, measured)
    assert 45 < measured["work_a"] < 75, measured  # the fixture still does what it says
    # Every sample of work_a sits under main, which sits under the libc start code.
    for path in paths_to(profile, "work_a"):
        assert path[-2:] == ["main", "work_a"], path
        assert path[0] == "_start", path
    cpu = profile.metric_index("cpu_ns")
    assert profile.total(cpu) == pytest.approx(total * profile.meta.period_ns)


def test_threads_sampled_in_proportion(tmp_path: Path) -> None:
    binary = build_fixture("smp_threads.c", [*FP_FLAGS, "-pthread"])
    report = tmp_path / "cpu"  # each worker's CPU ns from its own clock, units order
    profile, output = run_sampler(binary, str(report), frequency_hz=2000)
    assert (output, profile.meta.exit_status) == ("threads done\n", 0)
    pid = profile.meta.pids[0]
    per_thread = sorted(tree.root.total_cost[0] for part, tree in profile.parts.items()
                        if part.startswith(f"pid {pid} tid ") and tree.root.total_cost[0] > 20)
    assert len(per_thread) == 4, profile.parts.keys()
    cpu = [int(line) for line in report.read_text().split()]
    # Two vCPUs shared by four threads: a unit's cost varies a little between threads,
    # so samples are held to each thread's measured CPU time, and that to 1:2:3:4.
    for units, samples, spent in zip((1, 2, 3, 4), per_thread, sorted(cpu), strict=True):
        measured = spent / sum(cpu)
        assert abs(samples / sum(per_thread) - measured) <= 0.02, (per_thread, cpu)
        assert abs(measured - units / 10) <= 0.04, cpu
    for path in paths_to(profile, "spin"):
        assert path[-2:] == ["worker", "spin"], path


def test_dlclosed_plugin_resolves_by_name() -> None:
    plugin = build_fixture("smp_plugin_lib.c", ["-O2", "-g", "-shared", "-fPIC"],
                           output="libsmp_plugin.so")
    binary = build_fixture("smp_plugin.c", [*FP_FLAGS, "-ldl"])
    profile, output = run_sampler(binary, str(plugin))
    assert (output, profile.meta.exit_status) == ("plugin done\n", 0)
    costs = self_costs(profile)
    assert costs.get("plugin_spin", 0) > 20, sorted(costs.items(), key=lambda kv: -kv[1])[:8]
    assert costs.get("after_unload", 0) > 20
    frame = next(f for f in profile.frames if f.function == "plugin_spin")
    assert Path(frame.module).resolve() == plugin.resolve()
    for path in paths_to(profile, "plugin_spin"):
        assert path[-2:] == ["main", "plugin_spin"], path


def test_pause_and_resume() -> None:
    import time

    collector = start_sampler(build_fixture("smp_work.c", FP_FLAGS), "1500")
    try:
        time.sleep(0.2)
        collector.pause()
        paused = collector.snapshot().total(0)  # everything recorded before the pause
        time.sleep(0.4)
        still = collector.snapshot().total(0)
        collector.resume()
        time.sleep(0.4)
        resumed = collector.snapshot().total(0)
        profile = collector.wait()
    finally:
        collector.stop()
    assert profile.meta.exit_status == 7
    assert still - paused <= 2  # a handler already past the check may finish its sample
    assert resumed - still > 30


def test_static_binary_suggests_attach(tmp_path: Path) -> None:
    source = Path(__file__).parent.parent / "fixtures" / "smp_work.c"
    binary = tmp_path / "static_work"
    done = subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(source)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no static libc to link with: {done.stderr.strip()[:120]}")
    collector = SamplerCollector([str(binary)], CollectorOptions(output="log"))
    with pytest.raises(ProftuiError, match=r"statically linked.*attach"):
        collector.start()
    collector.stop()


def test_registered_as_default_mode() -> None:
    assert COLLECTORS["sampler"] is SamplerCollector
    assert SamplerCollector.can_pause


def test_wall_clock_sees_sleep() -> None:
    """CPU time ignores a sleeping function; wall-clock time gives it its half."""
    binary = build_fixture("smp_wall.c", NOFP_FLAGS)
    cpu_profile, output = run_sampler(binary)
    assert output.startswith("wall done\n")
    wall_profile, output = run_sampler(binary, wall_clock=True)
    assert output.startswith("wall done\n")
    sleep_s, spin_s = map(float, output.split()[3::2])  # its own wall clock
    assert "CLOCK_MONOTONIC" in wall_profile.meta.clock
    assert wall_profile.metric_index("wall_ns") == 0
    assert total_of(cpu_profile, "sleeper") < 0.05 * cpu_profile.total(0)
    assert total_of(cpu_profile, "spinner") > 0.9 * cpu_profile.total(0)
    # On a loaded machine spinning 0.4 s of CPU takes longer: compare with its clock.
    sleep_share = total_of(wall_profile, "sleeper") / wall_profile.total(0)
    truth = sleep_s / (sleep_s + spin_s)
    assert abs(sleep_share - truth) < 0.1, (truth, self_costs(wall_profile))


def test_wall_time_shown_first_agrees_with_the_programs_clock(tmp_path: Path) -> None:
    """--wall: what report and the folded export show first is wall time, and it agrees
    with the program's own clock within 2 points.  The sample count was shown first and
    fell short wherever the timer fired while the thread waited for a CPU: one signal
    for several periods (burn 37.8% against the program's 54.6% beside two busy loops);
    wall_ns adds each signal's overruns."""
    import re
    import sys

    binary = build_fixture("smp_half.c", NOFP_FLAGS)
    saved = tmp_path / "half.proftui"
    cli = [sys.executable, "-m", "proftui.tui.cli"]
    run = subprocess.run([*cli, "record", "--wall", "-o", str(saved), str(binary), "3"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    own = float(re.search(r"burn_share=([0-9.]+)", run.stdout)[1])  # type: ignore[index]
    report = subprocess.run([*cli, "report", str(saved)], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert re.search(r"^\s+time\s+seconds\s+seconds", report, re.M), report[:600]
    burn = next(line for line in report.splitlines() if line.endswith(" half_burn"))
    shown = float(burn.split()[0]) / 100
    folded = subprocess.run([*cli, "export", "-f", "folded", "-o", "-", str(saved)],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    weights = [(line.rsplit(" ", 1)[0], float(line.rsplit(" ", 1)[1]))
               for line in folded.splitlines() if line.strip()]
    folded_share = sum(w for stack, w in weights if "half_burn" in stack) / sum(
        w for _, w in weights)
    print(f"program's clock {own:.3f}, report {shown:.3f}, folded {folded_share:.3f}")
    assert abs(shown - own) <= 0.02 and abs(folded_share - own) <= 0.02


def test_posix_timer_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without perf_event: tick-bound timers, each sample weighted by its overruns."""
    monkeypatch.setenv("PROFTUI_SAMPLER_CLOCK", "timer")
    binary = build_fixture("smp_work.c", NOFP_FLAGS)
    # 2000 units: about 1.7 s of CPU, 400+ tick-bound samples; 600 gave ~125, whose
    # binomial spread (4.4 points on work_a) let the 6-point bound fail under load.
    timings = tmp_path / "timings"
    profile, output = run_sampler(binary, "2000", str(timings))
    assert (output, profile.meta.exit_status) == ("done 2000\n", 7)
    assert "timer" in profile.meta.clock
    assert any("POSIX CPU timers deliver" in w for w in profile.meta.warnings)
    cpu = profile.metric_index("cpu_ns")
    costs = self_costs(profile, cpu)
    total = profile.total(cpu)
    assert total > profile.total(0) * profile.meta.period_ns  # weights > 1 sample
    shares, measured = sampled_shares(costs), fixture_cpu_shares(timings)
    samples = profile.total(0)
    for name in ("work_a", "work_b", "work_c"):
        # 6 points, or 5 standard errors of the tick-bound samples where wider (a quiet
        # run: work_a 53.3 against 59.9 on about 470 samples, 2.7 standard errors).
        p = measured[name] / 100
        bound = max(6.0, 500 * (p * (1 - p) / samples) ** 0.5)
        assert abs(shares[name] - measured[name]) <= bound, (shares, measured, samples)


def test_dlopen_by_bare_name_uses_callers_runpath(tmp_path: Path) -> None:
    """dlopen("libx.so") searches the *caller's* RUNPATH ($ORIGIN here): the
    interposed dlopen must still find it, as the program does on its own."""
    import shutil

    plugin = build_fixture("smp_plugin_lib.c", ["-O2", "-g", "-shared", "-fPIC"],
                           output="libsmp_plugin.so")
    binary = build_fixture("smp_plugin.c", [*FP_FLAGS, "-ldl", "-Wl,-rpath,$ORIGIN"],
                           output="smp_plugin_rpath")
    shutil.copy(plugin, tmp_path / "libsmp_plugin.so")
    shutil.copy(binary, tmp_path / "host")
    plain = subprocess.run([str(tmp_path / "host"), "libsmp_plugin.so"], capture_output=True,
                           text=True)
    assert (plain.stdout, plain.returncode) == ("plugin done\n", 0), plain.stderr
    profile, output = run_sampler(tmp_path / "host", "libsmp_plugin.so")
    assert (output, profile.meta.exit_status) == ("plugin done\n", 0)
    assert self_costs(profile).get("plugin_spin", 0) > 20


def test_live_snapshots_grow_while_running() -> None:
    import time

    collector = start_sampler(build_fixture("smp_work.c", NOFP_FLAGS), "1500")
    try:
        time.sleep(0.4)
        first = collector.snapshot()
        time.sleep(0.4)
        second = collector.snapshot()
        assert collector.is_running() and not first.meta.complete
        assert first.meta.end_time is None and first.meta.exit_status is None
        assert 0 < first.total(0) < second.total(0)
        assert "work_a" in self_costs(second)
        final = collector.wait()
    finally:
        collector.stop()
    assert final.meta.complete and final.meta.exit_status == 7
    assert final.total(0) > second.total(0)


def test_frequency_bounds() -> None:
    binary = build_fixture("smp_work.c", FP_FLAGS)
    collector = SamplerCollector([str(binary)], CollectorOptions(frequency_hz=0))
    with pytest.raises(ProftuiError, match="at least 1 Hz"):
        collector.start()
    collector.stop()
    profile, output = run_sampler(binary, "100", frequency_hz=50_000)
    assert output == "done 100\n"
    assert profile.meta.period_ns == 100_000  # clamped to 10 kHz
    assert any("above the maximum" in w for w in profile.meta.warnings)
