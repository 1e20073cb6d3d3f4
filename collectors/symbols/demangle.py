"""C++ symbol demangling through the C++ runtime's own `__cxa_demangle`.

Calling libstdc++ through ctypes gives exactly the names `c++filt` prints,
without a subprocess per name; `c++filt` is the fallback when libstdc++
cannot be loaded.  Results are memoized: profiles repeat names a lot.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable

_Demangler = Callable[[str], str | None]


def _cxa_demangler() -> _Demangler | None:
    import ctypes
    import ctypes.util

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


@functools.cache
def _demangler() -> _Demangler | None:
    """The demangler, found on the first mangled name: finding libstdc++ runs ldconfig,
    which a run without C++ names (or a `record` of nothing) should not pay for."""
    return _cxa_demangler() or _cxxfilt_demangler()


def _clone_suffixes(name: str) -> tuple[str, list[str]] | None:
    """Split "hot.constprop.0.isra.0" into ("hot", [".constprop.0", ".isra.0"]).

    The grammar is libiberty's (what c++filt applies to mangled names): a
    clone is "." then lowercase letters, digits or "_", then any ".digits".
    None when the name has no dot or the text after it is not all clones.
    """
    at = name.find(".")
    if at <= 0:
        return None
    base, rest, clones = name[:at], name[at:], []
    while rest:
        if len(rest) < 2 or rest[0] != "." or not (rest[1].islower() or rest[1].isdigit()
                                                   or rest[1] == "_"):
            return None
        end = 2
        while end < len(rest) and (rest[end].islower() or rest[end].isdigit()
                                   or rest[end] == "_"):
            end += 1
        while end + 1 < len(rest) and rest[end] == "." and rest[end + 1].isdigit():
            end += 2
            while end < len(rest) and rest[end].isdigit():
                end += 1
        clones.append(rest[:end])
        rest = rest[end:]
    return base, clones


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The name as c++filt shows it: C++ demangled, compiler clones spelled out.

    A versioned suffix (`@GLIBC_2.2.5`) is kept; clone suffixes of C and C++
    names become `hot [clone .constprop.0]`, as c++filt prints them for C++.
    """
    base, at, version = name.partition("@")
    tail = at + version if at else ""
    demangler = _demangler() if base.startswith("_Z") else None
    if demangler is None:
        split = _clone_suffixes(base)
        if split is None or base.startswith("_Z"):
            return name
        return split[0] + "".join(f" [clone {c}]" for c in split[1]) + tail
    result = demangler(base)
    if result is None:
        split = _clone_suffixes(base)
        inner = demangler(split[0]) if split is not None else None
        if split is None or inner is None:
            return name
        result = inner + "".join(f" [clone {c}]" for c in split[1])
    return result + tail
