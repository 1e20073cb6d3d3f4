"""Spawn the target program: checks, environment, stdio, exit status, cleanup.

The target is sacred: its argv, stdin, stdout, stderr and exit status pass
through untouched (headless), or its output goes to a private log file (TUI,
so it cannot scribble over the screen).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from proftui.collectors.errors import ProftuiError

ELF_MAGIC = b"\x7fELF"


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


def resolve_program(program: str) -> Path:
    """Find `program` like a shell would and check it can be profiled.

    Raises ProftuiError when it is missing, not executable, not an ELF file,
    or setuid/setgid (profiling those is refused: LD_PRELOAD would be ignored
    and the run directory would leak to a privileged process).
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
    if not os.access(path, os.X_OK):
        raise ProftuiError(f"{program}: permission denied (not executable)")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ProftuiError(f"{program}: cannot read: {exc.strerror}") from None
    if magic != ELF_MAGIC:
        kind = "a script" if magic[:2] == b"#!" else "not an ELF executable"
        raise ProftuiError(
            f"{program}: {kind}; proftui profiles compiled programs (run the binary itself)"
        )
    mode = path.stat().st_mode
    if mode & (stat.S_ISUID | stat.S_ISGID):
        raise ProftuiError(f"{program}: is setuid/setgid; proftui refuses to profile it")
    return path.resolve()


class LaunchedProcess:
    """The running target.

    output="inherit" leaves stdio untouched and keeps the target in our
    process group, so Ctrl-C reaches it as usual.  output="log" (TUI) sends
    stdout and stderr to run_dir/target.log, stdin from /dev/null, and puts
    the target in its own session so the terminal's keys go to the app.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        run_dir: Path,
        env: dict[str, str] | None = None,
        preload: Sequence[str] = (),
        output: Literal["inherit", "log"] = "inherit",
    ) -> None:
        if not argv:
            raise ProftuiError("no program given")
        program = resolve_program(argv[0])
        child_env = dict(os.environ)
        child_env.update(env or {})
        child_env["PROFTUI_DIR"] = str(run_dir)
        if preload:
            existing = child_env.get("LD_PRELOAD", "")
            child_env["LD_PRELOAD"] = ":".join([*preload, *([existing] if existing else [])])
        self.output = output
        self.log_path: Path | None = None
        self._lock = threading.Lock()
        self._exit: ExitInfo | None = None
        stdio: dict[str, object] = {}
        log = None
        if output == "log":
            self.log_path = run_dir / "target.log"
            fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            log = os.fdopen(fd, "wb")
            stdio = {"stdin": subprocess.DEVNULL, "stdout": log, "stderr": subprocess.STDOUT}
        try:
            # executable= keeps argv[0] exactly as the user typed it.
            self._popen = subprocess.Popen(
                argv, executable=str(program), env=child_env,
                start_new_session=(output == "log"), **stdio,  # type: ignore[call-overload]
            )
        except OSError as exc:
            raise ProftuiError(f"{argv[0]}: cannot start: {exc.strerror}") from None
        finally:
            if log is not None:
                log.close()
        self.pid = self._popen.pid

    def poll(self) -> ExitInfo | None:
        """The exit information once the target has ended, else None."""
        with self._lock:
            if self._exit is None:
                code = self._popen.poll()
                if code is not None:
                    self._exit = ExitInfo.from_returncode(code)
            return self._exit

    def wait(self, timeout: float | None = None) -> ExitInfo:
        """Wait for the target to end (subprocess.TimeoutExpired on timeout).

        In the main thread, SIGTERM/SIGHUP sent to proftui are forwarded to the
        target, and SIGINT is left to the terminal (it already reached the target
        in "inherit" mode) or forwarded ("log" mode); the target's own reaction
        decides the outcome, as with `time prog`.
        """
        forwarding = threading.current_thread() is threading.main_thread()
        previous: dict[int, object] = {}
        if forwarding:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[sig] = signal.signal(sig, self._forward)
        try:
            code = self._popen.wait(timeout)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)  # type: ignore[arg-type]
        with self._lock:
            self._exit = ExitInfo.from_returncode(code)
            return self._exit

    def _forward(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and self.output == "inherit":
            return  # the terminal sent it to the whole foreground group already
        with contextlib.suppress(ProcessLookupError):
            self.send_signal(signum)

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
