"""Location of the C runtime libraries that `pip install` builds from csrc/ into `native/`.

They are plain shared objects for LD_PRELOAD, never imported (docs/architecture.md section 1).
"""

from __future__ import annotations

import importlib.util
import os

from proftui.collectors.errors import ProftuiError

NATIVE = "proftui.collectors.runtime.native"  # package directory holding the built files


def runtime_library_path(name: str) -> str:
    """Absolute path of the runtime library `name` (e.g. "proftui_hook")."""
    spec = importlib.util.find_spec(f"{NATIVE}.{name}")
    if spec is None or spec.origin is None:
        raise ProftuiError(
            f"runtime library {name} is not built; reinstall proftui with `pip install .`"
        )
    return spec.origin


def runtime_executable_path(name: str) -> str:
    """Absolute path of the helper executable `name` (e.g. "proftui-attach").

    Executables are not modules, so look in the package's directories.
    """
    spec = importlib.util.find_spec(NATIVE)
    for directory in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    raise ProftuiError(
        f"runtime helper {name} is not built; reinstall proftui with `pip install .`"
    )
