"""StopSignals: the first SIGTERM/SIGHUP ends a run through proftui's own path; a
second one arriving after the block (a closed terminal signals the whole process
group, a wrapper passes its own on) must not kill proftui before it exits 128+N."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""\
    import os, signal, sys
    from proftui.collectors.runtime.launch import StopSignals
    with StopSignals() as stop:
        if sys.argv[1] == "stopped":
            os.kill(os.getpid(), signal.SIGHUP)
    os.kill(os.getpid(), signal.SIGHUP)  # the late one
    sys.exit(128 + (stop.received or 0))
""")


def run(case: str) -> int:
    return subprocess.run([sys.executable, "-c", SCRIPT, case], timeout=60).returncode


def test_a_late_stop_signal_does_not_kill_proftui_on_its_way_out() -> None:
    assert run("stopped") == 128 + 1


def test_without_a_stop_the_handlers_are_given_back() -> None:
    assert run("quiet") == -1  # SIGHUP's default action: the previous handler again
