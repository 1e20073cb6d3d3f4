"""The launch sequence of the LD_PRELOAD collectors (sampler, heap, and both at once).

One place for what every preloaded run does: refuse a static binary in one line,
put one or more runtime libraries into LD_PRELOAD with their environment, read
the per-run directory on a poll thread until the target ends (then once more),
and wait a moment for a runtime file that is still being created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from proftui.collectors.detect import BinaryFacts, inspect_binary, refuse_foreign
from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.launch import (
    LaunchedProcess,
    resolve_program,
    script_interpreter,
)
from proftui.collectors.runtime.libraries import runtime_library_path

YOUNG_FILE_S = 2.0  # a runtime file this new may still lack its header (being created)


@dataclass
class Preload:
    """One runtime to preload: its library name, its environment, and for a static
    binary what it is called and what to use instead."""

    library: str  # e.g. "proftui_sampler" (runtime/native)
    what: str  # "the sampler", "the heap profiler"
    static_hint: str  # what works on a static binary instead
    env: dict[str, str] = field(default_factory=dict)


def check_preloadable(program: str, what: str, static_hint: str,
                      follow: bool) -> tuple[Path | None, BinaryFacts]:
    """ProftuiError in one line unless `what` (the runtimes, "the sampler") can be
    preloaded into `program` (or, with `follow`, the interpreter of a `#!` script): not
    a program of another ELF kind, not statically linked (`static_hint`: what to use
    instead).  (The script's interpreter or None, the facts of what gets the preload.)"""
    path = resolve_program(program, scripts=follow)
    interpreter = script_interpreter(path) if follow else None
    facts = inspect_binary(interpreter or path)
    refuse_foreign(str(interpreter) if interpreter else program, facts, what)
    if facts.static and interpreter is None:
        raise ProftuiError(f"{program} is statically linked, so {what} cannot be preloaded "
                           f"into it; {static_hint}")
    return interpreter, facts


def launch_preloaded(argv: Sequence[str], *, run_dir: Path, preloads: Sequence[Preload],
                     output: Literal["inherit", "log"], follow: bool = False) -> LaunchedProcess:
    """Start `argv` with every runtime of `preloads` in LD_PRELOAD (in that order) and
    their environments merged; ProftuiError in one line when it cannot be.

    With `follow` (the runtimes follow fork and exec), a `#!` script is run too, as
    perf does: its interpreter is profiled, and every program it runs inherits the
    preload.  A static interpreter cannot take the preload (the programs it runs
    still do): said in the run's notes (`LaunchedProcess.env_warnings`)."""
    if not argv:
        raise ProftuiError("no program given")
    what = " and ".join(p.what for p in preloads)
    interpreter, facts = check_preloadable(argv[0], what, preloads[0].static_hint, follow)
    env: dict[str, str] = {}
    for p in preloads:
        env.update(p.env)
    libraries = [runtime_library_path(p.library) for p in preloads]
    process = LaunchedProcess(list(argv), run_dir=run_dir, env=env, preload=libraries,
                              output=output, scripts=follow)
    if interpreter is not None and facts.static:
        process.env_warnings.append(
            f"{argv[0]} runs under {interpreter}, which is statically linked: {what} could not "
            "be preloaded into it (it is not profiled); the programs it runs are")
    return process


class PollThread:
    """Calls `poll` every `interval_s` until the target ends, then once more, on a
    daemon thread.  A ProftuiError from `poll` goes to `on_error` and polling goes
    on; `end_time` is when the last poll was done (None until then)."""

    def __init__(self, name: str, poll: Callable[[], None], ended: Callable[[], bool],
                 on_error: Callable[[str], None], interval_s: float) -> None:
        self._poll = poll
        self._ended = ended
        self._on_error = on_error
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()  # the next poll now, not after the interval
        self.end_time: float | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            exited = self._ended()
            try:
                self._poll()
            except ProftuiError as exc:
                self._on_error(str(exc))
            if exited:
                break
            self._wake.wait(self._interval_s)
            self._wake.clear()
        if self.end_time is None:
            self.end_time = time.time()

    def wake(self) -> None:
        """Poll now (the target has ended: its last round need not wait the interval)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop polling (after the poll under way) and wait for the thread."""
        self._stop.set()
        self._wake.set()
        self.join()

    def join(self) -> None:
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join()


def file_too_young(path: Path, process: LaunchedProcess | None) -> bool:
    """A runtime file that failed to open: True while it may still be being created
    (the target runs and the file is under YOUNG_FILE_S old), so the caller tries
    again at the next poll; False when it is as complete as it will get.  A file
    that vanished counts as young (nothing to report about it)."""
    try:
        young = time.time() - path.stat().st_mtime <= YOUNG_FILE_S
    except OSError:
        return True
    return process is None or (process.poll() is None and young)
