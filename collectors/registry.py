"""Which collector class serves which mode.  One line per collector."""

from __future__ import annotations

from collectors.attach import AttachCollector
from collectors.base import Collector
from collectors.gprof import GprofCollector
from collectors.instrument import InstrumentCollector
from collectors.sampler import SamplerCollector

COLLECTORS: dict[str, type[Collector]] = {
    "attach": AttachCollector,
    "gprof": GprofCollector,
    "instrument": InstrumentCollector,
    "sampler": SamplerCollector,
}
