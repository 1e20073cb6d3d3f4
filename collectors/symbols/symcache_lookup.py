"""One SymCache lookup as a tuple of plain entries, without symbolic's per-call wrapping.

`SymCache.lookup` wraps each call in error bookkeeping and makes an object and
three fresh strings per entry: ~15 us an address, where the lookup itself takes
~2 us.  A sampled program's leaves are thousands of distinct addresses (every
instruction of a hot interpreter loop), each looked up once, so that wrapping
was most of what a new stack cost the agent.  Here the library's own C call is
made directly (through the cffi module symbolic ships), the names that live in
the SymCache are decoded once per SymCache, and the result is a hashable tuple,
so callers can share what they derive from equal results (one line's addresses
all give the same one).  Where the low-level module is not the one this was
written against, the public `lookup` is used instead, with the same result.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Entry(NamedTuple):
    """One frame of a lookup (innermost first): the fields proftui reads."""

    sym_addr: int
    line: int
    lang: str
    symbol: str
    full_path: str | None


class SymCacheLookup:
    """Looks addresses up in one open `symbolic.symcache.SymCache`."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache  # keeps the SymCache (and the memory its names live in) alive
        self._names: dict[tuple[int, int], str] = {}  # (pointer, length) -> name
        self._paths: dict[bytes, str] = {}
        self._lib, self._ffi, self._ptr = _low_level(cache)

    def lookup(self, address: int) -> tuple[Entry, ...]:
        """Entries at SymCache-relative `address`, innermost first; () if none."""
        lib = self._lib
        if lib is None:
            return tuple(Entry(e.sym_addr, e.line, e.lang, e.symbol, e.full_path)
                         for e in self._cache.lookup(address))
        ffi = self._ffi
        lib.symbolic_err_clear()
        result = lib.symbolic_symcache_lookup(self._ptr, address)
        if lib.symbolic_err_get_last_code():
            lib.symbolic_err_clear()
            return ()
        try:
            entries = []
            for i in range(result.len):
                item = result.items[i]
                path = item.full_path
                raw = ffi.unpack(path.data, path.len) if path.len else b""
                full_path = self._paths.get(raw)
                if full_path is None:
                    full_path = self._paths[raw] = raw.decode("utf-8", "replace")
                entries.append(Entry(item.sym_addr, item.line, self._name(item.lang),
                                     self._name(item.symbol), full_path or None))
                if path.owned:
                    lib.symbolic_str_free(ffi.addressof(path))
        finally:
            lib.symbolic_lookup_result_free(ffi.addressof(result))
        return tuple(entries)

    def _name(self, text: Any) -> str:
        """A name of the lookup: one the result does not own lives in the SymCache (or
        the library), as long as it, and is decoded once."""
        if not text.len:
            return ""
        if text.owned:
            decoded: str = self._ffi.unpack(text.data, text.len).decode("utf-8", "replace")
            self._lib.symbolic_str_free(self._ffi.addressof(text))
            return decoded
        key = (int(self._ffi.cast("uintptr_t", text.data)), text.len)
        found = self._names.get(key)
        if found is None:
            found = self._names[key] = self._ffi.unpack(text.data, text.len).decode(
                "utf-8", "replace")
        return found


def _low_level(cache: Any) -> tuple[Any, Any, Any]:
    """(lib, ffi, the SymCache's pointer) when symbolic's C interface has the shape this
    module reads, else (None, None, None)."""
    try:
        from symbolic._lowlevel import ffi, lib

        ffi.offsetof("SymbolicSourceLocation", "full_path")
        ffi.offsetof("SymbolicSourceLocation", "symbol")
        ffi.offsetof("SymbolicSourceLocation", "lang")
        ffi.offsetof("SymbolicStr", "owned")
        for name in ("symbolic_symcache_lookup", "symbolic_lookup_result_free",
                     "symbolic_str_free", "symbolic_err_clear", "symbolic_err_get_last_code"):
            getattr(lib, name)
        return lib, ffi, cache._get_objptr()
    except (ImportError, AttributeError, TypeError, KeyError, RuntimeError):
        return None, None, None
