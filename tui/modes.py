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

    from proftui.collectors.base import Collector
    from proftui.collectors.detect import BinaryFacts



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
