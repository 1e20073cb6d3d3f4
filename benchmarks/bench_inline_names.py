"""Cost of qualifying inlined C++ names from the DIEs (symbols/dwarfnames.py).

    python benchmarks/bench_inline_names.py [--units 40] [--step 4] [--lua PATH]

Targets: Lua 5.5 (C, from /work/shared/programs/lua, built -O2 -g; skipped with
the reason when absent) and a generated C++ program of --units compile units,
each inlining std::map / std::vector members, a method of a class in an
anonymous namespace and std::map members over a key type of that namespace
(no linkage names: the DIE path runs).  For each, in one
run: a fresh Symbolizer (no SymCache cache dir, so both build it) frames
every --step-th byte of .text, once with the DIE lookup turned off (the
anchor: names as the SymCache gives them) and once with it on; the ratio and
how many inlined frames changed name are printed.  Wall-clock on a shared
machine: read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proftui.collectors.symbols import symbolizer as symbolizer_module  # noqa: E402
from proftui.collectors.symbols.symbolizer import Symbolizer  # noqa: E402

LUA_SRC = Path("/work/shared/programs/lua")
UNIT = """
#include <map>
#include <vector>
namespace {{
struct Mixer{i} {{
    unsigned long h = {i};
    inline unsigned long mix(unsigned long v) {{ h = (h ^ v) * 0x9E3779B97F4A7C15ul; return h; }}
}};
struct Key{i} {{
    int k;
    bool operator<(const Key{i} &o) const {{ return k < o.k; }}
}};
}}
long unit{i}(long n) {{
    std::map<int, long> m;
    std::vector<int> v;
    Mixer{i} x;
    std::map<Key{i}, long> km;
    for (long r = 0; r < n; r++) {{
        m[static_cast<int>(r % 97)] += static_cast<long>(x.mix(static_cast<unsigned long>(r)));
        v.push_back(static_cast<int>(r));
        km[Key{i}{{static_cast<int>(r & 255)}}] += r;
        if (v.size() > 64) v.clear();
    }}
    return static_cast<long>(m.size() + v.size() + km.size());
}}
"""


def build_cxx(directory: Path, units: int) -> Path:
    sources = []
    for i in range(units):
        path = directory / f"u{i}.cpp"
        path.write_text(UNIT.format(i=i))
        sources.append(path)
    decls = "".join(f"long unit{i}(long);\n" for i in range(units))
    calls = "".join(f"    s += unit{i}(argc);\n" for i in range(units))
    main = directory / "main.cpp"
    main.write_text(f"{decls}int main(int argc, char **) {{\n    long s = 0;\n{calls}"
                    "    return static_cast<int>(s & 1);\n}\n")
    objects = []
    procs = []
    for src in [*sources, main]:
        obj = src.with_suffix(".o")
        procs.append(subprocess.Popen(["g++", "-O2", "-g", "-c", str(src), "-o", str(obj)]))
        objects.append(str(obj))
        if len(procs) >= 2 and procs.pop(0).wait() != 0:  # two cores: two at a time
            raise SystemExit("g++ failed")
    for proc in procs:
        if proc.wait() != 0:
            raise SystemExit("g++ failed")
    binary = directory / "many"
    subprocess.run(["g++", "-o", str(binary), *objects], check=True)
    return binary


def build_lua(directory: Path, given: str | None) -> Path | None:
    if given:
        return Path(given)
    if not (LUA_SRC / "onelua.c").is_file():
        print(f"lua: skipped ({LUA_SRC}/onelua.c is missing)")
        return None
    binary = directory / "lua"
    subprocess.run(["gcc", "-O2", "-g", "-DLUA_USE_LINUX", str(LUA_SRC / "onelua.c"),
                    "-lm", "-ldl", "-o", str(binary)], check=True)
    return binary


def text_range(binary: Path) -> tuple[int, int]:
    out = subprocess.run(["readelf", "-SW", str(binary)], check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1] == ".text":
            start, size = int(parts[3], 16), int(parts[5], 16)
            return start, start + size
    raise SystemExit(f"{binary}: no .text")


def symbolize(binary: Path, addresses: list[int], qualify: bool) -> tuple[float, list[str]]:
    # off: the trigger never fires, names stay the SymCache's (the code before the fix)
    patch = contextlib.nullcontext() if qualify else \
        mock.patch.object(symbolizer_module, "_unqualified", lambda lang, name: False)
    with patch:
        symbolizer = Symbolizer(use_cache=False)
        start = time.perf_counter()
        names = [f.function for a in addresses for f in symbolizer.frames(str(binary), a)
                 if f.inlined]
        return time.perf_counter() - start, names


def measure(label: str, binary: Path, step: int) -> None:
    lo, hi = text_range(binary)
    addresses = list(range(lo, hi, step))
    off, old = symbolize(binary, addresses, qualify=False)
    on, new = symbolize(binary, addresses, qualify=True)
    changed = sum(a != b for a, b in zip(old, new, strict=True))
    print(f"{label}: {len(addresses)} addresses, {len(new)} inlined frames; "
          f"SymCache names {off:.3f} s (anchor), with DIE names {on:.3f} s "
          f"= {on / off:.2f}x; {changed} inlined frames renamed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=40)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--lua", help="a Lua built -O2 -g (else built from the sources)")
    args = parser.parse_args()
    for tool in ("g++", "gcc", "readelf"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    with tempfile.TemporaryDirectory(prefix="proftui-bench-inl-") as tmp:
        lua = build_lua(Path(tmp), args.lua)
        if lua is not None:
            measure("lua (C)", lua, args.step)
        measure(f"C++ ({args.units} units)", build_cxx(Path(tmp), args.units), args.step)


if __name__ == "__main__":
    main()
