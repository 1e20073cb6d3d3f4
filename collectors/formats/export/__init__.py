"""Export formats: every exporter takes a finalized `Profile` and returns the file's bytes.

`proftui export --format F` and the TUI's export key both go through
`write_export`.  Formats: pprof (gzip protobuf), folded stacks, callgrind,
Graphviz DOT, speedscope JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export.callgrind import export_callgrind
from proftui.collectors.formats.export.dot import export_dot
from proftui.collectors.formats.export.folded import export_folded
from proftui.collectors.formats.export.pprof import export_pprof
from proftui.collectors.formats.export.speedscope import export_speedscope
from proftui.collectors.model.profile import Profile
from proftui.collectors.safefile import write_output

EXPORTERS: dict[str, Callable[[Profile], bytes]] = {
    "pprof": export_pprof,
    "folded": export_folded,
    "callgrind": export_callgrind,
    "dot": export_dot,
    "speedscope": export_speedscope,
}

DESCRIPTIONS = {
    "pprof": "pprof protobuf, gzip (go tool pprof, pprof web UI)",
    "folded": "folded stacks (flamegraph.pl, inferno, speedscope)",
    "callgrind": "callgrind (kcachegrind, callgrind_annotate, gprof2dot)",
    "dot": "Graphviz call graph (dot -Tsvg)",
    "speedscope": "speedscope JSON (speedscope.app)",
}


def default_output(source: Path, fmt: str) -> Path:
    """Where `proftui export` writes by default: beside `source`, named by format."""
    stem = source.name
    for suffix in (".proftui", ".txt", ".prof", ".out", ".data"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    name = {
        "pprof": f"{stem}.pb.gz",
        "folded": f"{stem}.folded",
        "callgrind": f"callgrind.out.{stem}",  # the name kcachegrind looks for
        "dot": f"{stem}.dot",
        "speedscope": f"{stem}.speedscope.json",
    }[fmt]
    return source.with_name(name)


def export_bytes(profile: Profile, fmt: str) -> bytes:
    """The file contents of `profile` in format `fmt` (ProftuiError if unknown)."""
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise ProftuiError(f"unknown export format {fmt!r} (choose from {', '.join(EXPORTERS)})")
    return exporter(profile)


def write_export(profile: Profile, fmt: str, path: Path, *, regular_only: bool = False) -> None:
    """Write `profile` as `fmt` to `path` (atomically, 0600 unless replacing a file of
    ours: collectors/safefile.py; `regular_only` refuses a device or FIFO);
    "-" means standard output."""
    data = export_bytes(profile, fmt)
    if str(path) == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    write_output(path, data, regular_only=regular_only)
