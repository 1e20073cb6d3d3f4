"""Two local ClickHouse servers, one shard each, read through Distributed tables: a query
with `cluster=NAME` aggregates both nodes' rows as if they were one server's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from proftui.collectors.fleet.query import load
from proftui.collectors.model.storage import load as load_file

from tests.conftest import build_fixture
from tests.helpers import fleet as fh
from tests.helpers.clickhouse import Server


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[Server]]:
    yield from fh.servers_or_skip(2)


def test_two_shards_aggregate_through_distributed_tables(nodes: list[Server],
                                                         tmp_path: Path) -> None:
    binary = build_fixture("smp_work.c", ["-O1", "-g", "-fno-omit-frame-pointer"])
    runs = []
    for i, node in enumerate(nodes):  # each host pushes to its own node
        out = tmp_path / f"node{i}.proftui"
        result = fh.push_run(node.url("fleet"), binary, out, str(200 + 100 * i),
                          labels=(f"host=n{i}",))
        assert result.returncode == 7, result.stderr
        runs.append(load_file(out))
    one = load(nodes[0].url("fleet", "from=-1h"))  # the node alone: its own host only
    fh.assert_same(one, runs[:1])
    both = load(nodes[0].url("fleet", "from=-1h&cluster=proftui_test"))
    fh.assert_same(both, runs)
    assert "2 hosts" in both.meta.warnings[0]
    # label filters apply on every shard; asked of the other node, the same answer
    only = load(nodes[1].url("fleet", "from=-1h&cluster=proftui_test&host=n1"))
    fh.assert_same(only, runs[1:])
    # an unknown cluster is one line
    result = fh.proftui("report", nodes[0].url("fleet", "cluster=nosuch"))
    assert result.returncode == 2 and "no cluster 'nosuch'" in result.stderr
