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
from proftui.collectors.lazy import LazyMapping
from proftui.collectors.model.profile import Profile
from proftui.collectors.safefile import write_output

Exporter = Callable[[Profile], bytes]


def _pprof() -> Exporter:
    from proftui.collectors.formats.export.pprof import export_pprof
    return export_pprof


def _folded() -> Exporter:
    from proftui.collectors.formats.export.folded import export_folded
    return export_folded


def _callgrind() -> Exporter:
    from proftui.collectors.formats.export.callgrind import export_callgrind
    return export_callgrind


def _dot() -> Exporter:
    from proftui.collectors.formats.export.dot import export_dot
    return export_dot


def _speedscope() -> Exporter:
    from proftui.collectors.formats.export.speedscope import export_speedscope
    return export_speedscope


# format -> exporter, each module imported when its format is first used
EXPORTERS: LazyMapping[Exporter] = LazyMapping(
    {"pprof": _pprof, "folded": _folded, "callgrind": _callgrind, "dot": _dot,
     "speedscope": _speedscope})

DESCRIPTIONS = {
    "pprof": "pprof protobuf, gzip (go tool pprof, pprof web UI)",
    "folded": "folded stacks (flamegraph.pl, inferno, speedscope)",
    "callgrind": "callgrind (kcachegrind, callgrind_annotate, gprof2dot)",
    "dot": "Graphviz call graph (dot -Tsvg)",
    "speedscope": "speedscope JSON (speedscope.app)",
}


def default_output(source: Path | str, fmt: str) -> Path:
    """Where `proftui export` writes by default: beside `source`, named by format (a
    fleet query's in the current directory, as fleet.*)."""
    source = Path("fleet") if isinstance(source, str) else source
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


def export_bytes(profile: Profile, fmt: str, by: str = "all") -> bytes:
    """The file contents of `profile` in format `fmt` (ProftuiError if unknown).  `by`
    "process": one root frame per process above its call paths ("process 1234 prog",
    model/byprocess.py), so a --follow run's programs stay apart in every format."""
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise ProftuiError(f"unknown export format {fmt!r} (choose from {', '.join(EXPORTERS)})")
    if by == "process":
        from proftui.collectors.model.byprocess import grouped_profile

        profile = grouped_profile(profile)
    return exporter(profile)


def write_export(profile: Profile, fmt: str, path: Path, *, regular_only: bool = False,
                 by: str = "all") -> None:
    """Write `profile` as `fmt` to `path` (atomically, 0600 unless replacing a file of
    ours: collectors/safefile.py; `regular_only` refuses a device or FIFO);
    "-" means standard output.  `by`: as `export_bytes`."""
    data = export_bytes(profile, fmt, by)
    if str(path) == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    write_output(path, data, regular_only=regular_only)
