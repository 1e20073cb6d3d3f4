"""Keys on a big saved profile, timed in a real terminal: from the key press until the
screen shows the change (issue 33).

`proftui open BIG.proftui` runs in a detached tmux session (160x50); this script
is a tmux control-mode client: it sends each key with `send-keys` and polls
`capture-pane -e` (colours included, so a moved cursor is a change) every
millisecond or so until the screen shows what the key does: it differs from the
screen before the key, holds the text the key must bring (the focused tree's
"and what it calls", "match 2 of", the range's total...) and none of the
placeholders ("computing…", "loading…").  That is the user's latency, drawing
and the terminal included; benchmarks/bench_tui.py times the same keys inside
the process, which hides the rendering.  After each key the screen must stay
still for SETTLE_S before the next one; a key whose screen still moved after its
"done" moment is timed to its last change too (column "last").

Every key of the README's table is pressed: 1-6, the flat profile's cursor, `s`,
`/` and typing, Enter (focus, each time a function not focused before: "first
focus"), Esc; the call tree's cursor, `h`, space, `u` (the first of a session:
"first u", then again), `f`, `T`, `/` + Enter, `n`, `N`, `%`; `t`, `m`; the flame
graph's moves, zoom (Enter) and out (Esc) and its search; the timeline's range
(Enter, arrows, Enter: every pane shows the range; Esc: the whole run again).
The first screen of `proftui open` is timed from the session's start until the
flat profile's rows are drawn.

Profiles (issue 33: ~200,000 tree nodes):
  recorded   `proftui record -F 10000` of benchmarks/programs/many_paths.c (-r ROUNDS,
             about 225,000 nodes; 26 functions), cached in build/bench/
  synthetic  bench_tui.synthetic_profile (50,000 functions, 200,000 nodes), saved with
             collectors/model/storage.py (no timeline)
Anchor: a tiny profile (the same recording, many_paths -r 5), same keys, same run.

Goal: p95 <= 100 ms for every key, first focus and first `u` included.

usage: python benchmarks/bench_keys.py [--profiles recorded,synthetic] [--sessions 3]
                                       [--repeat 10] [--fresh] [--no-anchor]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PROFTUI = str(Path(sys.executable).with_name("proftui"))
CACHE = ROOT / "build" / "bench"
SETTLE_S = 0.25  # the screen unchanged this long: the key's work is over
POLL_S = 0.004  # between captures: each costs the tmux server ~0.3 ms of CPU
TIMEOUT_S = 60.0
CHANGE_TIMEOUT_S = 15.0  # a key expected only to change the screen, when it did not
GOAL_MS = 100.0
PLACEHOLDERS = ("computing", "loading the profile")  # never a key's final screen
ANSI = re.compile(r"\x1b\[[0-9;:?]*[A-Za-z]")


class Tmux:
    """One detached tmux session running `argv`, driven through a control-mode client
    (one process: a capture costs ~0.3 ms instead of a fork and exec)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name = f"bench-keys-{uuid.uuid4().hex[:8]}"
        # A server of its own (-L): a new session on the shared server can race the
        # previous session's server as it exits ("server exited unexpectedly").
        self.tmux = ["tmux", "-L", self.name]
        shell = "unset COLUMNS LINES; exec " + " ".join(_quote(a) for a in argv)
        extra = [arg for k, v in env.items() for arg in ("-e", f"{k}={v}")]
        self.started = time.perf_counter()
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", "160", "-y", "50",
                        "-c", str(cwd), "-e", "TERM=xterm-256color", *extra, shell], check=True)
        self.client = subprocess.Popen(
            [*self.tmux, "-C", "attach-session", "-t", self.name, "-f", "no-output,ignore-size"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.command("display -p ok")  # the attach's own reply block comes first

    def command(self, text: str) -> str:
        """Run one tmux command; its output."""
        assert self.client.stdin is not None and self.client.stdout is not None
        self.client.stdin.write(text + "\n")
        self.client.stdin.flush()
        lines: list[str] = []
        inside = False
        while True:
            line = self.client.stdout.readline()
            if not line:
                raise SystemExit(f"bench: tmux control client ended (session {self.name})")
            if line.startswith("%begin"):
                inside, lines = True, []
            elif line.startswith(("%end", "%error")) and inside:
                if line.startswith("%error"):
                    raise SystemExit(f"bench: tmux {text!r}: {''.join(lines)}")
                if text.startswith("display -p ok") and lines != ["ok\n"]:
                    inside = False  # the attach's block: wait for ours
                    continue
                return "".join(lines)
            elif inside:
                lines.append(line)

    def screen(self) -> str:
        """The screen with its colours (SGR sequences): a moved cursor is a change."""
        return self.command(f"capture-pane -p -e -t {self.name}")

    def send(self, key: str) -> None:
        self.command(f"send-keys -t {self.name} {_quote(key)}")

    def close(self) -> None:
        try:
            if self.client.stdin is not None:
                self.client.stdin.close()
            self.client.wait(timeout=5)
        finally:
            subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def text_of(screen: str) -> str:
    return ANSI.sub("", screen)


@dataclass
class Timings:
    """Per key: ms to the expected screen, and ms to the screen's last change."""

    done: dict[str, list[float]] = field(default_factory=dict)
    last: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, done: float, last: float) -> None:
        self.done.setdefault(name, []).append(done)
        self.last.setdefault(name, []).append(last)


class Session:
    """`proftui open PROFILE` in tmux; `press` times one key to its screen."""

    def __init__(self, profile: Path, work: Path, timings: Timings) -> None:
        env = {"XDG_CONFIG_HOME": str(work / "config")}  # no remembered settings
        self.term = Tmux([PROFTUI, "open", str(profile)], work, env)
        self.timings = timings
        self.toast: str | None = None  # a notification that may vanish mid-measurement
        started = self.term.started
        self.wait(lambda s: "functions · sorted by" in s and "Self%" in s)
        now = time.perf_counter()
        self.settle()
        timings.add("first screen (open)", 1000 * (now - started),
                    1000 * (self.last_change - started))

    def wait(self, ready: Callable[[str], bool], timeout: float = TIMEOUT_S) -> str:
        deadline = time.perf_counter() + timeout
        while True:
            raw = self.term.screen()
            text = text_of(raw)
            if ready(text) and not any(p in text for p in PLACEHOLDERS):
                return raw
            if time.perf_counter() > deadline:
                raise SystemExit(f"bench: the screen never got ready:\n{text}")
            time.sleep(POLL_S)

    def settle(self) -> str:
        """Wait until the screen stays still SETTLE_S; `last_change` is when it last moved."""
        raw = self.term.screen()
        self.last_change = time.perf_counter()
        while time.perf_counter() - self.last_change < SETTLE_S:
            time.sleep(POLL_S)
            now = self.term.screen()
            if now != raw:
                raw, self.last_change = now, time.perf_counter()
        return raw

    def clear_toast(self) -> None:
        """Wait until a notification shown earlier is gone (its vanishing is a change)."""
        if self.toast is not None:
            toast, self.toast = self.toast, None
            self.wait(lambda s: toast not in s, timeout=30)
            self.settle()

    def press(self, key: str, name: str | None, expect: Callable[[str], bool] | None = None,
              changes: bool = True, toast: str | None = None) -> str:
        """Send `key`; once the screen differs (if `changes`), `expect` holds and no
        placeholder shows, record the time under `name` (None: not timed).  The text
        of the screen after it settled."""
        self.clear_toast()
        if name is None and expect is None:
            changes = False  # a move on the way to a timed key: whatever it does
        before = self.term.screen()
        start = time.perf_counter()
        self.term.send(key)

        def ready(text: str) -> bool:
            return expect is None or expect(text)

        deadline = start + (TIMEOUT_S if expect is not None else CHANGE_TIMEOUT_S)
        while True:
            raw = self.term.screen()
            text = text_of(raw)
            if (not changes or raw != before) and ready(text) and \
                    not any(p in text for p in PLACEHOLDERS):
                break
            if time.perf_counter() > deadline:
                if expect is None:  # a key that had nothing to change here: not timed
                    print(f"  ({name or key}: the screen did not change in "
                          f"{CHANGE_TIMEOUT_S:.0f} s; not counted)", flush=True)
                    return text
                raise SystemExit(f"bench: {name or key}: never saw its screen:\n{text}")
            time.sleep(POLL_S)
        done = time.perf_counter()
        final = self.settle()
        if name is not None:
            self.timings.add(name, 1000 * (done - start), 1000 * (max(done, self.last_change)
                                                                   - start))
        if toast is not None:
            self.toast = toast
        return text_of(final)

    def close(self) -> None:
        self.term.close()


def header_total(text: str) -> str:
    """The header's total ("142,992 samples"), the first line's last `·` field but one."""
    first = text.splitlines()[0] if text else ""
    found = re.findall(r"· ([^·]+?) · \d+ dropped", first)
    return found[0].strip() if found else first


def trail_end(text: str) -> str:
    """The breadcrumb's last step (the second line: tabs, then the trail)."""
    lines = text.splitlines()
    return lines[1].rsplit("›", 1)[-1].strip() if len(lines) > 1 else ""


def session_keys(s: Session, repeat: int, kind: str, first_u: bool) -> None:
    """Every key of the README's table once or `repeat` times (see the docstring)."""
    changed = None  # the default predicate: the screen differs
    # -- flat profile --------------------------------------------------------------
    for _ in range(repeat):
        s.press("Down", "flat: cursor down")
    for _ in range(repeat):
        s.press("Up", None)
    for _ in range(4):
        s.press("s", "flat: sort column (s)")
    s.press("S", "flat: reverse sort (S)")
    s.press("S", None)
    while "sorted by self" not in text_of(s.term.screen()):
        s.press("s", None)
    s.press("/", "flat: filter box (/)")
    pattern = "f3" if kind == "recorded" else "fn_0012"
    for char in pattern:
        s.press(char, "flat: filter, one keystroke", lambda t: "matching" in t)
    s.press("Escape", None)  # closes the box, the filter stays
    s.press("Escape", "flat: clear filter (Esc)", lambda t: "matching" not in t)
    # -- focus from the flat profile: a function not focused before, each time -------
    for _ in range(repeat):
        s.press("Down", None)
        s.press("Enter", "flat: focus (Enter), first time for it",
                lambda t: "and what it calls" in t and "who calls" in t)
        s.press("Escape", "back (Esc)", lambda t: "Self%" in t)
    for _ in range(repeat):
        s.press("Up", None)
    s.press("Enter", "flat: focus (Enter), again", lambda t: "and what it calls" in t)
    s.press("Escape", None, lambda t: "Self%" in t)
    # -- call tree -----------------------------------------------------------------
    s.press("2", "pane key (1-6)", changed)
    for _ in range(3):  # the rows above the hot path's end are its ancestors
        s.press("h", "tree: hot path (h)")
        for _ in range(3):
            s.press("Up", None)
    for _ in range(repeat):
        s.press("Down", "tree: cursor down")
    for _ in range(repeat):
        s.press("Up", None)
    for _ in range(repeat // 2):
        s.press("space", "tree: expand/collapse (space)")
    s.press("u", "tree: bottom-up (u), first" if first_u else "tree: bottom-up (u), again",
            lambda t: trail_end(t) == "tree: bottom-up")
    s.press("Down", "tree: cursor down (bottom-up)")
    s.press("u", "tree: top-down (u)", lambda t: trail_end(t) == "Call tree")
    s.press("u", "tree: bottom-up (u), again", lambda t: trail_end(t) == "tree: bottom-up")
    s.press("u", None, lambda t: trail_end(t) == "Call tree")
    s.press("%", "tree: % of total/parent (%)", lambda t: "% of parent" in t,
            toast="percentages of the")
    s.press("%", "tree: % of total/parent (%)", lambda t: "% of total" in t,
            toast="percentages of the")
    for i in range(max(2, repeat // 3)):
        for _ in range(i + 2):
            s.press("Down", None)
        s.press("f", "tree: focus (f)", lambda t: "and what it calls" in t)
        s.press("Escape", "back (Esc)", lambda t: "and what it calls" not in t)
    s.press("T", "tree: threads as roots (T)", lambda t: "thread" in t.lower())
    s.press("T", "tree: threads as roots (T)")
    search = "f2" if kind == "recorded" else "fn_0004"
    s.press("/", "tree: search prompt (/)")
    for char in search:
        s.press(char, None)
    s.press("Enter", "tree: search (Enter)", lambda t: "match 1 of" in t)
    for i in range(repeat):
        s.press("n", "tree: next match (n/N)", lambda t, k=i + 2: f"match {k} of" in t)
    s.press("N", "tree: next match (n/N)", lambda t, k=repeat: f"match {k} of" in t)
    # -- anywhere: threads, metric -------------------------------------------------
    picker = s.press("t", "threads (t)")
    if "no per-thread data" in picker:
        s.toast = "no per-thread data"
    else:
        s.press("Escape", "back (Esc)")
    total = header_total(text_of(s.term.screen()))
    s.press("m", "metric (m)", lambda t: header_total(t) != total, toast="showing")
    s.press("m", "metric (m)", lambda t: header_total(t) == total, toast="showing")
    # -- flame graph ---------------------------------------------------------------
    s.press("5", "pane key (1-6)")
    ups = min(repeat, 5)  # the recorded profile's leaves are 6 rows up: every Up moves
    for _ in range(ups):  # from the root towards the leaves
        s.press("Up", "flame: move up/down")
    for _ in range(ups, 9):  # to a leaf (Up then changes nothing)...
        s.press("Up", None)
    s.press("Down", "flame: move up/down")  # ...and back: a row of siblings for left/right
    for i in range(repeat):
        s.press("Right" if i % 4 < 2 else "Left", "flame: move left/right")
    for _ in range(max(2, repeat // 3)):
        s.press("Enter", "flame: zoom (Enter)", lambda t: "zoom:" in t)
        s.press("Escape", "flame: zoom out (Esc)", lambda t: "zoom:" not in t)
    s.press("/", "flame: search prompt (/)")
    for char in search:
        s.press(char, None)
    s.press("Enter", "flame: search (Enter, share shown)", lambda t: "in matching frames" in t)
    for i in range(repeat // 2):
        s.press("n" if i % 3 else "N", "flame: next match (n/N)")
    # -- timeline ------------------------------------------------------------------
    s.press("6", "pane key (1-6)")
    span = re.findall(r"Activity over ([0-9.]+) s", text_of(s.term.screen()))
    if span and float(span[0]) >= 2:  # a range is then a part of the run
        for _ in range(max(2, repeat // 3)):
            s.press("Home", None)
            for _ in range(5):
                s.press("Right", "timeline: move cursor")
            s.press("Enter", "timeline: start selection (Enter)", lambda t: "selecting" in t)
            for _ in range(3):
                s.press("S-Right", "timeline: move cursor")
            whole = header_total(text_of(s.term.screen()))
            s.press("Enter", "timeline: show range (Enter)",
                    lambda t, w=whole: "shown:" in t and header_total(t) != w)
            s.press("Escape", "timeline: whole run (Esc)",
                    lambda t, w=whole: "shown:" not in t and header_total(t) == w)
    for key in ("1", "3", "4", "2", "5", "1"):
        s.press(key, "pane key (1-6)")


def record_profile(path: Path, rounds: int, work: Path) -> None:
    prog = work / "many_paths"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(prog),
                    str(ROOT / "benchmarks/programs/many_paths.c")], check=True)
    subprocess.run([PROFTUI, "record", "-F", "10000", "-o", str(path), str(prog), "-r",
                    str(rounds)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def synthetic(path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_tui import synthetic_profile
    from proftui.collectors.model import storage

    storage.save(synthetic_profile(50_000, 200_000), path)


def make_profile(kind: str, fresh: bool, work: Path) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"keys-{kind}.proftui"
    if path.exists() and not fresh:
        return path
    print(f"making the {kind} profile ({path})...", flush=True)
    if kind == "recorded":
        record_profile(path, 1600, work)
    elif kind == "tiny":
        record_profile(path, 5, work)
    else:
        synthetic(path)
    return path


def describe(path: Path) -> str:
    from proftui.collectors.model import storage

    profile = storage.load(path)
    return (f"{len(profile.tree) - 1:,} tree nodes, {len(profile.frames):,} functions, "
            f"{profile.total(0):,.0f} samples, {path.stat().st_size / 1e6:.1f} MB")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(path: Path, kind: str, sessions: int, repeat: int, work: Path) -> Timings:
    timings = Timings()
    for n in range(sessions):
        s = Session(path, work, timings)
        try:
            session_keys(s, repeat, kind, first_u=True)
        finally:
            s.close()
        print(f"  session {n + 1}/{sessions} done", flush=True)
    return timings


def table(title: str, big: Timings, anchor: Timings | None) -> float:
    print(f"\n{title}\n{'key':42} {'n':>3} {'p50':>8} {'p95':>8} {'max':>8} "
          f"{'last p95':>8} {'tiny p50':>8}  goal")
    worst = 0.0
    for name in big.done:
        values = big.done[name]
        p95 = pct(values, 0.95)
        if name != "first screen (open)":
            worst = max(worst, p95)
        tiny = anchor.done.get(name) if anchor is not None else None
        tiny_text = f"{statistics.median(tiny):7.1f}" if tiny else f"{'-':>7}"
        verdict = "" if name == "first screen (open)" else (
            "ok" if p95 <= GOAL_MS else "SLOW")
        print(f"{name:42} {len(values):3d} {statistics.median(values):7.1f} {p95:7.1f} "
              f"{max(values):7.1f} {pct(big.last[name], 0.95):7.1f}  {tiny_text}  {verdict}")
    print(f"worst key p95: {worst:.1f} ms (goal <= {GOAL_MS:.0f} ms)")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profiles", default="recorded,synthetic")
    parser.add_argument("--sessions", type=int, default=3, help="app runs per profile")
    parser.add_argument("--repeat", type=int, default=10, help="presses per repeated key")
    parser.add_argument("--fresh", action="store_true", help="make the profiles again")
    parser.add_argument("--no-anchor", action="store_true", help="skip the tiny profile")
    parser.add_argument("--profile", type=Path, help="time this saved profile instead")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("bench: needs tmux")
    for package in ("collectors", "tui"):  # as an installed proftui runs: byte-compiled
        compileall.compile_dir(ROOT / package, quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench-keys-") as tmp:
        work = Path(tmp)
        print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; tmux 160x50; "
              f"{args.sessions} sessions x every key", flush=True)
        anchor = None
        if not args.no_anchor:
            tiny = make_profile("tiny", args.fresh, work)
            print(f"anchor (tiny): {describe(tiny)}", flush=True)
            anchor = measure(tiny, "recorded", 1, args.repeat, work)
        kinds = ["given"] if args.profile else [k for k in args.profiles.split(",") if k]
        for kind in kinds:
            path = args.profile if args.profile else make_profile(kind, args.fresh, work)
            print(f"\n{kind}: {describe(path)}", flush=True)
            big = measure(path, "recorded" if kind != "synthetic" else kind, args.sessions,
                          args.repeat, work)
            table(f"{kind} profile: key press -> screen shows the change, ms",
                  big, anchor if kind != "synthetic" else None)
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
