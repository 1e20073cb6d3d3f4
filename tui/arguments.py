"""The command line's words: the parser of each command, the option types, and the
CollectorOptions they make.  Errors are one line and exit status 2 (`_Parser`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proftui.collectors.errors import ProftuiError

# Each command imports what it uses when it runs (a `record` never loads Textual, the
# exporters or the diff code): the fixed cost of every command stays small.
if TYPE_CHECKING:

    from proftui.collectors.base import CollectorOptions



MODES = ("gprof", "instrument", "sampler", "heap")
AGENT_HZ = 99  # the agent's default rate: a host-wide profiler runs all the time
# Stacks the pushing agent holds before it forgets them: ~40 MiB of tables at most
# (two Lua interpreters at 99 Hz make ~100 new stacks a second, every second).
AGENT_MAX_STACKS = 20_000


SUBCOMMANDS = ("record", "report", "open", "demo", "attach", "agent", "export", "diff")


DESCRIPTION = """\
Live terminal profiler for native C/C++ programs.

  proftui ./prog args            profile prog; opens the TUI on a terminal
  proftui --pid N                sample the running process N (also: proftui attach N)
  proftui --all                  sample every process of this host, live (root or
                                 CAP_PERFMON), as `perf top` does, with every pane
  proftui record -o run.proftui ./prog args
                                 profile headless, save the profile, exit with prog's status
  proftui report run.proftui     print the flat profile and call tree (--json for scripts)
  proftui open run.proftui       browse a saved profile in the TUI
  proftui export -f pprof FILE   convert to pprof, folded, callgrind, dot or speedscope
                                 (report/open/export also read pprof, gperftools and perf
                                 script files, and gmon.out with --binary PROG)
  proftui diff BASE NEW          what changed between two profiles: per function and call
                                 path, in shares or --absolute units (--json for scripts)
  proftui agent --push URL       sample every process of this host (root or CAP_PERFMON) and
                                 push each as its own series (docs/fleet.md)
  proftui demo                   compile and profile the bundled demo program
  proftui demo --heap            the heap demo: allocations, live bytes, peak and leaks

Modes (chosen from the binary, --mode overrides):
  gprof       program built with -pg: proftui reads gmon.out (written at exit)
  instrument  built with -finstrument-functions: exact calls per call path, their time
              sampled per call path (--timed: every call timed), live
  sampler     any other binary: statistical CPU sampling (LD_PRELOAD), live
  heap        --mode heap: allocations, live bytes, peak and leaks by call path (LD_PRELOAD),
              live; never chosen automatically
  --heap      adds heap tracking to a sampler run: CPU and memory side by side in one profile
"""


def _add_profiling_options(parser: argparse.ArgumentParser, with_program: bool = True) -> None:
    parser.add_argument("--mode", choices=MODES, help="force a profiling mode (default: detect)")
    parser.add_argument("-F", "--frequency", type=_frequency, metavar="HZ",
                        help="sampling frequency in Hz, 1-10000 (sampler, attach, instrument; "
                             "default 1000)")
    parser.add_argument("--timed", action="store_true",
                        help="instrument mode: time every call with two clock reads (call "
                             "durations, as uftrace; biased on short functions) instead of "
                             "sampling each calling context. The clock is wall time: time "
                             "the thread was pre-empted or blocked counts in the open call; "
                             "uninstrumented code it runs (libc) has no time of its own, it "
                             "is in its caller's self time")
    parser.add_argument("--count-only", action="store_true",
                        help="instrument mode: count calls only, no clock and no signal "
                             "(costs about what the default costs: the hooks, not the "
                             "clock, are the overhead)")
    parser.add_argument("-N", "--exclude", action="append", default=[], metavar="PATTERN",
                        help="instrument mode: ignore functions matching PATTERN (repeatable)")
    parser.add_argument("-I", "--include", action="append", default=[], metavar="PATTERN",
                        help="instrument mode: record only functions matching PATTERN")
    parser.add_argument("-D", "--depth", type=int, metavar="N", help="limit recorded call depth")
    parser.add_argument("--wall", action="store_true",
                        help="sampler, instrument: sample wall-clock time instead of CPU time")
    parser.add_argument("--follow", action="store_true",
                        help="sampler: follow children across fork/exec")
    parser.add_argument("--heap", action="store_true",
                        help="sampler: track the heap too (the heap profiler preloaded beside "
                             "the sampler): CPU and memory side by side in one run")
    parser.add_argument("--heap-sample", type=_heap_sample, metavar="BYTES",
                        help="heap mode and --heap: sample one allocation per BYTES on average "
                             "(Poisson on bytes, estimates scaled up; e.g. 512K); default: "
                             "every one")
    parser.add_argument("--buffer", type=_megabytes, metavar="MB",
                        help="shared-memory budget per process in MiB (instrument, sampler, "
                             "heap; attach: the perf ring buffers' total); what does not fit "
                             "is counted as dropped")
    parser.add_argument("--keep-run-dir", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-p", "--pid", type=int, metavar="PID",
                        help="attach to the running process PID instead of starting a program")
    parser.add_argument("--duration", type=float, metavar="S",
                        help="attach: stop after S seconds (default: until Ctrl-C or exit)")
    parser.add_argument("--method", choices=("perf", "ptrace"),
                        help="attach: sampling method (default: perf_event, else ptrace)")
    push = parser.add_argument_group("fleet (pip install 'proftui[fleet]'; docs/fleet.md)")
    push.add_argument("--push", type=_push_url, metavar="URL",
                      help="push the profile to ClickHouse while it runs: "
                           "clickhouse://HOST[:PORT]/DATABASE (credentials in the URL or "
                           "PROFTUI_CLICKHOUSE_USER/_PASSWORD)")
    push.add_argument("--every", type=_interval, default=10.0, metavar="S",
                      help="--push: one interval every S seconds (default 10)")
    push.add_argument("--label", action="append", default=[], type=_label, metavar="KEY=VALUE",
                      help="--push: a label of this run (repeatable; overrides the automatic "
                           "host, program, build, mode and pid)")
    push.add_argument("--spool-max", type=_megabytes, metavar="MB",
                      help="--push: disk for intervals waiting for the server (default 64)")
    if with_program:
        parser.add_argument("program", nargs="?", help="the program to profile")
        parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    else:
        parser.set_defaults(program=None, args=[])


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "proftui: <what is wrong> (see --help)", status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"proftui: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _number(text: str, kind: type[int] | type[float], what: str) -> Any:
    """`text` as an int or float, or the one line that says it is not one."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a {what}: {text!r}") from None


def _frequency(text: str) -> int:
    value = _number(text, int, "whole number of Hz")
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError("frequency must be between 1 and 10000 Hz")
    return value


def _stack_count(text: str) -> int:
    value = _number(text, int, "whole number of stacks")
    if not 100 <= value <= 4_000_000:
        raise argparse.ArgumentTypeError("stacks must be between 100 and 4000000")
    return value


def _megabytes(text: str) -> int:
    value = _number(text, float, "number of MiB")
    if not 0.0625 <= value <= 65536:
        raise argparse.ArgumentTypeError("buffer must be between 0.0625 and 65536 MiB")
    return int(value * (1 << 20))


def _heap_sample(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a byte count: {text!r} (e.g. 524288 or 512K)") from None
    if not 1 <= value <= 1 << 40:
        raise argparse.ArgumentTypeError("heap sample interval: 1 byte to 1 TiB")
    return int(value)


def _push_url(text: str) -> Any:
    from proftui.collectors.fleet.url import parse

    try:
        return parse(text, query=False)
    except ProftuiError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _label(text: str) -> tuple[str, str]:
    from proftui.collectors.fleet.url import parse_label

    try:
        return parse_label(text)
    except ProftuiError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _interval(text: str) -> float:
    value = _number(text, float, "number of seconds")
    if not 1 <= value <= 86400:
        raise argparse.ArgumentTypeError("interval must be between 1 and 86400 seconds")
    return value


def _source(text: str) -> Path | str:
    """A profile file, or a fleet URL (kept as text: Path would fold its //)."""
    if text.startswith("clickhouse://"):
        from proftui.collectors.fleet.url import parse

        try:
            parse(text)  # malformed: the usage error, before anything runs
        except ProftuiError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    return Path(text)


def source_name(source: Path | str | None) -> str:
    """How a profile source is named in reports: a fleet URL without its password."""
    if isinstance(source, str):
        from proftui.collectors.fleet.url import parse

        return parse(source).display()
    return "" if source is None else str(source)


def _version() -> str:
    """The installed package's version (importlib.metadata), or "unknown"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("proftui")
    except PackageNotFoundError:
        return "unknown"


def _output_path(text: str) -> Path:
    if not text:  # Path("") would silently mean the current directory
        raise argparse.ArgumentTypeError("empty output file name")
    return Path(text)


def _run_parser() -> argparse.ArgumentParser:
    run = _Parser(
        prog="proftui", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--version", action="version", version=f"proftui {_version()}")
    out = run.add_mutually_exclusive_group()
    out.add_argument("--text", action="store_true", help="no TUI: print the text report at exit")
    out.add_argument("--json", action="store_true", help="no TUI: print the JSON report at exit")
    _add_by_option(run)
    run.add_argument("--all", action="store_true",
                     help="sample every process of this host (root or CAP_PERFMON; -F "
                          f"default {AGENT_HZ}): `t` picks a process or thread")
    _add_profiling_options(run)
    return run


def _record_parser() -> argparse.ArgumentParser:
    record = _Parser(prog="proftui record",
                     description="Profile a program headless and save the result.")
    record.add_argument("-o", "--output", type=_output_path, default=Path("run.proftui"),
                        help="where to save the profile (default: run.proftui)")
    _add_profiling_options(record)
    return record


def _add_by_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", choices=("all", "process"), default="all",
                        help="all: every process merged (the default); process: the processes "
                             "of a --follow run (or a forking one) kept apart: a pid on each "
                             "flat-profile row, one call-tree root per process")


def _add_range_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="range_from", type=_seconds, metavar="S",
                        help="only the part of the run from S seconds after its start "
                             "(sampler, attach and heap profiles keep costs over time)")
    parser.add_argument("--to", dest="range_to", type=_seconds, metavar="S",
                        help="only the part of the run up to S seconds after its start")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < 1e9:
        raise argparse.ArgumentTypeError("seconds from the start of the run: 0 or more")
    return value


def _report_parser() -> argparse.ArgumentParser:
    report = _Parser(prog="proftui report", description="Print a saved profile as text or JSON.")
    report.add_argument("file", type=_source, help="a profile file or a fleet URL "
                        "(clickhouse://HOST[:PORT]/DATABASE?from=-1h&to=now&LABEL=VALUE)")
    _add_range_options(report)
    report.add_argument("--binary", type=Path, metavar="PROG",
                        help="for a gmon.out: the -pg program that wrote it")
    form = report.add_mutually_exclusive_group()
    form.add_argument("--text", action="store_true",
                      help="the text report (the default; as run and attach take it)")
    form.add_argument("--json", action="store_true", help="machine-readable JSON report")
    report.add_argument("-n", "--limit", type=int, help="show only the top N functions")
    _add_by_option(report)
    return report


def _open_parser() -> argparse.ArgumentParser:
    open_ = _Parser(prog="proftui open", description="Browse a saved profile.")
    open_.add_argument("file", type=_source, help="a profile file or a fleet URL "
                       "(clickhouse://HOST[:PORT]/DATABASE?from=-1h&LABEL=VALUE); `r` re-runs "
                       "a fleet query")
    _add_range_options(open_)
    open_.add_argument("--binary", type=Path, metavar="PROG",
                       help="for a gmon.out: the -pg program that wrote it")
    open_.add_argument("--base", type=_source, metavar="BASE",
                       help="compare with this profile: Δ columns in the flat profile and "
                            "the tree (any format `open` reads)")
    return open_


def _demo_parser() -> argparse.ArgumentParser:
    demo = _Parser(
        prog="proftui demo", description="Compile the bundled demo C program and profile it.")
    demo.add_argument("--mode", choices=MODES, help="build the demo for this mode")
    demo.add_argument("--text", action="store_true", help="no TUI: print the text report")
    demo.add_argument("--heap", action="store_true",
                      help="the heap demo: a program that allocates, caches and leaks, in "
                           "heap mode (same as --mode heap)")
    return demo


def _attach_parser() -> argparse.ArgumentParser:
    attach = _Parser(
        prog="proftui attach", description="Sample a running process (same as --pid).")
    attach.add_argument("attach_pid", type=int, metavar="PID")
    attach.add_argument("--text", action="store_true", help="no TUI: print the text report")
    attach.add_argument("--json", action="store_true", help="no TUI: print the JSON report")
    _add_by_option(attach)
    attach.add_argument("-o", "--output", type=_output_path,
                        help="headless: save the profile to this file instead of printing")
    _add_profiling_options(attach, with_program=False)
    return attach


def _agent_parser() -> argparse.ArgumentParser:
    agent = _Parser(
        prog="proftui agent", description="Sample every process of this host through "
        "perf_event (one event per CPU; needs root or CAP_PERFMON) and push each process "
        "to the fleet's ClickHouse as its own series, labelled host, program, build, pid "
        "and user (docs/fleet.md).  Runs until --duration, Ctrl-C, SIGTERM or SIGHUP.")
    agent.add_argument("--push", type=_push_url, metavar="URL",
                       help="clickhouse://HOST[:PORT]/DATABASE to push to")
    agent.add_argument("-o", "--output", type=_output_path,
                       help="also save every process together to this profile at the end")
    agent.add_argument("-F", "--frequency", type=_frequency, default=AGENT_HZ, metavar="HZ",
                       help=f"samples per second on each CPU (default {AGENT_HZ})")
    agent.add_argument("--duration", type=_seconds, metavar="S",
                       help="stop after S seconds (default: until Ctrl-C or SIGTERM)")
    agent.add_argument("--program", action="append", default=[], metavar="NAME",
                       help="only processes whose executable is named NAME (repeatable)")
    agent.add_argument("--user", action="append", default=[], metavar="NAME",
                       help="only processes of user NAME (repeatable)")
    agent.add_argument("--buffer", type=_megabytes, metavar="MB",
                       help="the perf ring buffers' total size (default 512 KiB per CPU)")
    agent.add_argument("--every", type=_interval, default=10.0, metavar="S",
                       help="one interval every S seconds (default 10)")
    agent.add_argument("--label", action="append", default=[], type=_label,
                       metavar="KEY=VALUE", help="a label of every series (repeatable)")
    agent.add_argument("--spool-max", type=_megabytes, metavar="MB",
                       help="disk for intervals waiting for the server (default 64)")
    agent.add_argument("--max-stacks", type=_stack_count, default=AGENT_MAX_STACKS,
                       metavar="N", help="with --push alone: once N distinct stacks are "
                       "held, forget them after the next push, so that a long run's memory "
                       f"stays bounded (default {AGENT_MAX_STACKS:,}; -o keeps every one)")
    return agent


def _export_parser() -> argparse.ArgumentParser:
    from proftui.collectors.formats.export import EXPORTERS  # names only: no exporter loads

    export = _Parser(
        prog="proftui export", description="Convert a profile (proftui, pprof, gperftools or "
        "`perf script` output) for other tools: pprof, folded, callgrind, dot, speedscope.")
    export.add_argument("--format", "-f", required=True, choices=sorted(EXPORTERS))
    export.add_argument("-o", "--output", type=_output_path,
                        help="output file, - for stdout (default: beside FILE, named by format)")
    export.add_argument("file", type=_source, help="a profile file or a fleet URL")
    export.add_argument("--binary", type=Path, metavar="PROG",
                        help="for a gmon.out: the -pg program that wrote it")
    _add_range_options(export)
    _add_by_option(export)
    return export


def _diff_parser() -> argparse.ArgumentParser:
    from proftui.collectors.formats.diffreport import DEFAULT_LIMIT, DEFAULT_PATHS

    diff = _Parser(
        prog="proftui diff", description="Compare two profiles (any format `open` reads): per "
        "function, the change of self and total cost as shares of each profile's own total "
        "(percentage points) and in absolute units, largest first, then the calling contexts "
        "whose total changed most.  Functions match by name and module base name, so two "
        "builds of one program compare.  Exit status 0 whenever the diff was computed.")
    diff.add_argument("base", type=_source, metavar="BASE",
                      help="the baseline profile (a file or a fleet URL)")
    diff.add_argument("new", type=_source, metavar="NEW",
                      help="the profile to compare with it (a file or a fleet URL)")
    diff.add_argument("--metric", metavar="NAME",
                      help="the metric to compare (default: NEW's first metric BASE has too)")
    diff.add_argument("--absolute", action="store_true",
                      help="sort by the change in absolute units instead of shares")
    diff.add_argument("--sort", choices=("self", "total"), default="self",
                      help="rank functions by the change of self or total cost (default self)")
    diff.add_argument("-n", "--limit", type=_count, default=DEFAULT_LIMIT, metavar="N",
                      help=f"show the top N functions, 0 for all (default {DEFAULT_LIMIT})")
    diff.add_argument("--paths", type=_count, default=DEFAULT_PATHS, metavar="N",
                      help=f"show the top N calling contexts (default {DEFAULT_PATHS})")
    diff.add_argument("--json", action="store_true", help="machine-readable JSON")
    diff.add_argument("--binary", type=Path, metavar="PROG",
                      help="for gmon.out files: the -pg program that wrote NEW (and BASE, "
                           "unless --base-binary)")
    diff.add_argument("--base-binary", type=Path, metavar="PROG",
                      help="for a gmon.out BASE: the -pg program that wrote it")
    return diff


PARSERS = {"run": _run_parser, "record": _record_parser, "report": _report_parser,
           "open": _open_parser, "demo": _demo_parser, "attach": _attach_parser,
           "agent": _agent_parser,
           "export": _export_parser, "diff": _diff_parser}


def build_parser(name: str) -> argparse.ArgumentParser:
    """The parser of subcommand `name` ("run" for profiling a program)."""
    return PARSERS[name]()


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def split_command(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Subcommand name and its arguments; only the first word can be a subcommand."""
    args = list(argv)
    if args and args[0] == "--":
        return "run", args[1:]
    if args and args[0] in SUBCOMMANDS:
        return args[0], args[1:]
    return "run", args


def options_from(args: argparse.Namespace, output: str) -> CollectorOptions:
    from proftui.collectors.base import CollectorOptions

    return CollectorOptions(
        output=output,  # type: ignore[arg-type]
        frequency_hz=args.frequency or CollectorOptions.frequency_hz,
        count_only=args.count_only,
        timed=args.timed,
        include=args.include,
        exclude=args.exclude,
        max_depth=args.depth,
        keep_run_dir=args.keep_run_dir,
        buffer_bytes=args.buffer,
        wall_clock=args.wall,
        follow_children=args.follow,
        duration_s=args.duration,
        pid=args.pid,
        method=args.method,
        heap_sample_bytes=args.heap_sample,
    )
