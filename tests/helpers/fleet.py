"""Shared by the fleet tests: a private server per module, runs pushed through the CLI,
and the flat profile and tree of a profile keyed by names (comparable across files)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.model.profile import CallTree, Profile
from proftui.collectors.model.views import flat_profile

from tests.helpers.clickhouse import Server, driver_missing, running_servers, server_binary

CLI = [sys.executable, "-m", "proftui.tui.cli"]


def servers_or_skip(count: int) -> Iterator[list[Server]]:
    """`count` private servers for a module's tests (skips, saying why, without them)."""
    if server_binary() is None:
        pytest.skip("clickhouse-server is not installed (Debian: apt-get install "
                    "clickhouse-server; install.sh --test does it)")
    reason = driver_missing()
    if reason:
        pytest.skip(reason)
    with running_servers(count) as servers:
        yield servers


def proftui(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def push_run(url: str, binary: Path, out: Path, *args: str, labels: tuple[str, ...] = (),
             options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`proftui record --push URL --every 1 [labels] -o OUT BINARY ARGS`."""
    label_args = [a for label in labels for a in ("--label", label)]
    return proftui("record", "--push", url, "--every", "1", *label_args, *options,
                   "-o", str(out), str(binary), *args)


def tree_paths(profile: Profile, tree: CallTree | None = None) -> dict[tuple, list[float]]:
    """Self costs per calling context of `tree` (the profile's merged tree by default),
    the context named by frames (not ids)."""
    tree = profile.tree if tree is None else tree
    assert tree is not None
    out: dict[tuple, list[float]] = {}
    for node in tree.preorder():
        values = [tree.selfs[m][node] for m in range(len(profile.metrics))]
        if not any(values):
            continue
        key = tuple(profile.frames[f] for f in tree.path(node))
        slot = out.setdefault(key, [0.0] * len(values))
        for i, v in enumerate(values):
            slot[i] += v
    return out


def merged_paths(profiles: list[Profile]) -> dict[tuple, list[float]]:
    out: dict[tuple, list[float]] = {}
    for profile in profiles:
        for key, values in tree_paths(profile).items():
            slot = out.setdefault(key, [0.0] * len(values))
            for i, v in enumerate(values):
                slot[i] += v
    return out


def flat_by_name(profile: Profile) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """Per function (name, module): self and total of every metric."""
    return {(e.frame.function, e.frame.module): (list(e.self_cost), list(e.total_cost))
            for e in flat_profile(profile)}


def merged_flat(profiles: list[Profile]) -> dict[tuple[str, str], tuple[list[float],
                                                                        list[float]]]:
    """The flat profile of the profiles' trees merged (by frames) into one."""
    from proftui.collectors.model.profile import CallTree, FrameTable

    metrics = profiles[0].metrics
    frames = FrameTable()
    tree = CallTree(len(metrics))
    for profile in profiles:
        assert profile.tree is not None and profile.metrics == metrics
        ids = [frames.intern(f) for f in profile.frames]
        tree.add_tree(0, profile.tree, frame_map=ids)
    merged = Profile(meta=profiles[0].meta, metrics=metrics, frames=frames, tree=tree)
    return flat_by_name(merged.finalize())


def assert_same(fleet: Profile, local: list[Profile]) -> None:
    """A fleet query's metrics, tree and flat profile equal those of the local files merged."""
    assert [m.name for m in fleet.metrics] == [m.name for m in local[0].metrics]
    assert tree_paths(fleet) == merged_paths(local)
    a, b = flat_by_name(fleet), merged_flat(local)
    assert a == b, {k: (a.get(k), b.get(k)) for k in {*a, *b} if a.get(k) != b.get(k)}
