"""Shared test helpers: compile C fixtures with gcc at test time."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers.tmux import PROFTUI, Terminal


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGHUP and SIGINT their defaults when the suite inherited them ignored (run
    under nohup, or as a shell's background job): proftui keeps an ignore it inherits, as
    nohup asks, so the tests that stop proftui with those signals would wait in vain."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

FIXTURES = Path(__file__).parent / "fixtures"
_BUILD_CACHE = Path(__file__).parent.parent / "build" / "test-fixtures"


def _private_temp(target: Path) -> Path:
    """A temporary name beside `target` that no other test worker uses (the suite runs in
    parallel, and two workers may build the same fixture at once: each renames its own)."""
    return target.with_name(f"{target.name}.{os.getpid()}.tmp")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core, at most 4 (the heavier tests run several processes
    each; more workers would only load the machine)."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


def build_fixture(
    source: str | Sequence[str], flags: Sequence[str] = (), output: str | None = None,
    compiler: str = "gcc",
) -> Path:
    """Compile tests/fixtures/<source> (or several) with `flags`; return the binary.

    Binaries are cached under build/test-fixtures by a hash of sources and flags,
    so each variant compiles once per checkout.
    """
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    sources = [source] if isinstance(source, str) else list(source)
    paths = [FIXTURES / s for s in sources]
    digest = hashlib.sha256()
    for p in paths:
        digest.update(p.read_bytes())
    digest.update("\0".join([compiler, *flags]).encode())
    name = output or Path(sources[0]).stem
    target = _BUILD_CACHE / f"{name}-{digest.hexdigest()[:12]}"
    if not target.exists():
        _BUILD_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = _private_temp(target)
        subprocess.run(
            [compiler, *flags, "-o", str(tmp), *map(str, paths)],
            check=True, capture_output=True, text=True,
        )
        tmp.rename(target)
    return target


@pytest.fixture
def compile_c() -> Callable[..., Path]:
    """The `build_fixture` function, as a fixture."""
    return build_fixture


LUA_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "programs" / "lua"
LUA_SCRIPTS = FIXTURES / "lua"


def build_lua(flags: Sequence[str] = ()) -> Path:
    """Lua 5.5 from ../shared/programs/lua (a real program), built as one unit with `flags`.

    Skips, with the reason printed, on a clone without ../shared beside it.
    """
    onelua = LUA_SOURCE / "onelua.c"
    if not onelua.is_file():
        pytest.skip(f"Lua source not found at {LUA_SOURCE} (the real-program tests need "
                    "../shared/programs/lua beside the checkout)")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    options = ["-O2", "-g", "-DLUA_USE_LINUX", *flags]
    digest = hashlib.sha256("\0".join(options).encode()).hexdigest()[:12]
    target = _BUILD_CACHE / f"lua-{digest}"
    if not target.exists():
        _BUILD_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = _private_temp(target)
        subprocess.run(["gcc", *options, "-o", str(tmp), str(onelua), "-lm", "-ldl"],
                       check=True, capture_output=True, text=True)
        tmp.rename(target)
    return target


@pytest.fixture
def searchable_dir() -> Iterator[Path]:
    """A directory every user can search down to (pytest's tmp_path base is 0700)."""
    for base in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(base) and all(os.stat(p).st_mode & stat.S_IXOTH
                                       for p in (base, *map(str, Path(base).parents))):
            with tempfile.TemporaryDirectory(dir=base, prefix="proftui-test-") as name:
                os.chmod(name, 0o755)
                yield Path(name)
            return
    pytest.skip("no directory searchable by every user (/var/tmp, /dev/shm)")


@pytest.fixture(autouse=True)
def _private_config_dir(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own XDG_CONFIG_HOME: the app's remembered settings
    (tui/settings.py) never come from, or go to, the user's ~/.config."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture
def terminal() -> Iterator[list[Terminal]]:
    """The tmux sessions a test opens, closed at its end (skips without tmux)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    if not PROFTUI.exists():
        pytest.skip(f"the proftui command is not installed beside {sys.executable}")
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()
