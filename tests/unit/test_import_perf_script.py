"""`perf script` text parser: headers, call chains, odd lines, corrupt input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers import detect, load_any
from proftui.collectors.formats.importers.perf_script import parse_lines, sniff
from proftui.collectors.model.views import flat_profile

from tests.helpers.importer_inputs import PERF_SCRIPT, load_garbled


def test_perf_formats_are_recognised() -> None:
    assert sniff(PERF_SCRIPT.encode()) and detect(PERF_SCRIPT.encode()) == "perf-script"
    assert not sniff(b"hello world\nnot perf\n")
    assert not sniff(b"\x00\x01\x02")
    assert detect(b"PERFILE2....") == "perf-data"


def test_script_parses_into_a_profile_of_its_samples() -> None:
    profile = parse_lines(PERF_SCRIPT.splitlines(), "perf.txt")
    assert [m.name for m in profile.metrics] == ["samples", "cpu_ns"]
    assert profile.meta.mode == "import" and profile.meta.period_ns == 250_000
    assert profile.meta.pids == [100, 200]
    assert profile.meta.threads == {100: "prog", 101: "prog worker", 200: "other"}
    assert any("perf script" in w for w in profile.meta.warnings)
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["spin"].self_cost == (2.0, 500_000.0)
    assert flat["work_hot"].total_cost[0] == 2
    mains = {e.frame.module: e.total_cost[0] for e in flat_profile(profile)
             if e.frame.function == "main"}
    assert mains == {"/tmp/prog": 2, "/tmp/other": 1}
    assert flat["__handle_mm_fault"].frame.module == "[kernel.kallsyms]"
    assert flat["[unknown]"].total_cost[0] == 1
    assert "std::vector<int>::push_back(int const&)" in flat
    # call-chain order: outermost first
    paths = {tuple(profile.frames[i].function for i in node.path())
             for node in profile.tree.nodes() if any(node.self_cost)}
    assert ("__libc_start_call_main", "main", "work_hot", "spin") in paths
    assert ("[unknown]", "work_hot", "__handle_mm_fault") in paths
    # function start = address - symbol offset
    assert flat["spin"].frame.address == 0x115F - 0x16
    assert set(profile.parts) == {"pid 100", "pid 200"}
    assert profile.parts["pid 200"].root.total_cost[0] == 1


def test_only_the_first_event_is_counted_with_or_without_call_chains() -> None:
    text = ("p 7 1.000001: 1000 cycles:u:      401136 spin+0x6 (/tmp/p)\n"
            "p 7 1.000002: 1000 cycles:u:      401136 spin+0x6 (/tmp/p)\n"
            "p 7 1.000003: 3 instructions:u:      401136 spin+0x6 (/tmp/p)\n")
    profile = parse_lines(text.splitlines(), "x")
    assert [m.name for m in profile.metrics] == ["samples"]
    assert profile.total() == 2
    assert any("skipped 1 sample of other events" in w for w in profile.meta.warnings)


def test_errors(tmp_path: Path) -> None:
    path = tmp_path / "perf.txt"
    path.write_text("# only comments\n")
    with pytest.raises(ProftuiError, match="not a proftui profile"):
        load_any(path)
    path.write_text("p 7 1.000001: 1000 cycles:\n\t 1 f+0x1 (/p)\n" + "garbage line\n" * 30)
    with pytest.raises(ProftuiError, match="not usable `perf script` output"):
        load_any(path)
    with pytest.raises(ProftuiError, match="no such file"):
        load_any(tmp_path / "missing")
    with pytest.raises(ProftuiError, match="directory"):
        load_any(tmp_path)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 5_000), flip=st.integers(0, 255),
       junk=st.text(max_size=40))
def test_truncated_or_corrupt_text(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flip: int, junk: str
) -> None:
    data = bytearray(PERF_SCRIPT.encode())
    cut %= len(data)
    if flip % 3 == 0:
        del data[cut:]
    elif flip % 3 == 1:
        data[cut] ^= flip | 1
    else:
        data[cut:cut] = junk.encode()
    profile = load_garbled(bytes(data), tmp_path_factory.mktemp("p") / "perf.txt")
    assert profile is None or profile.total() >= 0


INLINED = """\
prog 100  7287.654257:     250000 cpu-clock:ppp:
\t            118d leaf (inlined)
\t            118d mid+0x1d (/tmp/prog)
\t            123d main+0x21 (/tmp/prog)

prog 100  7287.654507:     250000 cpu-clock:ppp:
\t            1190 mid+0x20 (/tmp/prog)
\t            123d main+0x21 (/tmp/prog)

prog 100  7287.654757:     250000 cpu-clock:ppp:
\t            1200 leaf+0x0 (/tmp/prog)
\t            123d main+0x21 (/tmp/prog)
"""


def test_inlined_frames_belong_to_their_container_module() -> None:
    """perf's `(inlined)` is a marker, not a module: the frame is inlined into mid."""
    profile = parse_lines(INLINED.splitlines(), "perf.txt")
    frames = list(profile.frames)
    assert all(f.module != "inlined" for f in frames)
    inlined = [f for f in frames if f.inlined]
    assert [(f.function, f.module) for f in inlined] == [("leaf", "/tmp/prog")]
    paths = sorted(tuple(profile.frames[i].function for i in n.path())
                   for n in profile.tree.nodes() if any(n.self_cost))
    assert paths == [("main", "leaf"), ("main", "mid"), ("main", "mid", "leaf")]
    flat = {e.frame.function: e for e in flat_profile(profile)}
    assert flat["leaf"].self_cost[0] == 2  # inlined and out-of-line copies: one row
    assert not flat["leaf"].frame.inlined
