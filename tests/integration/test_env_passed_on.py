"""What a profiled program passes on (issue 26): without --follow, the programs the target
runs (system(), fork+exec) no longer inherit LD_PRELOAD or the PROFTUI_* variables, while
the target's own exec (a wrapper script exec'ing the real program) is profiled as before;
with --follow everything follows, as it did.  The target's output and status are its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import build_fixture


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", "--text", *args],
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def reports(output: str) -> dict[str, str]:
    """The fixture's lines, by who wrote them."""
    return dict(line.split(": ", 1) for line in output.splitlines()
                if line.split(": ", 1)[0] in ("target", "fork+exec child", "second image",
                                              "system() child"))


@pytest.mark.parametrize(("mode", "runtimes"),
                         [(["--mode", "sampler"], {"proftui_sampler"}),
                          (["--mode", "heap"], {"proftui_heap"}),
                          (["--mode", "sampler", "--heap"], {"proftui_heap", "proftui_sampler"})])
def test_children_do_not_inherit_proftui(mode: list[str], runtimes: set[str]) -> None:
    binary = build_fixture("env_children.c", ["-O1", "-g"])
    result = run(*mode, str(binary))
    assert result.returncode == 5, result.stderr  # the second image's status, as without us
    seen = reports(result.stdout)
    assert seen["system() child"] == "proftui variables: 0", seen
    assert seen["fork+exec child"] == "env= maps=", seen
    # the target and its own second image run the runtimes; the variables are gone from
    # what either passes on (and so from what they see themselves)
    for who in ("target", "second image"):
        env, _, maps = seen[who].partition(" maps=")
        assert env == "env=" and set(maps.strip(",").split(",")) == runtimes, seen


def test_follow_still_passes_everything_on() -> None:
    binary = build_fixture("env_children.c", ["-O1", "-g"])
    result = run("--mode", "sampler", "--follow", str(binary))
    assert result.returncode == 5, result.stderr
    seen = reports(result.stdout)
    assert seen["system() child"] != "proftui variables: 0", seen
    assert "LD_PRELOAD(proftui)" in seen["fork+exec child"] and \
        "proftui_sampler" in seen["fork+exec child"], seen


def test_the_users_own_preload_stays() -> None:
    """Only proftui's entries leave LD_PRELOAD: a library the user preloads is passed on."""
    lib = build_fixture("smp_plugin_lib.c", ["-O2", "-g", "-shared", "-fPIC"],
                        output="libmine.so")
    binary = build_fixture("env_children.c", ["-O1", "-g"])
    result = run("--mode", "sampler", str(binary), env={"LD_PRELOAD": str(lib)})
    assert result.returncode == 5, result.stderr
    seen = reports(result.stdout)
    assert seen["system() child"] == "proftui variables: 0", seen
    assert "libmine" not in seen["fork+exec child"]  # the report names proftui's only
