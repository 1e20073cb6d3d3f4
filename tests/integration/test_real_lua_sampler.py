"""The sampler on a real program (Lua 5.5, -O2, no frame pointers) against perf on the same run.

perf records the very execution proftui samples (`perf record -- proftui
record ...`), so both see the same work.  Both are statistical: at 1 kHz
(~2,500 samples per tool) the difference of two tools' shares of a 15% function
has a standard error of 1 point, and one CI run missed the 3-point bound (the
issue's acceptance bound) by 0.3; at 4 kHz (~10,000 samples each) it is 0.5
points, and the bound stays 3.  Shares are compared per ELF symbol,
as `perf report --sort sym` counts them: proftui's inlined frames fold into the
function they were inlined into, clone suffixes are dropped on both sides, and
samples taken in the kernel count for the user-space function that entered it
(perf's callchain gives that function).  perf also sees the sampler's own
handler (a few percent at 4 kHz on a loaded machine, whose caches each walk
finds cold); no profiler sees itself, so those samples leave perf's side and
the rest is shared out of 100, as proftui's is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from proftui.collectors.model import storage
from proftui.collectors.runtime.libraries import runtime_library_path

from tests.conftest import LUA_SCRIPTS, build_lua
from tests.helpers.reference import (
    perf_allowed,
    perf_runtime_share,
    perf_user_shares,
    proftui_symbol_shares,
)

SCALE = "25"  # about 3 s of work on an idle machine
HZ = "4000"  # ~10,000 samples per tool: two shares differ by chance under 0.5 points


def test_lua_sampler_top10_agrees_with_perf_on_the_same_run(tmp_path: Path) -> None:
    lua = build_lua()
    if not perf_allowed(tmp_path):
        pytest.skip("perf is not installed or not permitted here (perf_event_paranoid)")
    out, perf_data = tmp_path / "lua.proftui", tmp_path / "perf.data"
    run = subprocess.run(
        ["perf", "record", "-q", "-F", HZ, "-g", "-o", str(perf_data), "--",
         sys.executable, "-m", "proftui.tui.cli", "record", "-o", str(out), "--mode", "sampler",
         "-F", HZ, str(lua), str(LUA_SCRIPTS / "cpu.lua"), SCALE],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    profile = storage.load(out)
    ours = proftui_symbol_shares(profile)
    sampler = runtime_library_path("proftui_sampler")
    theirs = perf_user_shares(perf_data, lua.name[:15],  # comm is cut at 15 characters
                              runtime_library=sampler)
    print(f"the sampler's own cost as perf saw it: "
          f"{perf_runtime_share(perf_data, lua.name[:15], sampler):.1f}% of the samples")
    top = sorted(theirs, key=theirs.__getitem__, reverse=True)[:10]
    assert "luaV_execute" in top
    report = [f"{name:32} perf {theirs[name]:5.1f}%  proftui {ours.get(name, 0.0):5.1f}%"
              for name in top]
    print("\n".join(report))
    worst = max(abs(theirs[name] - ours.get(name, 0.0)) for name in top)
    assert worst <= 3.0, "\n".join(report)
