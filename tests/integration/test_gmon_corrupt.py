"""Corrupt and truncated gmon.out files always give one clear GmonError line."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proftui.collectors.gprof.analysis import analyze, read_symbol_table
from proftui.collectors.gprof.collector import gmon_result
from proftui.collectors.gprof.gmon import GmonError, parse_gmon

from tests.conftest import build_fixture


@pytest.fixture(scope="module")
def real_gmon(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    binary = build_fixture("gp_recurse.c", ["-O1", "-g", "-pg"])
    cwd = tmp_path_factory.mktemp("gmon")
    subprocess.run([str(binary), "20"], cwd=cwd, check=True, capture_output=True)
    return binary, (cwd / "gmon.out").read_bytes()


def test_real_file_parses(real_gmon: tuple[Path, bytes]) -> None:
    binary, data = real_gmon
    parsed = parse_gmon(data)
    assert len(parsed.histograms) == 1 and parsed.arcs
    assert analyze(parsed, read_symbol_table(binary)).arcs


@pytest.mark.parametrize("cut", [0, 3, 19, 21, 40, 60, -7, -1])
def test_truncation_is_reported(real_gmon: tuple[Path, bytes], cut: int) -> None:
    _, data = real_gmon
    with pytest.raises(GmonError, match=r"gmon\.out: (too short|truncated)"):
        parse_gmon(data[:cut])


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda data: b"GMON" + data[4:], r"not a gmon\.out file"),
    (lambda data: data[:4] + (7).to_bytes(4, "little") + data[8:], "version 7"),
    (lambda data: data + b"\x09", "corrupt record tag 9"),
], ids=["magic", "version", "tag"])
def test_bad_header_or_record_tag_is_named(real_gmon: tuple[Path, bytes],
                                           corrupt: Callable[[bytes], bytes],
                                           message: str) -> None:
    with pytest.raises(GmonError, match=message):
        parse_gmon(corrupt(real_gmon[1]))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutations_parse_or_fail_cleanly(real_gmon: tuple[Path, bytes],
                                         data: st.DataObject) -> None:
    binary, original = real_gmon
    blob = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    blob = blob[: data.draw(st.integers(0, len(blob)))]
    try:
        parsed = parse_gmon(bytes(blob))
    except GmonError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("gmon.out: ")
        return
    analyze(parsed, read_symbol_table(binary))  # whatever parses must also analyze


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(blob: bytes) -> None:
    try:
        parse_gmon(b"gmon\x01\x00\x00\x00" + bytes(12) + blob)
    except GmonError as exc:
        assert "\n" not in str(exc)


def test_damaged_file_on_disk_names_the_file(compile_c, tmp_path: Path) -> None:
    binary = compile_c("gp_split.c", ["-O1", "-g", "-pg"])
    subprocess.run([str(binary), "10"], cwd=tmp_path, check=True, capture_output=True)
    gmon = tmp_path / "gmon.out"
    gmon.write_bytes(gmon.read_bytes()[:50])
    with pytest.raises(GmonError) as caught:
        gmon_result(gmon, binary)
    assert str(caught.value).startswith(f"{gmon}: truncated")
