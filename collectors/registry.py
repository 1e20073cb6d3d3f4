"""Which collector class serves which mode.  One line per collector."""

from __future__ import annotations

from collectors.attach import AttachCollector
from collectors.base import Collector

COLLECTORS: dict[str, type[Collector]] = {
    "attach": AttachCollector,
}
