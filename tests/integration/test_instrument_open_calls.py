"""Instrument mode's calls that have not returned yet.  Sampled (the default), their time
is in their nodes' ticks like any other; timed (--timed, collectors/instrument/
open_calls.py) it is on the target's shadow stacks until they return, so live views
read it there, and a target killed or stopped mid-call keeps what the last look saw."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proftui.collectors.instrument import open_calls
from proftui.collectors.model import storage

from tests.helpers.costs import flat_rows, self_of
from tests.helpers.instrument import build, kill_after_a_look, open_call_seen_live, start_ins_open


def test_live_view_counts_calls_that_have_not_returned() -> None:
    """While leaf_spin computes (no hook runs), its time is on the shadow stack only:
    the live profile reads it from the target instead of showing 0."""
    _live, final = open_call_seen_live(0, timed=True)
    assert self_of(final, "leaf_spin") == pytest.approx(3e9, rel=0.1)
    # 1 s of wall time of which the hooks' cost (two calls an iteration) is taken out
    assert 0.3e9 < flat_rows(final)["loop_calls"].total_cost[0] < 1.05e9


def test_unreadable_target_memory_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where ptrace rules forbid reading the target (ptrace_scope=3), open calls are left
    out and the notes say why; finished calls are counted as always."""
    def refuse(path: str, *args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(open_calls, "open", refuse, raising=False)
    collector = start_ins_open("1.5", "0.2", timed=True)
    try:
        time.sleep(1.0)
        live = collector.collect()
        final = collector.wait()
    finally:
        collector.stop()
    notes = [w for w in live.meta.warnings if "memory cannot be read" in w]
    assert len(notes) == 1 and "/mem: Permission denied" in notes[0], live.meta.warnings
    assert self_of(live, "leaf_spin") == 0
    assert self_of(final, "leaf_spin") > 1e9


def test_a_killed_target_keeps_the_calls_it_never_returned_from() -> None:
    """Quitting (or a crash) while leaf_spin computes: the final profile keeps the time the
    last live look saw open, and says so, instead of showing nothing."""
    live, final = kill_after_a_look(start_ins_open("30", "1", timed=True))
    spun = self_of(live, "leaf_spin")
    assert spun > 0.8e9
    assert final.meta.exit_signal == signal.SIGKILL and not final.meta.complete
    assert self_of(final, "leaf_spin") == pytest.approx(spun, rel=0.01)  # its callees grew
    assert any("counted up to the last look at them" in w for w in final.meta.warnings)


def test_record_stopped_by_ctrl_c_keeps_the_open_calls(tmp_path: Path) -> None:
    """`proftui record` has no live view: it looks at the open calls once a second while it
    waits, so Ctrl-C (SIGINT to the terminal's foreground group) during leaf_spin keeps it."""
    out = tmp_path / "open.proftui"
    run = subprocess.Popen([sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out),
                            "--mode", "instrument", "--timed", str(build("ins_open.c")), "30",
                            "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    time.sleep(3.0)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert out.exists(), err
    profile = storage.load(out)
    assert self_of(profile, "leaf_spin") > 0.8e9, err
    assert any("counted up to the last look at them" in w for w in profile.meta.warnings)
