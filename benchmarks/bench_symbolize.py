"""Symbolize one set of addresses with proftui (cold cache, warm cache) and addr2line.

    python benchmarks/bench_symbolize.py [--functions 3000] [--addresses 3000] [--binary B]

Generates (unless --binary) a C program of many compile units with inlined
helpers, compiles it -O2 -g, picks addresses inside its functions, and times
in one run: `addr2line -f -i -C` (one process for all addresses, the anchor),
proftui with an empty build-id cache, and proftui again with the cache that
run left.  Every variant returns function, file:line and inline chain.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proftui.collectors.symbols.symbolizer import Symbolizer

UNITS = 30


def generate(directory: Path, functions: int) -> Path:
    per_unit = max(1, functions // UNITS)
    sources = []
    for unit in range(UNITS):
        lines = ["#include <stdint.h>",
                 f"static inline uint64_t mix{unit}(uint64_t x) {{",
                 "    x ^= x >> 13;", "    x *= 0x9E3779B97F4A7C15ull;", "    return x ^ (x >> 7);",
                 "}"]
        for i in range(per_unit):
            lines += [f"__attribute__((noinline)) uint64_t f{unit}_{i}(uint64_t v) {{",
                      "    uint64_t s = v;",
                      f"    for (int k = 0; k < {3 + i % 5}; k++)",
                      f"        s += mix{unit}(s + k);",
                      "    return s;", "}"]
        path = directory / f"unit{unit}.c"
        path.write_text("\n".join(lines) + "\n")
        sources.append(path)
    main = directory / "main.c"
    main.write_text("int main(void) { return 0; }\n")
    binary = directory / "big"
    subprocess.run(["gcc", "-O2", "-g", "-o", str(binary), str(main), *map(str, sources)],
                   check=True)
    return binary


def pick(binary: Path, count: int) -> list[int]:
    module = Symbolizer(use_cache=False).module(str(binary))
    rng = random.Random(7)
    functions = [f for f in module.functions if f.size > 4]
    return [(f := rng.choice(functions)).start + rng.randrange(f.size) for _ in range(count)]


def run_addr2line(binary: Path, addresses: list[int]) -> float:
    started = time.perf_counter()
    subprocess.run(["addr2line", "-f", "-i", "-C", "-e", str(binary), *map(hex, addresses)],
                   check=True, capture_output=True)
    return time.perf_counter() - started


def run_proftui(binary: Path, addresses: list[int], cache: Path) -> float:
    started = time.perf_counter()
    symbolizer = Symbolizer(cache_dir=cache)
    for address in addresses:
        symbolizer.frames(str(binary), address)
        symbolizer.location(str(binary), address)
    symbolizer.flush()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=3000)
    parser.add_argument("--addresses", type=int, default=3000)
    parser.add_argument("--binary", type=Path)
    args = parser.parse_args()
    if shutil.which("addr2line") is None:
        sys.exit("addr2line (binutils) is needed as the anchor")
    with tempfile.TemporaryDirectory(prefix="proftui-bench-") as tmp:
        work = Path(tmp)
        binary = args.binary or generate(work, args.functions)
        addresses = pick(binary, args.addresses)
        cache = work / "cache"
        anchor = run_addr2line(binary, addresses)
        cold = run_proftui(binary, addresses, cache)
        warm = run_proftui(binary, addresses, cache)
        size = binary.stat().st_size
        print(f"binary: {binary.name}, {size / 1e6:.1f} MB, {len(addresses)} addresses")
        print(f"{'variant':<28}{'seconds':>9}{'us/addr':>9}{'vs addr2line':>14}")
        for name, seconds in (("addr2line -f -i -C", anchor), ("proftui cold cache", cold),
                              ("proftui warm cache", warm)):
            print(f"{name:<28}{seconds:9.3f}{1e6 * seconds / len(addresses):9.1f}"
                  f"{seconds / anchor:13.2f}x")


if __name__ == "__main__":
    main()
