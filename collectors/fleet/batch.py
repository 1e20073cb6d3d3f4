"""One interval of one run, ready to insert: sample rows, the stacks they name, the labels.

A batch is the unit of delivery: it is inserted (with the other batches of its
interval) as one block (atomic on the server: one part, one partition), written to
the spool when that failed, and identified by `batch_id`, a random 64-bit number
chosen when the interval is taken, so a retry can ask the server whether an earlier
attempt got there (docs/fleet.md, "Exactly once").

Spool files: MAGIC, a little-endian u32 header length, the JSON header (labels,
threads, metric spec, the stacks' distinct frames once and each stack as indices into
them, what the interval lost), then the row columns as raw arrays (thread index u32,
stack hash u64, costs f64 row-major, calls i64).  A header without "frames" (an older
proftui's) holds each stack's frames whole.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from dataclasses import dataclass, field

from proftui.collectors.errors import ProftuiError
from proftui.collectors.fleet.stacks import StackRecord
from proftui.collectors.model.profile import CodeSite, Frame, Metric, metric_named

MAGIC = b"PTFLEET1"
_LITTLE = sys.byteorder == "little"


def metric_spec(metrics: tuple[Metric, ...], calls: bool) -> str:
    """The `profile` column: "samples:count,cpu_ns:ns", "+calls" when call counts are known."""
    spec = ",".join(f"{m.name}:{m.unit}" for m in metrics)
    return spec + ("+calls" if calls else "")


def parse_spec(spec: str) -> tuple[tuple[Metric, ...], bool]:
    """`metric_spec`'s inverse."""
    calls = spec.endswith("+calls")
    body = spec.removesuffix("+calls")
    metrics = []
    for item in body.split(",") if body else []:
        name, _sep, unit = item.partition(":")
        metrics.append(metric_named(name, unit or "count"))
    return tuple(metrics), calls


@dataclass
class Batch:
    """Rows of one interval: `thread[i]`, `stack[i]`, costs `costs[i*n:(i+1)*n]`, `calls[i]`."""

    batch_id: int
    time: int  # interval start, Unix seconds
    end: float  # interval end, Unix seconds
    series: int
    labels: dict[str, str]
    spec: str  # metric_spec
    threads: list[str] = field(default_factory=list)
    thread: array = field(default_factory=lambda: array("I"))
    stack: array = field(default_factory=lambda: array("Q"))
    costs: array = field(default_factory=lambda: array("d"))
    calls: array = field(default_factory=lambda: array("q"))
    stacks: dict[int, StackRecord] = field(default_factory=dict)  # not yet on the server
    # What the run lost in this interval (samples, or records its runtime could not
    # store): sent in the marker row's `samples` column, so the queries can say it.
    lost: int = 0

    def __len__(self) -> int:
        return len(self.stack)

    def weight(self) -> float:
        """What the batch counts in its first metric (samples, bytes): said when dropped."""
        n = max(1, len(parse_spec(self.spec)[0]))
        return sum(self.costs[i] for i in range(0, len(self.costs), n))

    def encode(self) -> bytes:
        # Stacks share most frames (their callers): each one is written once (known by
        # identity: a table's frames are interned, and hashing a Frame reads every field).
        index: dict[int, int] = {}
        frames: list[Frame] = []
        stacks = []
        for h, record in self.stacks.items():
            ids = []
            for f in record.frames:
                i = index.get(id(f))
                if i is None:
                    i = index[id(f)] = len(frames)
                    frames.append(f)
                ids.append(i)
            stacks.append([h, ids, _site_row(record.site)])
        header = {
            "batch": self.batch_id, "time": self.time, "end": self.end,
            "series": self.series, "labels": self.labels, "spec": self.spec,
            "threads": self.threads, "rows": len(self.stack), "lost": self.lost,
            "frames": [_frame_row(f) for f in frames], "stacks": stacks,
        }
        head = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogateescape")
        columns = [_bytes(c) for c in (self.thread, self.stack, self.costs, self.calls)]
        return b"".join([MAGIC, struct.pack("<I", len(head)), head, *columns])

    @classmethod
    def decode(cls, data: bytes) -> Batch:
        """A batch from `encode`'s bytes (ProftuiError if they are not one)."""
        try:
            if not data.startswith(MAGIC):
                raise ValueError("no magic")
            (size,) = struct.unpack_from("<I", data, len(MAGIC))
            start = len(MAGIC) + 4
            header = json.loads(data[start:start + size].decode("utf-8", "surrogateescape"))
            rows = int(header["rows"])
            n = max(1, len(parse_spec(header["spec"])[0]))
            pos = start + size
            out = []
            for code, count in (("I", rows), ("Q", rows), ("d", rows * n), ("q", -1)):
                column = array(code)
                width = column.itemsize
                if count < 0:  # the calls: rows of them, or none (calls unknown)
                    count = (len(data) - pos) // width
                    if count not in (0, rows):
                        raise ValueError("bad calls column")
                column.frombytes(data[pos:pos + count * width])
                if len(column) != count:
                    raise ValueError("truncated")
                if not _LITTLE:
                    column.byteswap()
                pos += count * width
                out.append(column)
            table = header.get("frames")
            if table is None:  # an older proftui's file: every stack's frames whole
                stacks = {int(h): StackRecord(tuple(_frame_of(f) for f in frames),
                                              _site_of(site))
                          for h, frames, site in header["stacks"]}
            else:
                known = [_frame_of(f) for f in table]
                stacks = {int(h): StackRecord(tuple(known[i] for i in frames), _site_of(site))
                          for h, frames, site in header["stacks"]}
            return cls(batch_id=int(header["batch"]), time=int(header["time"]),
                       end=float(header["end"]), series=int(header["series"]),
                       labels=dict(header["labels"]), spec=str(header["spec"]),
                       threads=list(header["threads"]), thread=out[0], stack=out[1],
                       costs=out[2], calls=out[3], stacks=stacks,
                       lost=int(header.get("lost", 0)))
        except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
            raise ProftuiError(f"not a proftui fleet batch ({exc})") from None


def _bytes(column: array) -> bytes:
    if _LITTLE:
        return column.tobytes()
    swapped = array(column.typecode, column)
    swapped.byteswap()
    return swapped.tobytes()


def _frame_row(f: Frame) -> list:
    return [f.function, f.module, f.file, f.line, f.address, f.raw_name, f.build_id,
            f.inlined]


def _frame_of(row: list) -> Frame:
    function, module, file, line, address, raw_name, build_id, inlined = row
    return Frame(function, module, file, line, address, raw_name, build_id, bool(inlined))


def _site_row(site: tuple[str, int, CodeSite] | None) -> list | None:
    if site is None:
        return None
    module, address, code = site
    return [module, address, code.function, code.file, code.line]


def _site_of(row: list | None) -> tuple[str, int, CodeSite] | None:
    if row is None:
        return None
    module, address, function, file, line = row
    return module, int(address), CodeSite(function, file, line)
