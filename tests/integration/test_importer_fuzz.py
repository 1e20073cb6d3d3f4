"""Every importer (collectors/formats/importers/) fed thousands of mutated files
(issue 26): each either loads or raises ProftuiError, never another exception, and
never hangs.  Seeded mutation loops over small valid files, so a failure names the
seed and round and leaves the input beside the test's files; a per-load alarm turns
a hang into a failure.  Bounded in time: at most ROUNDS rounds or BUDGET_S seconds
per importer (PROFTUI_FUZZ_ROUNDS / PROFTUI_FUZZ_SECONDS raise them for a longer run).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import random
import shutil
import signal
import struct
import subprocess
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import export_bytes
from proftui.collectors.formats.importers import heaptrack, load_any
from proftui.collectors.model.profile import Profile

from tests.helpers.importer_inputs import GPERFTOOLS_RECORDS, PERF_SCRIPT, gperftools_cpu
from tests.helpers.profiles import sample_profile

ROUNDS = int(os.environ.get("PROFTUI_FUZZ_ROUNDS", "2000"))
BUDGET_S = float(os.environ.get("PROFTUI_FUZZ_SECONDS", "6"))
HANG_S = 10  # one load of a file of a few KiB: far longer than any takes
HEAP = ("heap profile:    3:   3072 [    5:   5120] @ heapprofile\n"
        "     2:   2048 [     3:    3072] @ 0x400100 0x400201\n"
        "     1:   1024 [     2:    2048] @ 0x400200 0x7f0000000010\n"
        "\nMAPPED_LIBRARIES:\n"
        "00400000-00401000 r-xp 00000000 08:01 1234 /nonexistent/prog\n"
        "7f0000000000-7f0000100000 r-xp 00010000 08:01 99 /nonexistent/libx.so\n")


class Hang(Exception):
    """An import took over HANG_S seconds."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def expired(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """1-4 of: flip bytes, write an extreme word, cut, insert or repeat a chunk, append
    bytes that are not UTF-8."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind, at = rng.randrange(7), rng.randrange(len(out) + 1)
        if kind == 0 and out:
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(len(out))] = rng.randrange(256)
        elif kind == 1 and len(out) >= 8:
            word = rng.choice([0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1,
                               rng.getrandbits(64)])
            at = min(at, len(out) - 8)
            out[at:at + 8] = struct.pack("<Q", word)
        elif kind == 2:
            del out[at:]
        elif kind == 3:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        elif kind == 4 and out:
            start = rng.randrange(len(out))
            out[at:at] = out[start:start + rng.randint(1, 256)] * rng.randint(1, 8)
        elif kind == 5:
            out[at:at] = rng.choice([b"\xff\xfe", b"\x00", b"\n\n", b"\xc3", b"\t\t0x",
                                     b"9" * 40, b"-1", b";;", b" @ "])
        elif out:
            del out[at:at + rng.randint(1, 32)]
    return bytes(out)


def fuzz(name: str, seed: bytes, load: Callable[[Path], Profile], tmp_path: Path,
         rounds: int = ROUNDS, budget_s: float = BUDGET_S) -> int:
    """Feed mutations of `seed` to `load`; returns the rounds run."""
    rng = random.Random(zlib.crc32(name.encode()))
    path, seed_path = tmp_path / f"fuzz-{name}", tmp_path / f"seed-{name}"
    seed_path.write_bytes(seed)
    load(seed_path)  # the seed itself loads
    start = time.monotonic()
    done = 0
    while done < rounds and time.monotonic() - start < budget_s:
        data = mutate(seed, rng)
        path.write_bytes(data)
        try:
            with deadline(HANG_S):
                load(path)
        except ProftuiError as exc:
            assert "\n" not in str(exc).strip(), (name, done, str(exc))
        except BaseException as exc:  # anything else is the bug: keep the input
            kept = tmp_path / f"failing-{name}-{done}"
            kept.write_bytes(data)
            raise AssertionError(f"{name} round {done}: {type(exc).__name__}: {exc} "
                                 f"(input kept as {kept})") from exc
        done += 1
    return done


@pytest.mark.parametrize("packing", ["gz", "raw"])
def test_pprof(tmp_path: Path, packing: str) -> None:
    data = export_bytes(sample_profile(), "pprof")
    if packing == "raw":
        data = gzip.decompress(data)
    assert fuzz(f"pprof-{packing}", data, load_any, tmp_path) >= 300


def test_gperftools_cpu(tmp_path: Path) -> None:
    assert fuzz("gperftools", gperftools_cpu(GPERFTOOLS_RECORDS), load_any, tmp_path) >= 300


def test_gperftools_heap(tmp_path: Path) -> None:
    assert fuzz("gperftools-heap", HEAP.encode(), load_any, tmp_path) >= 300


def test_perf_script(tmp_path: Path) -> None:
    assert fuzz("perf-script", PERF_SCRIPT.encode(), load_any, tmp_path) >= 300


def test_heaptrack_flamegraph_output() -> None:
    """What heaptrack_print prints, parsed thousands of times (the tool is slower)."""
    rng = random.Random(26)
    seed = b"main (a.c);f (a.c);malloc (libc.so.6) 4096\nmain (a.c);g (b.c) 12\n"
    for _ in range(ROUNDS):
        text = mutate(seed, rng).decode("utf-8", "surrogateescape")
        with contextlib.suppress(ValueError):  # the importer turns it into one line
            heaptrack.parse_flamegraph(text)


def test_heaptrack_files(tmp_path: Path) -> None:
    """Whole heaptrack files through heaptrack_print: fewer rounds (five runs of the
    tool per load), seeded from a real recording, uncompressed so mutations reach it."""
    from tests.helpers.heap_records import record_heaptrack

    if shutil.which("zstd") is None:
        pytest.skip("zstd is not installed (heaptrack's files are zstd-compressed)")
    _binary, data = record_heaptrack(tmp_path)
    plain = subprocess.run(["zstd", "-dc", str(data)], capture_output=True, check=True).stdout
    assert fuzz("heaptrack", plain, load_any, tmp_path, rounds=40, budget_s=60) >= 10


@pytest.mark.parametrize("content", [b"v 10 3\nX /bin/\xff\xfe\xfa --opt\n",
                                     b"v 10 3\n\xff\xfe garbage \x00\x01\nzz\n"])
def test_heaptrack_bytes_that_are_not_utf8(tmp_path: Path, content: bytes) -> None:
    """heaptrack_print echoes the file's bytes, which need not be UTF-8: a file it
    refuses is refused in one line, without a traceback."""
    if shutil.which("heaptrack_print") is None:
        pytest.skip("heaptrack_print (Debian heaptrack) is not installed")
    path = tmp_path / "heaptrack.x.1"
    path.write_bytes(content)
    with pytest.raises(ProftuiError) as info:
        load_any(path)
    assert "\n" not in str(info.value)
