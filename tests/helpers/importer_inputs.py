"""Inputs of the importers, written as their tools write them: a gperftools CPU profile
(exact bytes) and `perf script` text."""

from __future__ import annotations

import struct
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model.profile import Profile

# /proc/PID/maps lines a gperftools profile ends with
MAPS = ("00400000-00401000 r-xp 00000000 08:01 1234 /nonexistent/prog\n"
        "7f0000000000-7f0000100000 r-xp 00010000 08:01 99 /nonexistent/libx.so\n")


def gperftools_cpu(records: list[tuple[int, list[int]]], period_us: int = 1000, fmt: str = "<Q",
           maps: str = MAPS, trailer: bool = True) -> bytes:
    """Mirror of gperftools' ProfileData writer: header, records, trailer, maps."""
    words = [0, 3, 0, period_us, 0]
    for count, pcs in records:
        words += [count, len(pcs), *pcs]
    if trailer:
        words += [0, 1, 0]
    order, code = fmt
    return struct.pack(f"{order}{len(words)}{code}", *words) + maps.encode()


# gperftools CPU profile records: (count, program counters leaf first)
GPERFTOOLS_RECORDS = [
    (5, [0x400100, 0x400201, 0x400301]),  # leaf first: f <- g <- main
    (2, [0x400200, 0x400301]),
    (1, [0x7F0000000010, 0x400301]),
    (1, [0x12345, 0x400301]),  # no mapping
]


# `perf script` output of four samples in two processes (a kernel frame, an unknown one)
PERF_SCRIPT = """\
# ========
# captured on    : Mon Nov 23 05:06:13 2026
# ========
#
prog 100  7287.654257:     250000 cpu-clock:ppp:
\t            115f spin+0x16 (/tmp/prog)
\t            1201 work_hot+0x11 (/tmp/prog)
\t            123d main+0x21 (/tmp/prog)
\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)

prog 100  7287.654507:     250000 cpu-clock:ppp:
\t            115f spin+0x16 (/tmp/prog)
\t            123d main+0x21 (/tmp/prog)
\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)

prog worker 100/101 [003]  7287.654755:     250000 cpu-clock:ppp:
\tffffffff816048f6 __handle_mm_fault+0x176 ([kernel.kallsyms])
\t            1210 work_hot+0x20 (/tmp/prog)
\t  7364616f6c6572 [unknown] ([unknown])

other 200  7287.655004:     250000 cpu-clock:ppp:
\t    7f0012345678 std::vector<int>::push_back(int const&)+0x8 (/usr/lib/libstdc++.so.6)
\t            123d main+0x21 (/tmp/other)
"""


def load_garbled(data: bytes, path: Path) -> Profile | None:
    """`data` written at `path` and loaded by load_any: the profile, or None when it was
    refused, which must be in one line."""
    path.write_bytes(data)
    try:
        return load_any(path)
    except ProftuiError as exc:
        assert "\n" not in str(exc)
        return None
