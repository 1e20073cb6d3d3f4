"""The commands without a TUI: record, report, export and diff, and what they print."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proftui.collectors.errors import ProftuiError
from proftui.collectors.wording import count
from proftui.tui.arguments import source_name
from proftui.tui.modes import make_collector

AGENT_GC_THRESHOLDS = (7000, 50, 50)  # gc.set_threshold for `proftui agent` (cmd_agent)

# Each command imports what it uses when it runs (a `record` never loads Textual, the
# exporters or the diff code): the fixed cost of every command stays small.
if TYPE_CHECKING:

    from proftui.collectors.base import Collector
    from proftui.collectors.fleet.pusher import Pusher
    from proftui.collectors.model.profile import Profile
    from proftui.collectors.runtime.launch import StopSignals



def load_profile(path: Path | str, binary: Path | None, args: argparse.Namespace) -> Profile:
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


def run_headless(collector: Collector, stop: StopSignals | None = None,
                 pusher: Pusher | None = None) -> Profile:
    """Start, wait for the end (a stop signal ends the target or detaches), clean up.
    With a `pusher`, intervals go to the fleet's server meanwhile, the last one at the
    end (its notes join the profile's)."""
    try:
        collector.start()
        if pusher is not None:
            pusher.start(collector, program_path(collector))
        if stop is not None and stop.received is not None:
            collector.end(stop.received)  # it came while starting: end at once
        profile = collector.wait()
        if pusher is not None:
            say(f"proftui: {pusher.finish()}")
            profile.meta.warnings.extend(pusher.notes())
        return profile
    finally:
        collector.stop()  # also after a failed start: the run directory goes


@contextlib.contextmanager
def gc_thresholds(thresholds: tuple[int, int, int]) -> Iterator[None]:
    """Python's garbage collector at `thresholds` for the block.  The agent lives long
    and allocates per sample, yet makes little cyclic garbage: at the default
    thresholds the collector ran ~90 times a minute, mostly over the older generations
    of its large heap (0.4-0.5 ms of CPU a second, a tenth of a pushing agent's steady
    cost); at AGENT_GC_THRESHOLDS ~6 times (0.1 ms a second)."""
    previous = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def cmd_agent(args: argparse.Namespace) -> int:
    """`proftui agent`: every process of the host, pushed per process until stopped."""
    from proftui.collectors.agent.collector import AgentCollector
    from proftui.collectors.base import CollectorOptions
    from proftui.collectors.model import storage
    from proftui.collectors.runtime.launch import StopSignals
    from proftui.collectors.safefile import check_output

    if args.push is None and args.output is None:
        raise ProftuiError("proftui agent needs --push URL (or -o FILE to save the profile)")
    if args.output is not None:
        check_output(args.output)
    options = CollectorOptions(frequency_hz=args.frequency, duration_s=args.duration,
                               buffer_bytes=args.buffer)
    collector = AgentCollector([], options, programs=tuple(args.program),
                               users=tuple(args.user), keep_profile=args.output is not None,
                               pushed=args.push is not None, max_stacks=args.max_stacks)
    pusher = make_pusher(args)
    with StopSignals() as stop, gc_thresholds(AGENT_GC_THRESHOLDS):
        profile = run_headless(collector, stop, pusher)
        processes, samples = collector.counted()
        say(f"proftui: agent sampled {processes:,} process{'es' if processes != 1 else ''}, "
            f"{count(samples, 'sample')}")
        if os.environ.get("PROFTUI_AGENT_CPU"):  # benchmarks/bench_agent.py: where CPU goes
            say(f"proftui: agent reader thread CPU {collector.reader_cpu_s:.3f} s")
        for note in profile.meta.warnings:
            say(f"proftui: note: {note}")
        if args.output is not None:
            _written, note = storage.save_or_fallback(profile, args.output)
            say(f"proftui: {note}" if note else f"proftui: agent profile saved to {args.output}")
        failure = collector.failure()
        if failure:  # what it pushed or saved stands; that sampling stopped early is an error
            say(f"proftui: the agent's sampler ended early ({failure})")
            return 1
        signum = collector.signalled() or stop.received
        if signum is not None:  # how an agent is stopped: not a failure
            from proftui.collectors.runtime.launch import signal_name

            say(f"proftui: {signal_name(signum)}: {collector.end(signum)}")
    return 0


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


def program_path(collector: Collector) -> str | None:
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
    shell would: 128+N.  An attached target is not proftui's child: its exit status,
    when ptrace saw it, is in the profile, and proftui's own is 0.
    """
    from proftui.collectors.runtime.launch import signal_name

    signum = collector.signalled() or stop.received
    if signum is None:
        return 0 if collector.mode == "attach" else exit_status_of(profile)
    say(f"proftui: {signal_name(signum)}: {collector.end(signum)}")
    return 128 + signum if collector.mode == "attach" else exit_status_of(profile)


def say(line: str) -> None:
    """One line on stderr; nothing when stderr is gone too (a closed terminal)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def stdout_gone() -> None:
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


def describe_end(collector: Collector) -> str:
    info = collector.exit_info()
    if info is not None:
        return f"target pid {collector.pid} {info.describe()}"
    if collector.mode == "attach":
        return f"detached from pid {collector.pid}, which keeps running"
    return f"target pid {collector.pid} ended"


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
    print_report(load_profile(args.file, args.binary, args), as_json=args.json, limit=args.limit,
                 by=args.by)
    return 0


def base_name(base: Path | str | None) -> str:
    if base is None:
        return ""
    return source_name(base) if isinstance(base, str) else base.name


def cmd_export(args: argparse.Namespace) -> int:
    from proftui.collectors.formats.export import default_output, write_export

    output = args.output or default_output(args.file, args.format)
    write_export(load_profile(args.file, args.binary, args), args.format, output, by=args.by)
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
