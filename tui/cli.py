"""The `proftui` command line: parse, pick a collector, run the TUI or a headless report.

Subcommand words count only as the first argument, so `proftui ./record`
profiles a program called record and `proftui -- record` does the same for a
program on PATH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proftui.collectors.errors import ProftuiError

# Each command imports what it uses when it runs (a `record` never loads Textual, the
# exporters or the diff code): the fixed cost of every command stays small.
if TYPE_CHECKING:
    from collections.abc import Callable

    from proftui.collectors.base import Collector, CollectorOptions
    from proftui.collectors.detect import BinaryFacts
    from proftui.collectors.fleet.pusher import Pusher
    from proftui.collectors.model.profile import Profile
    from proftui.collectors.runtime.launch import ExitInfo, StopSignals

MODES = ("gprof", "instrument", "sampler", "heap")
SUBCOMMANDS = ("record", "report", "open", "demo", "attach", "export", "diff")

DESCRIPTION = """\
Live terminal profiler for native C/C++ programs.

  proftui ./prog args            profile prog; opens the TUI on a terminal
  proftui --pid N                sample the running process N (also: proftui attach N)
  proftui record -o run.proftui ./prog args
                                 profile headless, save the profile, exit with prog's status
  proftui report run.proftui     print the flat profile and call tree (--json for scripts)
  proftui open run.proftui       browse a saved profile in the TUI
  proftui export -f pprof FILE   convert to pprof, folded, callgrind, dot or speedscope
                                 (report/open/export also read pprof, gperftools and perf
                                 script files, and gmon.out with --binary PROG)
  proftui diff BASE NEW          what changed between two profiles: per function and call
                                 path, in shares or --absolute units (--json for scripts)
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
    parser.add_argument("-F", "--frequency", type=_frequency, default=1000, metavar="HZ",
                        help="sampling frequency in Hz, 1-10000 (sampler, attach, instrument; "
                             "default 1000)")
    parser.add_argument("--timed", action="store_true",
                        help="instrument mode: time every call with two clock reads (call "
                             "durations, as uftrace; biased on short functions) instead of "
                             "sampling each calling context")
    parser.add_argument("--count-only", action="store_true",
                        help="instrument mode: count calls only, no clock at all (lowest "
                             "overhead)")
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


def _frequency(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError("frequency must be between 1 and 10000 Hz")
    return value


def _megabytes(text: str) -> int:
    value = float(text)
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
    value = float(text)
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


def _load(path: Path | str, binary: Path | None, args: argparse.Namespace) -> Profile:
    """A profile file (any format `open` reads), cut to --from/--to when given."""
    from proftui.collectors.formats.importers import load_any

    profile = load_any(path, binary)
    start, end = getattr(args, "range_from", None), getattr(args, "range_to", None)
    if start is None and end is None:
        return profile
    from proftui.collectors.model.slices import END_OF_RUN, range_profile

    if end is not None and start is not None and end <= start:
        raise ProftuiError(f"--to {end:g} is not after --from {start:g}")
    try:
        return range_profile(profile, start or 0.0, end if end is not None else END_OF_RUN)
    except ValueError as exc:
        raise ProftuiError(f"{path}: {exc}") from None


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
        frequency_hz=args.frequency,
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


def make_collector(args: argparse.Namespace, output: str) -> Collector:
    """Check the program, choose the mode, and build (not start) its collector."""
    from proftui.collectors.detect import inspect_binary
    from proftui.collectors.registry import COLLECTORS
    from proftui.collectors.runtime.launch import resolve_program, script_interpreter

    if args.pid is not None:
        if args.program is not None:
            raise ProftuiError("give either a program to run or --pid, not both")
        if getattr(args, "heap", False):
            raise ProftuiError("--heap adds heap tracking to sampler runs only; attach mode "
                               "cannot track a running process's heap")
        return COLLECTORS["attach"]([], options_from(args, output))
    if args.program is None:
        raise ProftuiError("no program given (see proftui --help)")
    program = resolve_program(args.program, scripts=args.follow)
    interpreter = script_interpreter(program)
    heap = getattr(args, "heap", False)
    facts = inspect_binary(program) if interpreter is None else None
    mode = args.mode or (facts.mode if facts is not None else "sampler")
    if heap and mode != "sampler":  # the one mode --heap can be added to
        raise ProftuiError(
            f"--heap adds heap tracking to sampler runs only, not to {mode} mode "
            "(use --mode sampler --heap, or --mode heap for the heap alone)")
    if facts is not None:
        _check_binary(args, facts, mode, heap)
    elif mode not in ("sampler", "heap"):  # --follow ./script (the launch checks its
        raise ProftuiError(  # interpreter): the interpreter and what it runs, preloaded
            f"{args.program} is a script (run by {interpreter}): --follow runs scripts in "
            f"sampler or heap mode, not {mode} mode; run the -pg or -finstrument-functions "
            "program itself")
    if args.timed and args.count_only:
        raise ProftuiError("--timed and --count-only exclude each other: --timed times every "
                           "call, --count-only reads no clock")
    if args.timed and args.wall:
        raise ProftuiError("--timed already measures wall time per call; --wall samples it "
                           "(drop one)")
    if args.timed and mode != "instrument":
        raise ProftuiError(f"--timed applies to instrument mode only, not to {mode} mode "
                           "(programs built with -finstrument-functions)")
    if args.heap_sample is not None and mode != "heap" and not heap:
        raise ProftuiError("--heap-sample applies to heap mode only (add --mode heap, "
                           "or --heap to a sampler run)")
    if heap:
        return COLLECTORS["sampler+heap"]([args.program, *args.args], options_from(args, output))
    return COLLECTORS[mode]([args.program, *args.args], options_from(args, output))


def _check_binary(args: argparse.Namespace, facts: BinaryFacts, mode: str, heap: bool) -> None:
    """ProftuiError when the program cannot be profiled in `mode` (foreign, static, not
    built for it)."""
    from proftui.collectors.detect import refuse_foreign

    if mode != "gprof":
        refuse_foreign(args.program, facts, {"instrument": "the hook library",
                                             "heap": "the heap profiler"}.get(mode, "the sampler"))
    if mode == "instrument" and facts.mode != "instrument":
        raise ProftuiError(
            f"{args.program} was not built with -finstrument-functions, so instrument mode "
            "would see no calls; rebuild with it, or drop --mode to sample instead")
    if mode == "gprof" and facts.mode != "gprof":
        raise ProftuiError(
            f"{args.program} was not built with -pg, so it writes no gmon.out; rebuild with "
            "`gcc -pg`, or drop --mode to sample instead")
    if mode == "sampler" and facts.static and heap:
        raise ProftuiError(
            f"{args.program} is statically linked, so the sampler and the heap profiler cannot "
            "be preloaded into it; relink it dynamically (attach mode, `proftui --pid PID`, "
            "samples its CPU without the heap)")
    if mode == "sampler" and facts.static:
        raise ProftuiError(
            f"{args.program} is statically linked, so the sampler cannot be preloaded into it; "
            "start it yourself and use `proftui --pid PID` (attach mode)")
    if mode == "heap" and facts.static:
        raise ProftuiError(
            f"{args.program} is statically linked, so the heap profiler cannot be preloaded into "
            "it; relink it dynamically, or run it under valgrind --tool=massif")


def run_headless(collector: Collector, stop: StopSignals | None = None,
                 pusher: Pusher | None = None) -> Profile:
    """Start, wait for the end (a stop signal ends the target or detaches), clean up.
    With a `pusher`, intervals go to the fleet's server meanwhile, the last one at the
    end (its notes join the profile's)."""
    try:
        collector.start()
        if pusher is not None:
            pusher.start(collector, _program_path(collector))
        if stop is not None and stop.received is not None:
            collector.end(stop.received)  # it came while starting: end at once
        profile = collector.wait()
        if pusher is not None:
            say(f"proftui: {pusher.finish()}")
            profile.meta.warnings.extend(pusher.notes())
        return profile
    finally:
        collector.stop()  # also after a failed start: the run directory goes


def make_pusher(args: argparse.Namespace) -> Pusher | None:
    """The fleet pusher of `--push URL`, connected (schema checked or created) before the
    target starts, so a bad server is one line and no run; None without --push."""
    if getattr(args, "push", None) is None:
        return None
    from proftui.collectors.fleet.pusher import Pusher

    kwargs = {"max_spool_bytes": args.spool_max} if args.spool_max else {}
    pusher = Pusher(args.push, dict(args.label), every_s=args.every, **kwargs)
    note = pusher.connect()
    if note:
        say(f"proftui: {note}")
    return pusher


def _program_path(collector: Collector) -> str | None:
    """The launched program's path (for the build label); None for attach."""
    if collector.mode == "attach" or not collector.argv:
        return None
    from proftui.collectors.runtime.launch import resolve_program

    try:
        return str(resolve_program(collector.argv[0]))
    except ProftuiError:
        return None


def finish_headless(collector: Collector, profile: Profile, stop: StopSignals) -> int:
    """Say in one line what a SIGTERM/SIGHUP did to the target; the status to exit with.

    A launched target got the signal too, so its own status stands (128+N when it
    died of it).  An attached one keeps running, so proftui reports for itself, as a
    shell would: 128+N.
    """
    from proftui.collectors.runtime.launch import signal_name

    signum = collector.signalled() or stop.received
    if signum is None:
        return exit_status_of(profile)
    say(f"proftui: {signal_name(signum)}: {collector.end(signum)}")
    return 128 + signum if collector.mode == "attach" else exit_status_of(profile)


def say(line: str) -> None:
    """One line on stderr; nothing when stderr is gone too (a closed terminal)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _stdout_gone() -> None:
    """stdout's reader went away: point it at /dev/null so the exit flush is quiet."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def exit_status_of(profile: Profile) -> int:
    """The target's status as a shell reports it (128+N for signal N)."""
    from proftui.collectors.runtime.launch import shell_status

    return shell_status(profile.meta.exit_status, profile.meta.exit_signal)


def print_report(profile: Profile, as_json: bool, limit: int | None = None,
                 by: str = "all") -> None:
    if as_json:  # written as it is made: a big tree is never one string
        from proftui.collectors.formats.export.json_report import write_json

        write_json(profile, sys.stdout, by=by)
    else:
        from proftui.collectors.formats.export.text import render_text

        sys.stdout.write(render_text(profile, limit=limit, by=by))
    sys.stdout.flush()


def _describe(collector: Collector) -> str:
    info = collector.exit_info()
    if info is not None:
        return f"target pid {collector.pid} {info.describe()}"
    if collector.mode == "attach":
        return f"detached from pid {collector.pid}, which keeps running"
    return f"target pid {collector.pid} ended"


def wants_tui(args: argparse.Namespace) -> bool:
    return not (getattr(args, "text", False) or getattr(args, "json", False)) and (
        sys.stdout.isatty() and sys.stdin.isatty())


def run_tui(collector: Collector | None = None, profile: Profile | None = None,
            base: Profile | None = None, base_name: str = "",
            reload: Callable[[], Profile] | None = None, source: str = "",
            pusher: Pusher | None = None) -> int:
    """The app on a live collector or a saved profile; the status to exit with.

    SIGTERM/SIGHUP/SIGINT make the app exit through its normal path (the terminal is
    restored), then end the target as a shell would (or detach), and proftui
    exits 128+N with one line on what became of the target.
    """
    from proftui.collectors.runtime.launch import StopSignals, signal_name
    from proftui.tui.app import ProfTuiApp  # Textual loads only when a TUI is wanted
    from proftui.tui.terminal import StuckExit

    with StopSignals(interrupt=True) as stop:
        if collector is not None:
            # Start before the app takes the screen, so a failure is a one-line error.
            try:
                collector.start()
                if pusher is not None:
                    pusher.start(collector, _program_path(collector))
            except BaseException:
                collector.stop()
                raise
        app = ProfTuiApp(collector=collector, profile=profile, stop_signals=stop, base=base,
                         base_name=base_name or "base", reload=reload, source=source)
        watchdog = StuckExit(collector, signal_name)
        stop.listen(watchdog.arm)
        line = ""
        ended = None  # how the target ended on its own, if it did before the app returned
        try:
            if stop.received is None:
                app.run()
        finally:
            watchdog.app_returned.set()
            with watchdog.finishing:
                if collector is not None:
                    # Quit in the moment between the target's end and its final profile
                    # (the header already says how it ended): its status still counts.
                    ended = app.exit_info if app.ended else collector.exit_info()
                    if stop.received is not None:
                        line = collector.end(stop.received)
                    if pusher is not None:  # the last interval, before the target goes
                        say(f"proftui: {pusher.finish()}")
                    collector.stop()  # kills a target the user chose to quit on; attach: detaches
        if stop.received is not None:
            if line:
                say(f"proftui: {signal_name(stop.received)}: {line}")
            return 128 + stop.received
    if collector is not None and ended is not None:
        say_failed_output(collector, ended)
    return tui_exit_status(app.final_profile(), ended, collector is not None)


def tui_exit_status(final: Profile | None, ended: ExitInfo | None, live: bool) -> int:
    """What the TUI exits with after a plain `q`: the target's status when it ended on its
    own (from the final profile, else from the process itself: gprof has no profile when
    the target left through _exit and wrote no gmon.out), 0 otherwise."""
    if not live:
        return 0
    if final is not None and (final.meta.exit_status is not None
                              or final.meta.exit_signal is not None):
        return exit_status_of(final)
    return ended.shell_status() if ended is not None else 0


AFTER_QUIT_LINES = 20  # of a failed target's output, printed once the TUI is gone


def say_failed_output(collector: Collector, info: ExitInfo | None) -> None:
    """After the TUI, when the target failed on its own (non-zero status or a signal):
    the last lines of its output, which the TUI captured, so its error message is seen."""
    output = collector.output()
    if output is None or info is None or (info.signal is None and not info.status):
        return
    lines = output.last_lines(AFTER_QUIT_LINES)
    if not lines:
        say(f"proftui: target {info.describe()}; it wrote no output")
        return
    shown = "its output" if len(lines) < AFTER_QUIT_LINES and not output.dropped_bytes \
        else f"the last {len(lines)} lines of its output"
    say(f"proftui: target {info.describe()}; {shown}:")
    for text in lines:
        say(text)


def cmd_run(args: argparse.Namespace) -> int:
    from proftui.collectors.runtime.launch import StopSignals

    if wants_tui(args):
        collector = make_collector(args, output="log")
        return run_tui(collector=collector, pusher=make_pusher(args))
    collector = make_collector(args, output="inherit")
    pusher = make_pusher(args)
    with StopSignals() as stop:
        profile = run_headless(collector, stop, pusher)
        status = finish_headless(collector, profile, stop)
        try:
            print_report(profile, as_json=args.json, by=getattr(args, "by", "all"))
        except BrokenPipeError:
            # `proftui --text prog | head`: prog's own status is what matters (a SIGPIPE
            # death shows as 141); the report has nowhere to go, so say so and keep it.
            _stdout_gone()
            say("proftui: report not written: standard output was closed (broken pipe); "
                + _describe(collector))
    return status


def cmd_record(args: argparse.Namespace) -> int:
    from proftui.collectors.model import storage
    from proftui.collectors.runtime.launch import StopSignals
    from proftui.collectors.safefile import check_output

    check_output(args.output)  # before the target starts: a bad -o must not cost a run
    collector = make_collector(args, output="inherit")
    pusher = make_pusher(args)
    with StopSignals() as stop:  # a SIGTERM/SIGHUP while saving must not lose the profile
        profile = run_headless(collector, stop, pusher)
        try:
            _written, note = storage.save_or_fallback(profile, args.output)
        except ProftuiError as exc:  # the run is lost: say so, but report the target's status
            say(f"proftui: {exc}")
        else:
            say(f"proftui: {note}" if note else
                f"proftui: {profile.meta.mode} profile saved to {args.output}")
        return finish_headless(collector, profile, stop)


def cmd_report(args: argparse.Namespace) -> int:
    print_report(_load(args.file, args.binary, args), as_json=args.json, limit=args.limit,
                 by=args.by)
    return 0


def _base_name(base: Path | str | None) -> str:
    if base is None:
        return ""
    return source_name(base) if isinstance(base, str) else base.name


def cmd_open(args: argparse.Namespace) -> int:
    from proftui.collectors.formats.importers import load_any

    profile = _load(args.file, args.binary, args)
    reload = None
    if isinstance(args.file, str):  # a fleet query: `r` runs it again
        file = args.file

        def reload() -> Profile:
            return load_any(file)

    base = None
    if args.base is not None:
        try:
            base = load_any(args.base, args.binary)
        except ProftuiError as exc:
            raise ProftuiError(f"--base: {exc}", exc.exit_status) from exc
    if sys.stdout.isatty() and sys.stdin.isatty():
        return run_tui(profile=profile, base=base,
                       base_name=_base_name(args.base), reload=reload,
                       source=source_name(args.file) if reload is not None else "")
    if base is not None:  # no terminal for the Δ columns: the report of FILE, and a pointer
        say("proftui: --base compares in the TUI; without a terminal, "
            "`proftui diff BASE FILE` prints the changes")
    print_report(profile, as_json=False)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from proftui.collectors.registry import COLLECTORS
    from proftui.tui.demo import build_demo, demo_mode

    mode = "heap" if args.heap else args.mode or demo_mode(COLLECTORS)
    binary = build_demo(mode)
    print(f"proftui: built demo {binary} for {mode} mode", file=sys.stderr)
    run_args = build_parser("run").parse_args(
        [*(["--text"] if args.text else []), "--mode", mode, str(binary)])
    return cmd_run(run_args)


def cmd_attach(args: argparse.Namespace) -> int:
    args.pid = args.attach_pid
    if args.output is not None:
        return cmd_record(args)
    return cmd_run(args)


def cmd_export(args: argparse.Namespace) -> int:
    from proftui.collectors.formats.export import default_output, write_export

    output = args.output or default_output(args.file, args.format)
    write_export(_load(args.file, args.binary, args), args.format, output, by=args.by)
    if str(output) != "-":
        print(f"proftui: {args.format} export written to {output}", file=sys.stderr)
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from proftui.collectors.formats.diffreport import render_diff_json, render_diff_text
    from proftui.collectors.formats.importers import load_any
    from proftui.collectors.model.diffviews import diff_profiles

    base = load_any(args.base, args.base_binary or args.binary)
    new = load_any(args.new, args.binary)
    diff = diff_profiles(base, new, args.metric)
    options: dict[str, Any] = {
        "files": (source_name(args.base), source_name(args.new)),
        "normalisation": "absolute" if args.absolute else "shares", "by": args.sort,
        "limit": args.limit or None, "paths": args.paths}
    if args.json:
        json.dump(render_diff_json(diff, base, new, **options), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_diff_text(diff, base, new, **options))
    sys.stdout.flush()
    return 0


COMMANDS = {"run": cmd_run, "record": cmd_record, "report": cmd_report,
            "open": cmd_open, "demo": cmd_demo, "attach": cmd_attach,
            "export": cmd_export, "diff": cmd_diff}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `proftui` console script; returns the exit status."""
    name, rest = split_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser(name)
    args = parser.parse_args(rest)
    try:
        return COMMANDS[name](args)
    except ProftuiError as exc:
        print(f"proftui: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("proftui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `proftui report x | head`: the reader went away; that is not an error.
        _stdout_gone()
        return 0


if __name__ == "__main__":
    sys.exit(main())
