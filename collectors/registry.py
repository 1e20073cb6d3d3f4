"""Which collector class serves which mode.  One line per collector."""

from __future__ import annotations

from proftui.collectors.attach.collector import AttachCollector
from proftui.collectors.base import Collector
from proftui.collectors.gprof.collector import GprofCollector
from proftui.collectors.heap.collector import HeapCollector
from proftui.collectors.instrument.collector import InstrumentCollector
from proftui.collectors.sampler.collector import SamplerCollector

COLLECTORS: dict[str, type[Collector]] = {
    "attach": AttachCollector,
    "gprof": GprofCollector,
    "heap": HeapCollector,
    "instrument": InstrumentCollector,
    "sampler": SamplerCollector,
}
