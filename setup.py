"""Build the C runtime libraries of proftui into the `collectors._runtime` package.

Each runtime library is a plain shared object (LD_PRELOADed into targets, never
imported by Python).  setuptools' Extension machinery is used only because it
compiles into the package for `pip install .` and editable installs alike.
"""

from __future__ import annotations

import shutil
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# name -> sources.  Each library has one job (DESIGN.md section 1).
RUNTIME_LIBRARIES: dict[str, list[str]] = {}

COMMON_FLAGS = ["-std=gnu11", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"]


class BuildRuntime(build_ext):
    """build_ext that fails early and clearly without a C compiler."""

    def run(self) -> None:
        compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
        if not (shutil.which(compiler) or shutil.which("cc") or shutil.which("gcc")):
            raise SystemExit(
                "proftui: a C compiler is required to build its runtime libraries "
                "(install gcc, e.g. `apt-get install gcc`)"
            )
        super().run()

    def get_export_symbols(self, ext: Extension) -> list[str]:
        # These are not Python modules: there is no PyInit_ symbol to export.
        return []


def runtime_extension(name: str, sources: list[str]) -> Extension:
    return Extension(
        f"collectors._runtime.{name}",
        sources=sources,
        include_dirs=["csrc"],
        extra_compile_args=COMMON_FLAGS,
        extra_link_args=["-pthread", "-ldl", "-lrt"],
        py_limited_api=True,
    )


setup(
    ext_modules=[runtime_extension(n, s) for n, s in RUNTIME_LIBRARIES.items()],
    cmdclass={"build_ext": BuildRuntime},
)
