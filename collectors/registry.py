"""Which collector class serves which mode.  One line per collector.

A mode's collector is imported when it is first looked up, so a command pays only
for the collector it runs (`proftui record` of a sampler run never imports gprof's
analysis or the hook decoder)."""

from __future__ import annotations

from collections.abc import Mapping

from proftui.collectors.base import Collector
from proftui.collectors.lazy import LazyMapping


def _attach() -> type[Collector]:
    from proftui.collectors.attach.collector import AttachCollector
    return AttachCollector


def _gprof() -> type[Collector]:
    from proftui.collectors.gprof.collector import GprofCollector
    return GprofCollector


def _heap() -> type[Collector]:
    from proftui.collectors.heap.collector import HeapCollector
    return HeapCollector


def _instrument() -> type[Collector]:
    from proftui.collectors.instrument.collector import InstrumentCollector
    return InstrumentCollector


def _sampler_and_heap() -> type[Collector]:
    from proftui.collectors.sampler_and_heap.collector import SamplerAndHeapCollector
    return SamplerAndHeapCollector


def _sampler() -> type[Collector]:
    from proftui.collectors.sampler.collector import SamplerCollector
    return SamplerCollector


COLLECTORS: Mapping[str, type[Collector]] = LazyMapping(
    {"attach": _attach, "gprof": _gprof, "heap": _heap, "instrument": _instrument,
     "sampler": _sampler, "sampler+heap": _sampler_and_heap})
