"""Which collector a command line asks for: the program checked, the mode chosen
(detected from the binary unless --mode says), and the refusals of what cannot be done."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.tui.arguments import options_from

# Each command imports what it uses when it runs (a `record` never loads Textual, the
# exporters or the diff code): the fixed cost of every command stays small.
if TYPE_CHECKING:

    from proftui.collectors.base import Collector, CollectorOptions



# The command-line flag of each CollectorOptions field a mode may or may not honour
# (Collector.options_honoured): one that is set for a mode that ignores it is refused.
OPTION_FLAGS = {"frequency_hz": "-F", "count_only": "--count-only", "timed": "--timed",
                "include": "-I", "exclude": "-N", "max_depth": "-D", "buffer_bytes": "--buffer",
                "wall_clock": "--wall", "follow_children": "--follow",
                "duration_s": "--duration", "method": "--method",
                "heap_sample_bytes": "--heap-sample"}


def make_collector(args: argparse.Namespace, output: str) -> Collector:
    """Check the program, choose the mode, and build (not start) its collector: the
    mode's own refusals (`Collector.refuse`) and the options it does not honour are one
    line before anything starts."""
    from proftui.collectors.detect import inspect_binary
    from proftui.collectors.registry import COLLECTORS
    from proftui.collectors.runtime.launch import resolve_program, script_interpreter

    options = options_from(args, output)
    heap = getattr(args, "heap", False)
    if getattr(args, "all", False):
        return _every_process(args, options)
    if args.pid is not None:
        if args.program is not None:
            raise ProftuiError("give either a program to run or --pid, not both")
        if heap:
            raise ProftuiError("--heap adds heap tracking to sampler runs only; attach mode "
                               "cannot track a running process's heap")
        attach = COLLECTORS["attach"]
        _refuse_options(attach, options)
        return attach([], options)
    if args.program is None:
        raise ProftuiError("no program given (see proftui --help)")
    program = resolve_program(args.program, scripts=args.follow)
    interpreter = script_interpreter(program)
    facts = inspect_binary(program) if interpreter is None else None
    mode = args.mode or (facts.mode if facts is not None else "sampler")
    if heap and mode != "sampler":  # the one mode --heap can be added to
        raise ProftuiError(
            f"--heap adds heap tracking to sampler runs only, not to {mode} mode "
            "(use --mode sampler --heap, or --mode heap for the heap alone)")
    if interpreter is not None and mode not in ("sampler", "heap"):
        raise ProftuiError(  # --follow ./script: the interpreter and what it runs, preloaded
            f"{args.program} is a script (run by {interpreter}): --follow runs scripts in "
            f"sampler or heap mode, not {mode} mode; run the -pg or -finstrument-functions "
            "program itself")
    chosen = COLLECTORS["sampler+heap" if heap else mode]
    _refuse_options(chosen, options)
    chosen.refuse(args.program, options)
    return chosen([args.program, *args.args], options)


def _every_process(args: argparse.Namespace, options: CollectorOptions) -> Collector:
    """`proftui --all`: the agent's collector, live, every process kept together."""
    from proftui.collectors.agent.collector import AgentCollector
    from proftui.tui.arguments import AGENT_HZ

    if args.program is not None or args.pid is not None:
        raise ProftuiError("--all samples every process: give no program and no --pid")
    if args.mode is not None or _heap_asked(args):
        raise ProftuiError("--all samples CPU time only (no --mode, no --heap)")
    if not args.frequency:
        options.frequency_hz = AGENT_HZ
    _refuse_options(AgentCollector, options)
    return AgentCollector([], options, keep_profile=True,
                          pushed=getattr(args, "push", None) is not None)


def _heap_asked(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "heap", False) or getattr(args, "heap_sample", None))


def _refuse_options(chosen: type[Collector], options: CollectorOptions) -> None:
    """ProftuiError naming the first option set that `chosen`'s mode does not honour."""
    defaults = type(options)(output=options.output)
    for name, flag in OPTION_FLAGS.items():
        if getattr(options, name) != getattr(defaults, name) and \
                name not in chosen.options_honoured:
            raise ProftuiError(f"{flag} does not apply to {chosen.mode} mode (proftui --help "
                               "says which modes each option serves)")
