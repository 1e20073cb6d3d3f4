"""gperftools CPU profile parser on exact bytes, including corrupt ones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proftui.collectors.errors import ProftuiError
from proftui.collectors.formats.importers import detect, load_any
from proftui.collectors.formats.importers.gperftools import load_gperftools, parse
from proftui.collectors.model.views import flat_profile

from tests.helpers.importer_inputs import GPERFTOOLS_RECORDS, MAPS, gperftools_cpu, load_garbled


@pytest.mark.parametrize("fmt", ["<Q", ">Q", "<I", ">I"])
def test_parse_word_sizes_and_byte_orders(fmt: str) -> None:
    records = [(c, [pc & 0xFFFFFFFF for pc in pcs]) for c, pcs in GPERFTOOLS_RECORDS]
    period, parsed, maps = parse(gperftools_cpu(records, period_us=4000, fmt=fmt))
    assert period == 4000 and parsed == records and maps == MAPS


def test_load_resolves_through_maps(tmp_path: Path) -> None:
    path = tmp_path / "cpu.prof"
    path.write_bytes(gperftools_cpu(GPERFTOOLS_RECORDS))
    assert detect(path.read_bytes()[:64]) == "gperftools"
    profile = load_any(path)
    assert profile.meta.mode == "import" and profile.meta.period_ns == 1_000_000
    assert any("gperftools" in w for w in profile.meta.warnings)
    assert profile.meta.argv == ["/nonexistent/prog"]
    names = {e.frame.function: e for e in flat_profile(profile)}
    # link-time address = runtime - mapping start + offset; return addresses step back 1
    leaf = names["prog+0x100"]
    assert leaf.self_cost == (5.0, 5_000_000.0)
    assert names["prog+0x200"].self_cost[0] == 2 and names["prog+0x200"].total_cost[0] == 7
    assert names["prog+0x300"].total_cost[0] == 9  # main's return address 0x400301 - 1
    assert names["libx.so+0x10010"].self_cost[0] == 1
    assert names["0x12345"].self_cost[0] == 1
    assert profile.total() == 9
    assert profile.address_costs[("/nonexistent/prog", 0x100)] == [5.0, 5_000_000.0]


def test_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cpu.prof"
    path.write_bytes(gperftools_cpu(GPERFTOOLS_RECORDS, trailer=False, maps=""))
    with pytest.raises(ProftuiError, match="no end-of-profile trailer"):
        load_gperftools(path)
    path.write_bytes(gperftools_cpu([]))
    with pytest.raises(ProftuiError, match="no samples"):
        load_gperftools(path)
    path.write_bytes(gperftools_cpu([(1, [])]))
    with pytest.raises(ProftuiError, match="bad record"):
        load_gperftools(path)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 255), word=st.integers(0, 2**64 - 1))
def test_truncated_or_corrupt_profiles(
    tmp_path_factory: pytest.TempPathFactory, cut: int, flip: int, word: int
) -> None:
    data = bytearray(gperftools_cpu(GPERFTOOLS_RECORDS))
    cut %= len(data)
    if flip % 3 == 0:
        del data[cut:]
    elif flip % 3 == 1:
        data[cut] ^= flip | 1
    else:  # overwrite a whole word: counts, depths, pcs
        at = (cut // 8) * 8
        data[at : at + 8] = struct.pack("<Q", word)
    profile = load_garbled(bytes(data), tmp_path_factory.mktemp("g") / "cpu.prof")
    assert profile is None or profile.total() > 0
