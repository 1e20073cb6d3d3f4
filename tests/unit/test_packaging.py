"""`pip install .` adds only `proftui` to site-packages: the wheel's layout.

Builds a real wheel (pip, with build isolation: the build backend comes from
pyproject's build-system, as for users) - about 10-60 s, marked `slow`.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = "proftui/collectors/runtime/native/"
RUNTIME_FILES = ("proftui_hook.abi3.so", "proftui_sampler.abi3.so", "proftui-attach")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the wheel build compiles the runtimes")
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    built = list(out.glob("proftui-*.whl"))
    assert len(built) == 1, built
    return zipfile.ZipFile(built[0])


@pytest.mark.slow
def test_wheel_has_only_the_proftui_package(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    tops = {name.split("/")[0] for name in names}
    dist_info = {t for t in tops if t.startswith("proftui-") and t.endswith(".dist-info")}
    assert len(dist_info) == 1 and tops == {"proftui", *dist_info}, sorted(tops)
    assert "proftui/__init__.py" not in names  # a namespace package: nothing else in it
    for package in ("collectors", "tui"):
        assert f"proftui/{package}/__init__.py" in names
    assert not any(n.startswith(("proftui/tests/", "proftui/benchmarks/")) for n in names)
    entry_points = wheel.read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "proftui = proftui.tui.cli:main" in entry_points


@pytest.mark.slow
def test_wheel_carries_the_runtimes_in_the_native_package(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for name in RUNTIME_FILES:
        assert NATIVE + name in names, sorted(n for n in names if "native" in n)
        assert not any(n.endswith("/" + name) and n != NATIVE + name for n in names)
    mode = wheel.getinfo(NATIVE + "proftui-attach").external_attr >> 16
    assert mode & stat.S_IXUSR, oct(mode)  # the helper stays executable once installed
    for name in RUNTIME_FILES:
        assert wheel.read(NATIVE + name)[:4] == b"\x7fELF"
    assert "proftui/tui/proftui.tcss" in names and "proftui/tui/demo/demo.c" in names
    # the model's native core: a real extension module, in its package
    assert wheel.read("proftui/collectors/model/_core.abi3.so")[:4] == b"\x7fELF"
