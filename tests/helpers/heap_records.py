"""Heap profiles by the reference tools: the hv_sites heap fixture recorded with gperftools
and heaptrack, any program's heaptrack stacks, and allocation call paths compared by
name.

Each helper skips the calling test, with the reason, when its tool is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import build_fixture

TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc.so")
FLAGS = ("-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls")

# hv_sites.c's truth per allocating function: (allocs, alloc bytes, leaks, leaked bytes)
TRUTH = {
    "site_freed": (100, 100_000, 0, 0),
    "site_leak": (50, 204_800, 50, 204_800),
    "site_half": (10, 1_000_000, 5, 500_000),
}
PEAK_TRUTH = {"site_freed": 0, "site_leak": 204_800, "site_half": 600_000}


def hv_sites() -> Path:
    return build_fixture("hv_sites.c", FLAGS)


def tcmalloc() -> Path:
    """The libtcmalloc to preload, or skip with the reason."""
    for candidate in (TCMALLOC, TCMALLOC.with_name("libtcmalloc.so.4")):
        if candidate.exists():
            return candidate
    pytest.skip("libtcmalloc (Debian libgoogle-perftools4 / libgoogle-perftools-dev) is "
                "not installed")


def record_gperftools_heap(directory: Path, binary: Path | None = None) -> tuple[Path, Path]:
    """Run hv_sites under HEAPPROFILE; (binary, the dump written at exit)."""
    binary = binary or hv_sites()
    env = {**os.environ, "LD_PRELOAD": str(tcmalloc()),
           "HEAPPROFILE": str(directory / "hv")}
    result = subprocess.run([str(binary)], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    dumps = sorted(directory.glob("hv.*.heap"))
    if not dumps:
        pytest.skip(f"tcmalloc wrote no heap profile: {result.stderr.strip()}")
    return binary, dumps[-1]


def record_heaptrack(directory: Path, binary: Path | None = None) -> tuple[Path, Path]:
    """Run hv_sites under heaptrack; (binary, its data file)."""
    tool = shutil.which("heaptrack")
    if tool is None or shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack / heaptrack_print (Debian heaptrack) is not installed")
    binary = binary or hv_sites()
    result = subprocess.run([tool, "-o", str(directory / "ht"), str(binary)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    files = [p for p in directory.iterdir() if p.name.startswith("ht.")]
    assert len(files) == 1, result.stdout
    return binary, files[0]


def template_brackets(name: str) -> str:
    """`name` with every template argument list written as <>, as heaptrack writes it."""
    while True:
        shorter = re.sub(r"<[^<>]*>", "\x00", name)
        if shorter == name:
            return name.replace("\x00", "<>")
        name = shorter


def allocation_paths(profile_or_text: object) -> dict[tuple[str, ...], float]:
    """Allocations per call path, as the sorted names on it (from main on).

    Sorted, because heaptrack's stacks list the inlined functions of one physical frame
    innermost first, proftui outermost first; the names on a path are the same.
    """
    out: dict[tuple[str, ...], float] = {}

    def add(names: list[str], count: float) -> None:
        # GCC's clones are one function to heaptrack (luaV_concat [clone .part.0]), and
        # heaptrack writes template arguments as <>.
        names = [template_brackets(re.sub(r" \[clone .*\]$", "", n)) for n in names]
        # Where a stack starts varies (heaptrack shows _start on some stacks only).
        key = tuple(sorted(n for n in names if not n.startswith(("_start", "__libc_start"))))
        out[key] = out.get(key, 0.0) + count

    if isinstance(profile_or_text, str):  # heaptrack_print -F stacks: "a (f);b (f); N"
        for line in profile_or_text.splitlines():
            stack, _, count = line.rpartition(" ")
            add([re.sub(r" \(.*\)$", "", f) for f in stack.split(";") if f], float(count))
        return out
    profile = profile_or_text
    index = profile.metric_index("allocs")  # type: ignore[attr-defined]
    for node in profile.tree.nodes():  # type: ignore[attr-defined]
        if node.frame_id < 0 or not node.self_cost[index]:
            continue
        names, up = [], node
        while up is not None and up.frame_id >= 0:
            names.append(profile.frames[up.frame_id].function)  # type: ignore[attr-defined]
            up = up.parent
        add(names[::-1], node.self_cost[index])
    return out


def heaptrack_stacks(argv: list[str], directory: Path) -> str:
    """`argv` run under heaptrack; its call stacks with their allocation counts, as
    `heaptrack_print -F` writes them ("a (file);b (file); N" a line)."""
    if shutil.which("heaptrack") is None or shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack / heaptrack_print are not installed")
    subprocess.run(["heaptrack", "-o", str(directory / "ht"), *argv], capture_output=True,
                   timeout=600)
    data = next(directory.glob("ht*"), None)
    if data is None:
        pytest.skip("heaptrack could not record here")
    stacks = directory / "stacks.txt"
    subprocess.run(["heaptrack_print", "-f", str(data), "-F", str(stacks),
                    "--flamegraph-cost-type", "allocations"], capture_output=True, timeout=600)
    return stacks.read_text()
