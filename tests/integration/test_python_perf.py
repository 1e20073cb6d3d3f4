"""CPython 3.12+ run with `-X perf` (3.13+: also `-X perf_jit`) under the launched
sampler: each Python function is a trampoline named in /tmp/perf-PID.map
(collectors/symbols/perfmap.py) or the jitdump /tmp/jit-PID.dump (jitdump.py), and
the walk goes on through it into the interpreter's C frames below (the stub step of
csrc/common/pt_unwind.c: 3.12 and 3.13's trampoline keeps neither a frame pointer
nor unwind tables).  Skipped, with the reason, where no Python >= 3.12
is found (pyenv's versions and PATH).
"""

from __future__ import annotations

import glob
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from proftui.collectors.model.profile import Profile

from tests.helpers.collect import run_sampler

SCRIPT = Path(__file__).parent.parent / "fixtures" / "py_perf_nested.py"


def _pythons() -> list[str]:
    """One interpreter per Python version >= 3.12 found, whose perf support is built."""
    found: dict[str, str] = {}
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv"), "/root/.pyenv"]
    candidates = [p for r in roots if r
                  for p in sorted(glob.glob(f"{r}/versions/*/bin/python3.1[2-9]"))]
    candidates += [w for v in range(12, 20) if (w := shutil.which(f"python3.{v}"))]
    for path in candidates:
        version = re.search(r"python(3\.\d+)$", path)
        if version is None or version[1] in found:
            continue
        try:
            out = subprocess.run([path, "-c", "import sysconfig; print(sysconfig."
                                  "get_config_var('PY_HAVE_PERF_TRAMPOLINE'))"],
                                 capture_output=True, text=True, timeout=30).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out[:1] == ["1"]:
            found[version[1]] = path
    return sorted(found.values())


PYTHONS = _pythons() if platform.machine() == "x86_64" else []
# -X perf writes a perf map; 3.13's -X perf_jit a jitdump (collectors/symbols/jitdump.py).
RUNS = [(p, "perf") for p in PYTHONS] + [
    (p, "perf_jit") for p in PYTHONS if int(re.findall(r"3\.(\d+)$", p)[0]) >= 13]


def _inclusive(profile: Profile, prefix: str) -> tuple[float, list[list[str]]]:
    """Inclusive samples of the Python function named `prefix...` and the call paths
    (outermost first) of its nodes with their totals (recursion not counted twice)."""
    total, paths = 0.0, []
    for node in profile.tree.nodes():
        if not profile.frames[node.frame_id].function.startswith(prefix):
            continue
        path = [profile.frames[f] for f in node.path()]
        if any(f.function.startswith(prefix) for f in path[:-1]):
            continue
        total += node.total_cost[0]
        paths.append((node.total_cost[0], path))
    return total, paths


@pytest.mark.skipif(not PYTHONS, reason="no Python >= 3.12 with perf trampolines found "
                    "(looked in pyenv's versions and PATH for python3.12+; x86-64 only)")
@pytest.mark.parametrize("python, flag", RUNS or [("none", "perf")])
def test_python_functions_are_named_and_unwound(python: str, flag: str) -> None:
    profile, output = run_sampler(Path(python), "-X", flag, str(SCRIPT), "1.0",
                                  frequency_hz=500)
    for pid in profile.meta.pids:  # CPython leaves its files behind
        Path(f"/tmp/perf-{pid}.map").unlink(missing_ok=True)
        Path(f"/tmp/jit-{pid}.dump").unlink(missing_ok=True)
    assert not [w for w in profile.meta.warnings if "perf map" in w or "jitdump" in w]
    assert "nested done" in output and profile.meta.exit_status == 0, output
    whole = profile.total(0)
    assert whole >= 200, f"too few samples: {whole}"
    leaf, paths = _inclusive(profile, "py::leaf:")
    # The leaf is the script's work: nearly every sample is in it.
    assert leaf >= 0.8 * whole, (leaf, whole)
    # Its callers are middle, then outer; below each Python function its trampoline
    # calls the interpreter; the walk goes on to the process's first frame.
    good = 0.0
    for cost, path in paths:
        names = [f.function for f in path]
        python_names = [n[:n.index(":", 4)] for n in names if n.startswith("py::")]
        at = len(names) - 1
        if (python_names[-3:] == ["py::outer", "py::middle", "py::leaf"]
                and names[0] == "_start" and path[at].module == "[jit]"
                and names[at - 1] == "py_trampoline_evaluator"
                and re.search(r"python|libpython", path[at - 1].module)):
            good += cost
    assert good >= 0.95 * leaf, (good, leaf, [[(f.function, f.module) for f in p[-4:]]
                                             for _, p in paths[:3]])
    assert not [w for w in profile.meta.warnings if "cut short" in w], profile.meta.warnings
