"""C++ symbol demangling through the C++ runtime's own `__cxa_demangle`.

Calling libstdc++ through ctypes gives exactly the names `c++filt` prints,
without a subprocess per name; `c++filt` is the fallback when libstdc++
cannot be loaded.  Results are memoized: profiles repeat names a lot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import subprocess
from collections.abc import Callable

_Demangler = Callable[[str], str | None]


def _cxa_demangler() -> _Demangler | None:
    libname = ctypes.util.find_library("stdc++")
    if libname is None:
        return None
    try:
        lib = ctypes.CDLL(libname)
        libc = ctypes.CDLL(None)
        cxa = lib.__cxa_demangle
    except (OSError, AttributeError):
        return None
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_int)]
    free = libc.free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None

    def demangle_one(name: str) -> str | None:
        status = ctypes.c_int(0)
        result = cxa(name.encode(), None, None, ctypes.byref(status))
        if not result:
            return None
        try:
            text = ctypes.string_at(result)
        finally:
            free(result)  # __cxa_demangle returns malloc'd memory
        return text.decode("utf-8", "replace") if status.value == 0 else None

    return demangle_one


def _cxxfilt_demangler() -> _Demangler | None:
    tool = shutil.which("c++filt")
    if tool is None:
        return None

    def demangle_one(name: str) -> str | None:
        result = subprocess.run([tool, name], capture_output=True, text=True)
        text = result.stdout.strip()
        return text if result.returncode == 0 and text and text != name else None

    return demangle_one


_DEMANGLER: _Demangler | None = _cxa_demangler() or _cxxfilt_demangler()


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a C++ symbol, or `name` unchanged when it is not mangled.

    A versioned suffix (`@GLIBC_2.2.5`) and clone suffixes (`.cold`,
    `.constprop.0`) are kept readable: the base is demangled, the suffix kept.
    """
    if not name.startswith("_Z") or _DEMANGLER is None:
        return name
    base, at, version = name.partition("@")
    result = _DEMANGLER(base)
    if result is None and "." in base:
        stem, _, clone = base.partition(".")
        inner = _DEMANGLER(stem)
        result = f"{inner} [clone .{clone}]" if inner is not None else None
    if result is None:
        return name
    return result + (at + version if at else "")
