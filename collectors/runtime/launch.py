"""Spawn the target program: checks, environment, stdio, exit status, signals, cleanup.

The target is sacred: its argv, stdin, stdout, stderr and exit status pass
through untouched (headless), or its output goes to a bounded in-memory log
(TUI, so it cannot scribble over the screen; runtime/output.py).

SIGTERM and SIGHUP to proftui end the target as a shell would: the signal is
passed on, and a target still running GRACE_S later gets SIGKILL, so that
proftui never waits forever and never leaves a profiled orphan behind
(docs/lifecycle.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from proftui.collectors.errors import ProftuiError
from proftui.collectors.runtime.output import OutputLog

ELF_MAGIC = b"\x7fELF"
GRACE_S = 3.0  # a target still running this long after SIGTERM/SIGHUP gets SIGKILL
# --buffer's range (tui/cli.py _megabytes), also applied to a PROFTUI_BUFFER_BYTES
# proftui inherits from its own environment.
BUFFER_MIN_BYTES = 1 << 16
BUFFER_MAX_BYTES = 65536 << 20
OUTPUT_SETTLE_S = 1.0  # after the target's end, wait this long for the rest of its output


@dataclass(frozen=True)
class ExitInfo:
    """How the target ended: an exit status, or the signal that killed it."""

    status: int | None
    signal: int | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitInfo:
        if returncode < 0:
            return cls(None, -returncode)
        return cls(returncode, None)

    def shell_status(self) -> int:
        """The status a shell would report: the exit code, or 128 + signal."""
        return shell_status(self.status, self.signal)

    def describe(self) -> str:
        return describe_exit(self.status, self.signal)


def shell_status(status: int | None, signal_number: int | None) -> int:
    """The status a shell reports for a child: its exit code, or 128 + the killing signal."""
    if signal_number is not None:
        return 128 + signal_number
    return status or 0


def describe_exit(status: int | None, signal_number: int | None,
                  unknown: str = "exited (status not visible to proftui)") -> str:
    """How the target ended, in the words of the CLI, the TUI header and the text report:
    "exited with status 7", "killed by signal 9 (SIGKILL)", or `unknown`."""
    if signal_number is not None:
        try:
            name = signal.Signals(signal_number).name
        except ValueError:
            name = f"signal {signal_number}"
        return f"killed by signal {signal_number} ({name})"
    if status is None:
        return unknown
    return f"exited with status {status}"


def inherited_buffer(value: str) -> tuple[str | None, str]:
    """A PROFTUI_BUFFER_BYTES found in proftui's own environment (not from --buffer),
    held to --buffer's range: (the value to pass on, None to drop it; a one-line
    warning, "" when it is fine).  Uncapped, 10^14 made the sampler back 19 GB rings
    per thread, stalling the target while proftui read gigabytes."""
    text = value.strip()
    if not text.isdigit():
        return None, (f"PROFTUI_BUFFER_BYTES={value[:40]!r} in the environment is not a number "
                      "of bytes: ignored (the runtime's default budget is used)")
    asked = int(text)
    capped = min(max(asked, BUFFER_MIN_BYTES), BUFFER_MAX_BYTES)
    if capped == asked:
        return text, ""
    return str(capped), (f"PROFTUI_BUFFER_BYTES={text[:24]} in the environment is outside "
                         f"--buffer's range ({BUFFER_MIN_BYTES >> 10} KiB to "
                         f"{BUFFER_MAX_BYTES >> 30} GiB): {capped:,} bytes used")


SCRIPT_HINT = ("run the binary itself, or add --follow to profile the script's "
               "interpreter and every program it runs")


def resolve_program(program: str, *, scripts: bool = False) -> Path:
    """Find `program` like a shell would and check it can be profiled.

    Raises ProftuiError when it is missing, not executable, not an ELF file (a `#!`
    script is accepted when `scripts`: the kernel runs its interpreter, see
    `script_interpreter`), or setuid/setgid (profiling those is refused: LD_PRELOAD
    would be ignored and the run directory would leak to a privileged process).
    """
    if "/" in program:
        path = Path(program)
        if not path.exists():
            raise ProftuiError(f"{program}: no such file")
    else:
        found = shutil.which(program)
        if found is None:
            raise ProftuiError(f"{program}: command not found")
        path = Path(found)
    if path.is_dir():
        raise ProftuiError(f"{program}: is a directory")
    if not path.is_file():  # a FIFO or a device: reading its magic below could block forever
        raise ProftuiError(f"{program}: not a regular file")
    if not os.access(path, os.X_OK):
        raise ProftuiError(f"{program}: permission denied (not executable)")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ProftuiError(f"{program}: cannot read: {exc.strerror}") from None
    if magic[:2] == b"#!" and not scripts:
        raise ProftuiError(f"{program}: a script; proftui profiles compiled programs "
                           f"({SCRIPT_HINT})")
    if magic != ELF_MAGIC and magic[:2] != b"#!":
        raise ProftuiError(
            f"{program}: not an ELF executable; proftui profiles compiled programs "
            "(run the binary itself)")
    mode = path.stat().st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise ProftuiError(f"{program}: is setuid/setgid; proftui refuses to profile it")
    return path.resolve()


SHEBANG_MAX = 256  # bytes of a #! line the kernel reads (BINPRM_BUF_SIZE)


def script_interpreter(path: Path) -> Path | None:
    """The program the kernel runs for the `#!` script `path` (`/usr/bin/env NAME`:
    NAME found on PATH, as env will), or None when `path` is not a script.
    ProftuiError when the interpreter cannot be found (the kernel would refuse too)."""
    try:
        with path.open("rb") as f:
            head = f.read(SHEBANG_MAX)
    except OSError as exc:
        raise ProftuiError(f"{path}: cannot read: {exc.strerror}") from None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
    words = line.split()
    if not words:
        raise ProftuiError(f"{path}: a script with no interpreter on its #! line")
    interpreter = words[0]
    if Path(interpreter).name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = shutil.which(names[0]) if names else None
        if found is None:
            raise ProftuiError(f"{path}: its #! line runs {line.strip()!r}, and "
                               "that program is not on PATH")
        return Path(found).resolve()
    if not Path(interpreter).is_file():
        raise ProftuiError(f"{path}: its interpreter {interpreter} does not exist")
    return Path(interpreter).resolve()


def signal_name(signum: int) -> str:
    """"SIGTERM" for 15; "signal 99" for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def stop_signals(interrupt: bool = False) -> tuple[int, ...]:
    """The signals that end a run early: SIGTERM, SIGHUP (and SIGINT when `interrupt`),
    minus those proftui was started ignoring (`nohup proftui ...` keeps running when
    the terminal goes; a background job of a script ignores SIGINT)."""
    wanted = (signal.SIGTERM, signal.SIGHUP, *((signal.SIGINT,) if interrupt else ()))
    return tuple(s for s in wanted if signal.getsignal(s) is not signal.SIG_IGN)


def _ignore_late(_signum: int, _frame: object) -> None:
    """A stop signal after the first one was handled (StopSignals.__exit__)."""


class StopSignals:
    """Catch SIGTERM/SIGHUP (SIGINT) for a whole command (main thread only): remember the
    first, and call the registered callback from the handler.

    proftui must not die halfway through saving a profile, restoring the
    terminal or detaching; while it waits for a launched target,
    `LaunchedProcess.wait` takes the signals over (it passes them on) and gives
    them back.  The callback runs in the main thread between two bytecodes, so
    it must only schedule work (the TUI uses loop.call_soon_threadsafe).
    """

    def __init__(self, interrupt: bool = False) -> None:
        """`interrupt`: SIGINT too (the TUI: its terminal sends no SIGINT, `kill -INT` does)."""
        self.interrupt = interrupt
        self.received: int | None = None
        self._listeners: list[Callable[[int], None]] = []
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        for sig in stop_signals(self.interrupt):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            # After a stop signal proftui is on its way to exit 128+N: a second one (a
            # closed terminal signals the whole group, a wrapper passes its own on) must
            # not kill it first.  A handler, not SIG_IGN: exec resets it.
            signal.signal(sig, _ignore_late if self.received is not None  # type: ignore[arg-type]
                          else handler)
        self._previous.clear()

    def note(self, signum: int) -> None:
        """Record `signum` as received (the first one counts)."""
        if self.received is None:
            self.received = signum

    def listen(self, callback: Callable[[int], None]) -> None:
        """Call callback(signum) on each later signal, and at once if one already came."""
        self._listeners.append(callback)
        if self.received is not None:
            callback(self.received)

    def unlisten(self, callback: Callable[[int], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _handle(self, signum: int, _frame: object) -> None:
        self.note(signum)
        for callback in list(self._listeners):
            callback(signum)


class LaunchedProcess:
    """The running target.

    output="inherit" leaves stdio untouched and keeps the target in our
    process group, so Ctrl-C reaches it as usual.  output="log" (TUI) gives
    stdout and stderr a pseudo-terminal of their own, drained into a bounded
    in-memory log (`output_log`: the first MiB and the last MiBs exactly, the
    bytes between counted), stdin from /dev/null, and puts the target in its
    own session so the terminal's keys go to the app.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        run_dir: Path,
        env: dict[str, str] | None = None,
        preload: Sequence[str] = (),
        output: Literal["inherit", "log"] = "inherit",
        scripts: bool = False,
    ) -> None:
        if not argv:
            raise ProftuiError("no program given")
        program = resolve_program(argv[0], scripts=scripts)
        child_env = dict(os.environ)
        self.env_warnings: list[str] = []  # about PROFTUI_* proftui inherited (for the notes)
        if "PROFTUI_BUFFER_BYTES" in child_env and "PROFTUI_BUFFER_BYTES" not in (env or {}):
            kept, warning = inherited_buffer(child_env.pop("PROFTUI_BUFFER_BYTES"))
            if kept is not None:
                child_env["PROFTUI_BUFFER_BYTES"] = kept
            if warning:
                self.env_warnings.append(warning)
        child_env.update(env or {})
        child_env["PROFTUI_DIR"] = str(run_dir)
        if preload:
            existing = child_env.get("LD_PRELOAD", "")
            child_env["LD_PRELOAD"] = ":".join([*preload, *([existing] if existing else [])])
        self.output = output
        self.output_log: OutputLog | None = None
        self.stop_signal: int | None = None  # the SIGTERM/SIGHUP that ended the run early
        self.killed_after_s: float | None = None  # set when the grace ran out: SIGKILL sent
        self._lock = threading.Lock()
        self._exit: ExitInfo | None = None
        # CPU seconds (user + system) of the target and the children it waited for, from
        # its rusage once reaped; None while it runs or when another reaper took it.
        self.cpu_s: float | None = None
        self._grace_timer: threading.Timer | None = None
        stdio: dict[str, object] = {}
        if output == "log":
            self.output_log = OutputLog()
            stdio = {"stdin": subprocess.DEVNULL, "stdout": self.output_log.write_fd,
                     "stderr": subprocess.STDOUT}
        try:
            # executable= keeps argv[0] exactly as the user typed it.
            self._popen = subprocess.Popen(
                argv, executable=str(program), env=child_env,
                start_new_session=(output == "log"), **stdio,  # type: ignore[call-overload]
            )
        except OSError as exc:
            if self.output_log is not None:
                self.output_log.close()
            raise ProftuiError(f"{argv[0]}: cannot start: {exc.strerror}") from None
        if self.output_log is not None:
            self.output_log.start()
        self.pid = self._popen.pid

    # -- the target's output: test seams (the TUI reads `output_log` itself) ----------

    def output_head(self) -> bytes:
        """The first MiB the target wrote (stdout and stderr interleaved; log mode)."""
        return self.output_log.head() if self.output_log is not None else b""

    def output_tail(self, n_bytes: int) -> bytes:
        """The last `n_bytes` it wrote after the head (fewer if not kept; log mode)."""
        return self.output_log.tail(n_bytes) if self.output_log is not None else b""

    def output_text(self) -> str:
        """Everything kept, decoded leniently, a marker where bytes were dropped (log mode)."""
        return self.output_log.text() if self.output_log is not None else ""

    @property
    def output_dropped(self) -> int:
        """Bytes of output between the kept head and tail, counted but not kept."""
        return self.output_log.dropped_bytes if self.output_log is not None else 0

    def close(self) -> None:
        """Stop collecting output (the target is gone or is being abandoned)."""
        if self.output_log is not None:
            self.output_log.close()

    # -- lifecycle -------------------------------------------------------------------

    def poll(self) -> ExitInfo | None:
        """The exit information once the target has ended, else None."""
        with self._lock:
            if self._exit is None:
                code = self._reap(os.WNOHANG)
                if code is not None:
                    self._exit = ExitInfo.from_returncode(code)
            return self._exit

    def _reap(self, options: int) -> int | None:
        """Reap the target with wait4 (keeping its rusage in cpu_s): its return code as
        Popen gives it, or None while it runs (WNOHANG).  Caller holds _lock."""
        if self._popen.returncode is not None:
            return self._popen.returncode
        try:
            pid, status, usage = os.wait4(self.pid, options)
        except ChildProcessError:  # reaped elsewhere: Popen knows or learns the code
            return self._popen.poll()
        if pid == 0:
            return None
        self.cpu_s = usage.ru_utime + usage.ru_stime
        self._popen.returncode = os.waitstatus_to_exitcode(status)
        return self._popen.returncode

    def wait(self, timeout: float | None = None) -> ExitInfo:
        """Wait for the target to end (subprocess.TimeoutExpired on timeout).

        In the main thread, SIGTERM/SIGHUP sent to proftui are forwarded to the
        target, and SIGINT is left to the terminal (it already reached the target
        in "inherit" mode) or forwarded ("log" mode); the target's own reaction
        decides the outcome, as with `time prog`, except that a target still
        running GRACE_S after SIGTERM/SIGHUP gets SIGKILL (from a timer thread).
        """
        forwarding = threading.current_thread() is threading.main_thread()
        previous: dict[int, object] = {}
        if forwarding:
            for sig in (signal.SIGINT, *stop_signals()):
                previous[sig] = signal.signal(sig, self._forward)
        try:
            code = self._wait_reaping(timeout)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)  # type: ignore[arg-type]
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        if self.output_log is not None:
            self.output_log.settle(OUTPUT_SETTLE_S)  # its last words are still to be read
        with self._lock:
            self._exit = ExitInfo.from_returncode(code)
            return self._exit

    def _wait_reaping(self, timeout: float | None) -> int:
        """Block until the target ends (subprocess.TimeoutExpired after `timeout` s).

        Every reap happens under _lock (poll() may run in another thread meanwhile): the
        blocking wait only waits for the end (waitid WNOWAIT), then reaps under the lock."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                with contextlib.suppress(ChildProcessError):
                    os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            with self._lock:
                code = self._reap(os.WNOHANG)
            if code is not None:
                return code
            if deadline is not None:
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(self._popen.args, timeout or 0.0)
                time.sleep(0.01)

    def _forward(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and self.output == "inherit":
            return  # the terminal sent it to the whole foreground group already
        with contextlib.suppress(ProcessLookupError):
            self.send_signal(signum)
        if signum != signal.SIGINT and self._grace_timer is None:
            self.stop_signal = signum
            # A timer thread, not an alarm: the main thread stays in waitpid().
            self._grace_timer = threading.Timer(GRACE_S, self._grace_over)
            self._grace_timer.daemon = True
            self._grace_timer.start()

    def _grace_over(self) -> None:
        if self.poll() is None:
            self.killed_after_s = GRACE_S
            with contextlib.suppress(ProcessLookupError):
                self.send_signal(signal.SIGKILL)

    def terminate(self, signum: int, grace_s: float = GRACE_S) -> ExitInfo:
        """End the target as a shell would on `signum` (SIGTERM, SIGHUP): pass it on,
        then SIGKILL if it still runs `grace_s` later.  Returns how it ended."""
        self.stop_signal = self.stop_signal or signum
        self._signal_job(signum)
        if signum == signal.SIGHUP:
            self._signal_job(signal.SIGCONT)  # a stopped job must wake to see it
        deadline = time.monotonic() + grace_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.poll() is None:
            self.killed_after_s = grace_s
            with contextlib.suppress(ProcessLookupError):
                self.send_signal(signal.SIGKILL)
        return self.wait()

    def _signal_job(self, sig: int) -> None:
        """`sig` to the target, and in log mode to its whole process group even when the
        target itself is gone (a shell signals the job; the kernel never reuses a pid
        that still names a group, so the group id stays safe to use)."""
        if self.output == "log":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
        elif self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(sig)

    def describe_end(self) -> str:
        """One line on how the target ended after a stop signal, for proftui's stderr."""
        info = self.poll()
        what = info.describe() if info is not None else "still running"
        if self.killed_after_s is not None and self.stop_signal is not None and (
                info is not None and info.signal == signal.SIGKILL):
            what = (f"ignored {signal_name(self.stop_signal)} for {self.killed_after_s:g} s "
                    f"and was {what}")
        return f"target pid {self.pid} {what}"

    def send_signal(self, sig: int) -> None:
        """Send `sig` to the target (its whole group when it has its own session)."""
        if self.poll() is not None:
            return
        if self.output == "log":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
        else:
            self._popen.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL the target and reap it."""
        with contextlib.suppress(ProcessLookupError):
            self.send_signal(signal.SIGKILL)
        self.wait()
