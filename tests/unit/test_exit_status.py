"""One wording of how the target ended, shared by the CLI, the TUI header and the text report."""

from __future__ import annotations

import signal

from proftui.collectors.formats.export.text import describe_exit as report_exit
from proftui.collectors.model.profile import SAMPLES, Profile, ProfileMeta
from proftui.collectors.runtime.launch import ExitInfo, describe_exit, shell_status
from proftui.tui.headless import exit_status_of


def ended(status: int | None, sig: int | None, complete: bool = True) -> Profile:
    meta = ProfileMeta(mode="sampler", exit_status=status, exit_signal=sig, complete=complete)
    return Profile(meta, (SAMPLES,)).finalize()


def test_every_front_end_words_the_exit_alike() -> None:
    for status, sig, words, shell in [
        (7, None, "exited with status 7", 7),
        (0, None, "exited with status 0", 0),
        (None, signal.SIGKILL, "killed by signal 9 (SIGKILL)", 137),
        (None, 99, "killed by signal 99 (signal 99)", 227),
    ]:
        info = ExitInfo(status, sig)
        assert describe_exit(status, sig) == info.describe() == words
        assert report_exit(ended(status, sig)) == words
        assert shell_status(status, sig) == info.shell_status() == shell
        assert exit_status_of(ended(status, sig)) == shell


def test_unknown_status_is_said_per_context() -> None:
    assert ExitInfo(None).describe() == "exited (status not visible to proftui)"
    assert report_exit(ended(None, None, complete=False)) == "running"
    assert report_exit(ended(None, None)) == "unknown"
    assert exit_status_of(ended(None, None)) == 0
