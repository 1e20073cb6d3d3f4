"""The `proftui` command line: parse, pick a collector, run the TUI or a headless report.

Subcommand words count only as the first argument, so `proftui ./record`
profiles a program called record and `proftui -- record` does the same for a
program on PATH.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.tui.arguments import build_parser, source_name, split_command
from proftui.tui.headless import (
    base_name,
    cmd_agent,
    cmd_diff,
    cmd_export,
    cmd_record,
    cmd_report,
    describe_end,
    exit_status_of,
    finish_headless,
    load_profile,
    make_pusher,
    print_report,
    program_path,
    run_headless,
    say,
    stdout_gone,
)
from proftui.tui.modes import make_collector

# Each command imports what it uses when it runs (a `record` never loads Textual, the
# exporters or the diff code): the fixed cost of every command stays small.
if TYPE_CHECKING:
    from proftui.collectors.base import Collector
    from proftui.collectors.fleet.pusher import Pusher
    from proftui.collectors.fleet.query import FleetQuery
    from proftui.collectors.model.profile import Profile
    from proftui.collectors.runtime.launch import ExitInfo


def wants_tui(args: argparse.Namespace) -> bool:
    return not (getattr(args, "text", False) or getattr(args, "json", False)) and (
        sys.stdout.isatty() and sys.stdin.isatty())


def run_tui(collector: Collector | None = None, profile: Profile | None = None,
            base: Profile | None = None, base_name: str = "", source: str = "",
            pusher: Pusher | None = None,
            fleet: FleetQuery | None = None) -> int:
    """The app on a live collector or a saved profile; the status to exit with.

    SIGTERM/SIGHUP/SIGINT make the app exit through its normal path (the terminal is
    restored), then end the target as a shell would (or detach), and proftui
    exits 128+N with one line on what became of the target.
    """
    from proftui.collectors.runtime.launch import StopSignals, signal_name
    from proftui.tui.app import ProfTuiApp  # Textual loads only when a TUI is wanted
    from proftui.tui.input_driver import quick_escape
    from proftui.tui.terminal import StuckExit, end_threads

    quick_escape(os.environ)

    with StopSignals(interrupt=True) as stop:
        if collector is not None:
            # Start before the app takes the screen, so a failure is a one-line error.
            try:
                collector.start()
                if pusher is not None:
                    pusher.start(collector, program_path(collector))
            except BaseException:
                collector.stop()
                raise
        app = ProfTuiApp(collector=collector, profile=profile, stop_signals=stop, base=base,
                         base_name=base_name or "base", source=source, fleet=fleet)
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
            return end_threads(128 + stop.received)
    if collector is not None and ended is not None:
        say_failed_output(collector, ended)
    return end_threads(tui_exit_status(app.final_profile(), ended, collector is not None))


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
            stdout_gone()
            say("proftui: report not written: standard output was closed (broken pipe); "
                + describe_end(collector))
    return status


def cmd_open(args: argparse.Namespace) -> int:
    from proftui.collectors.formats.importers import load_any

    fleet = None
    if isinstance(args.file, str):  # a fleet query: `r` runs it again, `t` `g` another way
        from proftui.collectors.fleet.query import FleetQuery as Query
        from proftui.collectors.fleet.url import parse

        fleet = Query(parse(args.file))
    if fleet is not None and getattr(args, "range_from", None) is None and \
            getattr(args, "range_to", None) is None:
        profile = fleet.load()  # its answer kept: `g` regroups it without a query
    else:
        profile = load_profile(args.file, args.binary, args)

    base = None
    if args.base is not None:
        try:
            base = load_any(args.base, args.binary)
        except ProftuiError as exc:
            raise ProftuiError(f"--base: {exc}", exc.exit_status) from exc
    if sys.stdout.isatty() and sys.stdin.isatty():
        return run_tui(profile=profile, base=base, base_name=base_name(args.base),
                       source=source_name(args.file) if fleet is not None else "",
                       fleet=fleet)
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


COMMANDS = {"run": cmd_run, "record": cmd_record, "report": cmd_report,
            "open": cmd_open, "demo": cmd_demo, "attach": cmd_attach, "agent": cmd_agent,
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
        stdout_gone()
        return 0


if __name__ == "__main__":
    sys.exit(main())
