"""`proftui diff BASE NEW` on real runs: two builds of one program with one function's work
doubled (share change against the CPU time each worker measured on the same runs),
absolute deltas against `go tool pprof -top -diff_base` on the exported files, heap
profiles (exact byte deltas), the JSON schema and bad input."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile
from proftui.collectors.formats.export import write_export
from proftui.collectors.formats.importers import load_any

from tests.conftest import FIXTURES
from tests.helpers.reference import fixture_cpu_ns, fixture_cpu_shares

WORK = {"work_a": 1, "work_b": 2, "work_c": 3, "work_d": 4}  # units of work, diff_work.c
DOUBLED = "work_b"  # -DDOUBLE_B: 4 units
UNIT = "100000000"  # loop iterations per unit: ~1.6 s of CPU for BASE
SHARE_TOLERANCE = 3.0  # percentage points (issue 17)


def proftui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proftui.tui.cli", *args], capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


def diff_json(*args: str) -> dict[str, Any]:
    done = proftui("diff", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_one_line_error(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("proftui: "), done.stderr
    assert text in lines[0], done.stderr
    assert done.stdout == ""


def _build(directory: Path, source: str, flags: list[str]) -> Path:
    """One build in its own directory under one base name, as two builds of a program are."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / Path(source).stem
    subprocess.run(["gcc", "-O2", "-g", *flags, "-o", str(binary), str(FIXTURES / source)],
                   check=True, capture_output=True, text=True)
    return binary


def _function_symbols(binary: Path) -> dict[str, int]:
    with open(binary, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        assert symtab is not None
        return {s.name: s["st_value"] for s in symtab.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_value"]}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(BASE.proftui, NEW.proftui): diff_work.c built twice, sampled once each; beside
    each, NAME.cpu holds the CPU time each worker took on that run (_measured_shares)."""
    root = tmp_path_factory.mktemp("diff")
    base_bin = _build(root / "base", "diff_work.c", [])
    new_bin = _build(root / "new", "diff_work.c", ["-DDOUBLE_B"])
    # The workers stayed real functions at -O2 (noinline), at different addresses or not:
    for binary in (base_bin, new_bin):
        assert set(WORK) <= set(_function_symbols(binary)), binary
    files = []
    for name, binary in (("base", base_bin), ("new", new_bin)):
        out = root / f"{name}.proftui"
        done = proftui("record", "--mode", "sampler", "-o", str(out), str(binary), UNIT,
                       str(out.with_suffix(".cpu")))
        assert done.returncode == 0, done.stderr
        files.append(out)
    return files[0], files[1]


def _nominal_shares(doubled: bool) -> dict[str, float]:
    work = dict(WORK, **({DOUBLED: 2 * WORK[DOUBLED]} if doubled else {}))
    whole = sum(work.values())
    return {name: 100.0 * units / whole for name, units in work.items()}


def _measured_shares(saved: Path) -> dict[str, float]:
    """The truth the sampler is held to: each worker's CPU time on the run `saved` recorded,
    from the fixture's own clock.  A unit of one worker need not cost what a unit of another
    does (loop alignment, a shared VM), so the units only bound it loosely."""
    return fixture_cpu_shares(saved.with_suffix(".cpu"))


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["function"]: f for f in doc["functions"]}


def test_doubled_function_share_change_matches_truth(sampled: tuple[Path, Path]) -> None:
    base, new = sampled
    doc = diff_json("-n", "0", str(base), str(new))
    rows = _by_name(doc)
    before, after = _measured_shares(base), _measured_shares(new)
    # each profile's own shares first: the sampler saw the work split the fixture measured
    for side, truth, doubled in (("base", before, False), ("new", after, True)):
        report = proftui("report", "--json", str(base if side == "base" else new))
        own = {f["function"]: f["self_percent"] for f in json.loads(report.stdout)["flat"]}
        for name, share in truth.items():
            assert abs(own[name] - share) < SHARE_TOLERANCE, (side, name, own[name], share)
            assert rows[name]["self"][f"{side}_share"] == pytest.approx(own[name], abs=1e-3)
            assert abs(share - _nominal_shares(doubled)[name]) < 3 * SHARE_TOLERANCE, truth
    for name in WORK:
        truth = after[name] - before[name]
        measured = rows[name]["self"]["points"]
        assert abs(measured - truth) < SHARE_TOLERANCE, (name, measured, truth)
        assert rows[name]["status"] == "both" and rows[name]["module"] == "diff_work"
    print(f"{DOUBLED}: share change {rows[DOUBLED]['self']['points']:+.2f} points, "
          f"truth {after[DOUBLED] - before[DOUBLED]:+.2f}")
    # the largest change, in shares and in absolute samples, is the doubled function
    assert doc["functions"][0]["function"] == DOUBLED
    assert diff_json("--absolute", str(base), str(new))["functions"][0]["function"] == DOUBLED
    cpu_ratio = (fixture_cpu_ns(new.with_suffix(".cpu"))[DOUBLED]
                 / fixture_cpu_ns(base.with_suffix(".cpu"))[DOUBLED])
    assert rows[DOUBLED]["self"]["ratio"] == pytest.approx(cpu_ratio, abs=0.15), cpu_ratio
    # the context that changed most ends in the doubled function, under main
    top = doc["paths"][0]
    assert top["path"][-2:] == ["main", DOUBLED] and top["status"] == "both"
    assert top["total"]["points"] == pytest.approx(rows[DOUBLED]["total"]["points"], abs=1e-6)


def test_text_report_names_what_it_compares(sampled: tuple[Path, Path]) -> None:
    base, new = sampled
    done = proftui("diff", "-n", "2", str(base), str(new))
    assert done.returncode == 0 and done.stderr == ""
    out = done.stdout
    assert "metric samples:" in out and "sorted by change of self share" in out
    functions = out.split("Functions")[1].split("Calling contexts")[0]
    rows = [line for line in functions.splitlines() if re.match(r"\s*[+-]\d", line)]
    assert len(rows) == 2 and rows[0].rstrip().endswith(f"{DOUBLED} (diff_work)")
    assert "self samples" in functions
    done = proftui("diff", "--absolute", "--metric", "cpu_ns", str(base), str(new))
    assert done.returncode == 0 and "sorted by change of self cost (ms)" in done.stdout
    assert "self ms" in done.stdout


# pprof names an inlined function "name (inline)"; proftui names it "name"
PPROF_ROW = re.compile(r"^\s*(-?[\d.]+)(?:ns)?\s+-?[\d.]+%\s+-?[\d.]+%\s+(-?[\d.]+)(?:ns)?"
                       r"\s+-?[\d.]+%\s+(\S+)(?: \(inline\))?\s*$")


def _pprof_diff(go: str, base: Path, new: Path, index: str) -> dict[str, tuple[int, int]]:
    """name -> (flat, cum) of `go tool pprof -top -diff_base BASE NEW`: NEW - BASE."""
    done = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=1000", "-nodefraction=0",
                           "-symbolize=none", f"-sample_index={index}", "-unit=ns",
                           "-diff_base", str(base), str(new)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        match = PPROF_ROW.match(line)
        if match:
            rows[match[3]] = (round(float(match[1])), round(float(match[2])))
    assert rows, done.stdout
    return rows


def test_absolute_deltas_agree_with_go_pprof_diff_base(sampled: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go (Debian golang-go, for `go tool pprof -diff_base`) is not installed")
    base, new = sampled
    pbs = []
    for source in (base, new):
        pb = tmp_path / f"{source.stem}.pb.gz"
        write_export(load_any(source), "pprof", pb)
        pbs.append(pb)
    for metric in ("samples", "cpu_ns"):
        reference = _pprof_diff(go, pbs[0], pbs[1], metric)
        doc = diff_json("--absolute", "--metric", metric, "-n", "0", str(pbs[0]), str(pbs[1]))
        ours = {f["function"]: (round(f["self"]["delta"]), round(f["total"]["delta"]))
                for f in doc["functions"]}
        # pprof's -top leaves out a function whose flat and cum deltas are both zero (the
        # same sample count in both runs happens); it agrees the change is zero
        unchanged = {name for name, delta in ours.items() if delta == (0, 0)}
        assert not unchanged & set(reference), metric
        ours = {name: delta for name, delta in ours.items() if name not in unchanged}
        assert ours == reference, metric
        assert doc["functions"][0]["function"] == DOUBLED
        # the saved profiles give the same deltas as their exports
        saved = diff_json("--absolute", "--metric", metric, "-n", "0", str(base), str(new))
        assert {f["function"]: (round(f["self"]["delta"]), round(f["total"]["delta"]))
                for f in saved["functions"] if f["function"] not in unchanged} == ours


def test_gmon_out_files_with_their_binaries(tmp_path: Path) -> None:
    """gprof's own per-function totals (Profile.functions), read from two gmon.out files."""
    gmons = []
    for name, flags in (("base", []), ("new", ["-DDOUBLE_B"])):
        binary = _build(tmp_path / name, "diff_work.c", ["-pg", *flags])
        subprocess.run([str(binary), "50000000"], cwd=binary.parent, check=True, timeout=120)
        gmons.append((binary, binary.parent / "gmon.out"))
    (base_bin, base_gmon), (new_bin, new_gmon) = gmons
    doc = diff_json("--absolute", "--base-binary", str(base_bin), "--binary", str(new_bin),
                    str(base_gmon), str(new_gmon))
    assert doc["metric"] == {"name": "cpu_ns", "unit": "ns"} and doc["base"]["mode"] == "gprof"
    rows = _by_name(doc)
    assert doc["functions"][0]["function"] == DOUBLED  # gprof ticks at 100 Hz: no share bound
    assert rows[DOUBLED]["self"]["delta"] > 0 and set(WORK) <= set(rows)
    assert rows["main"]["total"]["delta"] == pytest.approx(
        doc["new"]["total"] - doc["base"]["total"], rel=0.05)
    assert_one_line_error(proftui("diff", str(base_gmon), str(new_gmon)), "--binary")


@pytest.fixture(scope="module")
def heap_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two heap-mode runs of diff_alloc.c: N=10 (BASE) and N=25 (NEW)."""
    root = tmp_path_factory.mktemp("heapdiff")
    binary = _build(root, "diff_alloc.c", [])
    files = []
    for n in ("10", "25"):
        out = root / f"alloc{n}.proftui"
        done = proftui("record", "--mode", "heap", "-o", str(out), str(binary), n)
        assert done.returncode == 0, done.stderr
        files.append(out)
    return files[0], files[1]


def test_heap_diff_exact_bytes(heap_runs: tuple[Path, Path]) -> None:
    base, new = heap_runs
    extra = 25 - 10
    expected = {  # metric -> function -> self delta (diff_alloc.c's table)
        "alloc_bytes": {"var_site": extra * 3000, "leak_var": extra * 512, "fixed_site": 0},
        "allocs": {"var_site": extra, "leak_var": extra, "fixed_site": 0},
        "leaked_bytes": {"leak_var": extra * 512},
        "leaks": {"leak_var": extra},
    }
    for metric, deltas in expected.items():
        doc = diff_json("--absolute", "--metric", metric, "-n", "0", str(base), str(new))
        assert doc["metric"]["name"] == metric
        rows = _by_name(doc)
        for name, delta in deltas.items():
            assert rows[name]["self"]["delta"] == delta, (metric, name)
        assert doc["new"]["total"] - doc["base"]["total"] == sum(deltas.values()), metric
        assert doc["functions"][0]["self"]["delta"] == max(deltas.values())  # largest first
        assert rows["main"]["total"]["delta"] == sum(deltas.values())
    text = proftui("diff", "--absolute", "--metric", "alloc_bytes", str(base), str(new))
    assert text.returncode == 0 and "+45,000" in text.stdout and "self bytes" in text.stdout


def test_json_schema(sampled: tuple[Path, Path]) -> None:
    base, new = sampled
    doc = diff_json("-n", "3", "--paths", "2", str(base), str(new))
    assert doc["schema"] == "proftui-diff/1"
    assert doc["metric"] == {"name": "samples", "unit": "count"}
    assert doc["normalisation"] == "shares" and doc["sort"] == "self"
    for side, file in (("base", base), ("new", new)):
        assert doc[side]["file"] == str(file) and doc[side]["mode"] == "sampler"
        assert doc[side]["total"] > 0 and isinstance(doc[side]["argv"], list)
    assert len(doc["functions"]) == 3 <= doc["functions_count"] and len(doc["paths"]) == 2
    change_keys = {"base", "new", "delta", "base_share", "new_share", "points", "ratio"}
    for row in doc["functions"]:
        assert set(row) == {"function", "module", "file", "line", "status", "self", "total",
                            "calls"}
        assert row["status"] in ("both", "new", "gone")
        for kind in ("self", "total"):
            change = row[kind]
            assert set(change) == change_keys
            assert change["delta"] == change["new"] - change["base"]
            assert change["points"] == pytest.approx(change["new_share"] - change["base_share"],
                                                     abs=1e-5)
            assert change["base_share"] == pytest.approx(
                100 * change["base"] / doc["base"]["total"], abs=1e-5)
    for path in doc["paths"]:
        assert set(path) == {"path", "modules", "status", "total", "self"}
        assert len(path["path"]) == len(path["modules"]) and path["path"][0] == "_start"
    absolute = diff_json("--absolute", "--sort", "total", str(base), str(new))
    assert absolute["normalisation"] == "absolute" and absolute["sort"] == "total"
    deltas = [abs(f["total"]["delta"]) for f in absolute["functions"]]
    assert deltas == sorted(deltas, reverse=True)


def test_bad_input_is_one_line(sampled: tuple[Path, Path], heap_runs: tuple[Path, Path],
                               tmp_path: Path) -> None:
    base, new = sampled
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not a profile\n")
    truncated = tmp_path / "cut.proftui"
    truncated.write_bytes(base.read_bytes()[: base.stat().st_size // 2])
    garbled = tmp_path / "garbled.proftui"
    garbled.write_bytes(gzip.compress(b'{"format": "proftui-profile", "version": 1, "meta"'))
    assert_one_line_error(proftui("diff", str(tmp_path / "nope"), str(new)), "no such file")
    assert_one_line_error(proftui("diff", str(base), str(tmp_path)), "is a directory")
    for bad in (junk, truncated, garbled):
        assert_one_line_error(proftui("diff", str(base), str(bad)), bad.name)
        assert_one_line_error(proftui("diff", "--json", str(bad), str(new)), bad.name)
    assert_one_line_error(proftui("diff", "--metric", "alloc_bytes", str(base), str(new)),
                          "metric 'alloc_bytes' is not in BASE")
    assert_one_line_error(proftui("diff", "--metric", "cpu_ns", str(base), str(heap_runs[0])),
                          "metric 'cpu_ns' is not in NEW")
    assert_one_line_error(proftui("diff", str(base), str(heap_runs[0])),
                          "the profiles share no metric")
    assert_one_line_error(proftui("diff", str(base)), "")
    assert_one_line_error(proftui("diff", "-n", "-1", str(base), str(new)), "0 or more")
