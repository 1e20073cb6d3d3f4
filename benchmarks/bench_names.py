"""Cost of name shortening, against demangling the same names (the anchor).

The names are every dynamic symbol of the installed libstdc++ (`nm -D`, about
6,000 real C++ names).  It times, per name: the demangler proftui uses on them
(`collectors.symbols.demangle` through libstdc++'s __cxa_demangle, uncached: the
anchor, work every profile already does once per function), `shorten` in both
modes with its cache cleared, and the
`Labeler` a live flat table uses on a repeated snapshot (cached: the common case).

usage: python benchmarks/bench_names.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.symbols.demangle import demangle  # noqa: E402
from proftui.tui.names import Labeler, shorten  # noqa: E402


def timed(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of `repeat` runs of `fn`, seconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    library = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], capture_output=True,
                             text=True, check=True).stdout.strip()
    out = subprocess.run(["nm", "-D", library], capture_output=True, text=True,
                         check=True).stdout
    raw = [line[19:].split("@")[0] for line in out.splitlines()
           if len(line) > 19 and line[17] in "TtWV"]
    names = [demangle(n) for n in raw]
    def demangle_all() -> object:
        demangle.cache_clear()  # uncached, as the first time a profile meets them
        return [demangle(n) for n in raw]

    anchor = timed(demangle_all)

    def cold(mode: str) -> Callable[[], object]:
        def run() -> object:
            shorten.cache_clear()
            return [shorten(n, mode) for n in names]
        return run

    labeler = Labeler("params")
    labeler.add(names)
    results = {
        "shorten, templates (uncached)": timed(cold("templates")),
        "shorten, params (uncached)": timed(cold("params")),
        "Labeler, repeated snapshot": timed(lambda: (labeler.add(names),
                                                     [labeler.label(n) for n in names])),
    }
    per = 1e6 / len(names)
    print(f"{len(names):,} libstdc++ names; anchor: demangling them {anchor * per:.1f} us/name")
    for what, seconds in results.items():
        print(f"  {what:32s} {seconds * per:7.1f} us/name  {seconds / anchor:5.2f}x the anchor")


if __name__ == "__main__":
    main()
