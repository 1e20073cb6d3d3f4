"""Build the C parts of proftui: the runtime libraries into the
`proftui.collectors.runtime.native` package, and the model's native core
`proftui.collectors.model._core`.

Each runtime library is a plain shared object (LD_PRELOADed into targets, never
imported by Python); setuptools' Extension machinery is used for them only because
it compiles into the package for `pip install .` and editable installs alike.  The
core (csrc/core/) is a real CPython extension module, required: the data model's
per-node work runs in it (docs/architecture.md section 4).
"""

from __future__ import annotations

import os
import shutil
import sysconfig

from setuptools import Distribution, Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

# The one stack unwinder, shared by the runtimes.
COMMON_UNWIND = ["csrc/common/pt_unwind.c", "csrc/common/pt_cfi.c", "csrc/common/pt_mem.c"]
# Run files (windows mapped as they fill) and the notes that say what could not be mapped.
COMMON_RUNFILE = ["csrc/common/pt_runfile.c", "csrc/common/pt_note.c"]
# The loaded-object table of the preloaded runtimes (dl_iterate_phdr: not for attach),
# with the unwind tables a JIT's jitdump file gives its generated code.
COMMON_MAPS = ["csrc/common/pt_maps.c", "csrc/common/pt_jit.c"]
COMMON_STACKS = ["csrc/common/pt_stacktab.c"]
# Per-thread profiling clocks, their signal and the interposers that keep them working
# (sampler and hook runtime; their settings are read through pt_env.c, in COMMON_EXEC).
COMMON_TIMER = ["csrc/common/pt_timer.c", "csrc/common/pt_timer_interpose.c"]
# The exec wrappers and the environment the target passes on (sampler, hook, heap).
COMMON_EXEC = ["csrc/common/pt_exec.c", "csrc/common/pt_env.c"]

# name -> (sources, include dirs).  Each library has one job (docs/architecture.md
# section 1) and sees only csrc/common and its own folder.
RUNTIME_LIBRARIES: dict[str, tuple[list[str], list[str]]] = {
    "proftui_sampler": (["csrc/sampler/proftui_sampler.c", "csrc/sampler/pt_sampler_file.c",
                         "csrc/sampler/pt_sampler_timer.c", "csrc/sampler/pt_sampler_handler.c",
                         "csrc/sampler/pt_sampler_maps.c", *COMMON_RUNFILE,
                         *COMMON_UNWIND, *COMMON_MAPS, *COMMON_STACKS, *COMMON_TIMER,
                         *COMMON_EXEC],
                        ["csrc/common", "csrc/sampler"]),
    "proftui_hook": (["csrc/hook/proftui_hook.c", "csrc/hook/pt_hook_life.c",
                      "csrc/hook/pt_hook_file.c", "csrc/hook/pt_hook_filter.c",
                      "csrc/hook/pt_hook_tick.c", "csrc/hook/pt_hook_table.c",
                      *COMMON_RUNFILE, *COMMON_TIMER, *COMMON_EXEC],
                     ["csrc/common", "csrc/hook"]),
    "proftui_heap": (["csrc/heap/proftui_heap.c", "csrc/heap/pt_heap_cxx.c",
                      "csrc/heap/pt_heap_track.c", "csrc/heap/pt_heap_stacks.c",
                      "csrc/heap/pt_heap_file.c", *COMMON_RUNFILE, *COMMON_UNWIND,
                      *COMMON_MAPS, *COMMON_EXEC],
                     ["csrc/common", "csrc/heap"]),
}

# Per-library extra compiler flags.  The heap runtime's operator new lets a
# real operator new's bad_alloc unwind through it (its cleanup clears the
# thread's busy flag), which needs -fexceptions in C.  The sampler's walk
# probes each stack page before reading it (a program may protect its own).
EXTRA_FLAGS: dict[str, list[str]] = {"proftui_heap": ["-fexceptions"],
                                     # Its handler probes the stack pages it reads (pt_unwind.h).
                                     "proftui_sampler": ["-DPT_UNWIND_PROBE"]}

# name -> (sources, include dirs) of helper executables (not libraries), built
# into the same package directory as the libraries by BuildRuntime.build_executables.
RUNTIME_EXECUTABLES: dict[str, tuple[list[str], list[str]]] = {
    "proftui-attach": (["csrc/attach/proftui_attach.c", "csrc/attach/pt_attach_out.c",
                        "csrc/attach/pt_attach_perf.c", "csrc/attach/pt_attach_ptrace.c",
                        "csrc/attach/pt_attach_ring.c", "csrc/attach/pt_attach_system.c",
                        "csrc/attach/pt_attach_mmaps.c",
                        "csrc/attach/pt_attach_stacks.c", "csrc/attach/pt_attach_tasks.c",
                        "csrc/attach/pt_attach_timer.c",
                        "csrc/attach/pt_attach_unwind.c", "csrc/common/pt_jit.c",
                        "csrc/common/pt_note.c", *COMMON_UNWIND],
                       ["csrc/common", "csrc/attach"]),
}

COMMON_FLAGS = ["-std=gnu11", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"]

# The model's native core: a CPython extension (stable ABI 3.11), its interface in
# collectors/model/core.py.  -ffp-contract=off: sums must round as the Python model's did
# (no fused multiply-add), so results are bit-identical to it.
CORE_SOURCES = [f"csrc/core/{name}.c" for name in (
    "pt_core", "pt_index", "pt_commit", "pt_build", "pt_invert", "pt_sums", "pt_walks",
    "pt_reshape", "pt_columns", "pt_addr", "pt_rows")]
CORE_FLAGS = ["-std=gnu11", "-O2", "-g", "-fvisibility=hidden", "-Wall", "-Wextra",
              "-Wno-missing-field-initializers", "-ffp-contract=off"]


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
        self.build_executables()

    def build_executables(self) -> None:
        """Compile RUNTIME_EXECUTABLES into collectors/runtime/native (build_lib, or in place)."""
        from distutils.ccompiler import CCompiler, new_compiler
        from distutils.sysconfig import customize_compiler

        compiler = self.compiler
        if not isinstance(compiler, CCompiler):  # build_ext.run skips setup without extensions
            compiler = new_compiler(force=self.force)
            customize_compiler(compiler)
        if self.inplace:
            build_py = self.get_finalized_command("build_py")
            out_dir = build_py.get_package_dir("proftui.collectors.runtime.native")
        else:
            out_dir = os.path.join(self.build_lib, "proftui", "collectors", "runtime", "native")
        flags = [f for f in COMMON_FLAGS if f != "-fPIC"]
        for name, (sources, include_dirs) in RUNTIME_EXECUTABLES.items():
            # Each executable's objects in their own folder: common sources are
            # compiled once per runtime, with that runtime's include dirs.
            objects = compiler.compile(sources, output_dir=os.path.join(self.build_temp, name),
                                       include_dirs=include_dirs, extra_postargs=flags)
            compiler.link_executable(objects, name, output_dir=out_dir)

    def get_export_symbols(self, ext: Extension) -> list[str]:
        # The runtimes are not Python modules: they have no PyInit_ symbol to export.
        return super().get_export_symbols(ext) if ext.name == CORE_MODULE else []


class RuntimeDistribution(Distribution):
    """Always run build_ext: it also builds RUNTIME_EXECUTABLES (binary wheel)."""

    def has_ext_modules(self) -> bool:
        return True


def runtime_extension(name: str, sources: list[str], include_dirs: list[str]) -> Extension:
    return Extension(
        f"proftui.collectors.runtime.native.{name}",
        sources=sources,
        include_dirs=include_dirs,
        extra_compile_args=COMMON_FLAGS + EXTRA_FLAGS.get(name, []),
        # -z now: the runtime's own imports are bound at load, so no hook or
        # handler runs ld.so's lazy resolver (kilobytes of the target's stack).
        extra_link_args=["-pthread", "-ldl", "-lrt", "-lm", "-Wl,-z,now"],
        py_limited_api=True,
    )


CORE_MODULE = "proftui.collectors.model._core"


def core_extension() -> Extension:
    return Extension(CORE_MODULE, sources=CORE_SOURCES, include_dirs=["csrc/core"],
                     extra_compile_args=CORE_FLAGS, py_limited_api=True,
                     define_macros=[("Py_LIMITED_API", "0x030B0000")])


def proftui_packages() -> list[str]:
    """collectors/ and tui/ with their subpackages, under the one import root `proftui`."""
    return [f"proftui.{top}{sub[len(top):]}" for top in ("collectors", "tui")
            for sub in [top, *find_packages(include=[f"{top}.*"])]]


setup(
    packages=proftui_packages(),
    ext_modules=[*(runtime_extension(n, s, i) for n, (s, i) in RUNTIME_LIBRARIES.items()),
                 core_extension()],
    cmdclass={"build_ext": BuildRuntime},
    distclass=RuntimeDistribution,
)
