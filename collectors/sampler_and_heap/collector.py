"""`--heap`: CPU sampling and heap tracking in one run, one Profile.

Both runtimes go into the target's LD_PRELOAD (one per-run directory; each writes
its own files as in its own mode), and the sampler and heap collectors read them
as they always do, on their own poll threads.  They share one set of address
spaces and one symbolizer (symbols.stacks.ImageSpaces), so an address is one
Frame in both; `collect()` lays the two profiles side by side: the sampler's
metrics then the heap's over one frame table, one tree, one set of line and
address costs, with the heap timeline (live bytes and RSS) and both runtimes' costs
over time (the Time pane, time ranges).

The one collector made of two others: it sits above the sampler and heap packages
(which never import each other) and is registered as mode "sampler+heap".
"""

from __future__ import annotations

from typing import ClassVar

from proftui.collectors.base import CollectorOptions, LaunchCollector
from proftui.collectors.heap.collector import HeapCollector
from proftui.collectors.model.lines import add_cost_tables
from proftui.collectors.model.profile import CallTree, FrameTable, Profile, ProfileMeta
from proftui.collectors.model.slices import SliceSource, combine
from proftui.collectors.runtime.preload import check_preloadable, launch_preloaded
from proftui.collectors.sampler.collector import SamplerCollector
from proftui.collectors.stacktable.builder import StackProfile

BOTH_NOTE = ("--heap: CPU sampling and heap tracking in one run; the time the heap "
             "profiler's hooks take is sampled too (frames in libproftui_heap.so)")
MODE = "sampler+heap"  # Profile.meta.mode: the header and reports say both are on


class SamplerAndHeapCollector(LaunchCollector):
    """The sampler and the heap profiler preloaded into one run of the target."""

    mode: ClassVar[str] = MODE
    can_pause: ClassVar[bool] = True
    options_honoured = SamplerCollector.options_honoured | HeapCollector.options_honoured

    @classmethod
    def refuse(cls, program: str, options: CollectorOptions) -> None:
        """What the heap profiler refuses, worded for both (it is preloaded first)."""
        check_preloadable(program, "the sampler and the heap profiler",
                          "relink it dynamically (attach mode, `proftui --pid PID`, samples "
                          "its CPU without the heap)", options.follow_children)

    def __init__(self, argv: list[str], options: CollectorOptions | None = None) -> None:
        super().__init__(argv, options)
        self.sampler = SamplerCollector(argv, self.options)
        self.heap = HeapCollector(argv, self.options)
        self.heap.share_symbols(self.sampler)
        for sub in (self.sampler, self.heap):  # one run directory for both runtimes
            sub.run_dir.path.rmdir()  # created empty by LaunchCollector, never used
            sub.run_dir = self.run_dir

    def start(self) -> None:
        # The heap runtime first: glibc then runs the sampler's constructor before the
        # heap's, so the sampler's start-up allocations (its pthread_getattr_np reads
        # /proc/self/maps) stay out of the heap profile.  Either order works: no tracked
        # allocation calls pthread_getattr_np (docs/heap.md, "Stack bounds").
        preloads = [self.heap.preload(), self.sampler.preload()]
        budgets = [int(p.env["PROFTUI_BUFFER_BYTES"]) for p in preloads
                   if "PROFTUI_BUFFER_BYTES" in p.env]
        if budgets:  # one variable for both runtimes: the heap's floor (1 MiB) must hold
            for p in preloads:
                p.env["PROFTUI_BUFFER_BYTES"] = str(max(budgets))
        self.process = launch_preloaded(self.argv, run_dir=self.run_dir.path,
                                        preloads=preloads, output=self.options.output,
                                        follow=self.options.follow_children)
        self.sampler.begin(self.process)
        self.heap.begin(self.process)

    def wait(self) -> Profile:
        if self.process is not None:
            with self.applying_drained():
                self.process.wait()
        self.sampler.join_poll()
        self.heap.join_poll()
        return self.snapshot()

    def stop(self) -> None:
        self.sampler.stop()
        self.heap.stop()
        super().stop()

    def pause(self) -> None:
        self.sampler.pause()
        self.heap.pause()

    def resume(self) -> None:
        self.sampler.resume()
        self.heap.resume()

    def stack_tables(self) -> list[StackProfile]:
        """The sampler's table then the heap's: `collect()`'s metric order."""
        return [*self.sampler.stack_tables(), *self.heap.stack_tables()]

    def apply_drained(self) -> None:
        self.sampler.apply_drained()
        self.heap.apply_drained()

    def collect(self) -> Profile:
        cpu = self.sampler.collect()
        heap = self.heap.collect()
        return side_by_side(cpu, heap, _meta(cpu.meta, heap.meta))


def _meta(cpu: ProfileMeta, heap: ProfileMeta) -> ProfileMeta:
    """The sampler's metadata, with the heap profiler's clock, counts and notes added."""
    warnings = [BOTH_NOTE, *cpu.warnings, *(w for w in heap.warnings if w not in cpu.warnings)]
    return ProfileMeta(
        mode=MODE, argv=cpu.argv, pids=sorted(set(cpu.pids) | set(heap.pids)),
        threads=cpu.threads, period_ns=cpu.period_ns,
        clock=f"{cpu.clock}; heap: {heap.clock}" if cpu.clock else f"heap: {heap.clock}",
        start_time=cpu.start_time,
        end_time=None if not (cpu.complete and heap.complete) else max(
            t for t in (cpu.end_time, heap.end_time, cpu.start_time) if t is not None),
        exit_status=cpu.exit_status, exit_signal=cpu.exit_signal,
        complete=cpu.complete and heap.complete, dropped=cpu.dropped + heap.dropped,
        warnings=warnings,
        lines_note=f"CPU: samples at each line; {heap.lines_note}" if heap.lines_note else "",
    )


def side_by_side(first: Profile, second: Profile, meta: ProfileMeta) -> Profile:
    """One finalized Profile with `first`'s metrics then `second`'s, frames matched
    exactly (same Frame value, same id), trees, parts and code costs added up."""
    n_first, n = len(first.metrics), len(first.metrics) + len(second.metrics)
    out = Profile(meta=meta, metrics=(*first.metrics, *second.metrics),
                  frames=FrameTable(list(first.frames)), timeline=second.timeline
                  or first.timeline, leaks=second.leaks or first.leaks)
    first_ids = list(range(len(first.frames)))
    second_ids = [out.frames.intern(f) for f in second.frames]
    n_second = len(second.metrics)
    first_map = [*range(n_first), *([None] * n_second)]
    second_map = [*([None] * n_first), *range(n_second)]
    sources: list[SliceSource] = []
    for src, ids, metric_map, offset in ((first, first_ids, first_map, 0),
                                         (second, second_ids, second_map, n_first)):
        out.tree.add_tree(0, src.tree, frame_map=ids, metric_map=metric_map)
        for label, tree in src.parts.items():
            part = out.parts.get(label)
            if part is None:
                part = out.parts[label] = CallTree(n)
            part.add_tree(0, tree, frame_map=ids, metric_map=metric_map)
        if src.slices is not None:
            sources.append(SliceSource(
                src.slices, src.tree.node_map(out.tree, ids),
                {label: tree.node_map(out.parts[label], ids)
                 for label, tree in src.parts.items()}, offset))
        add_cost_tables(out.line_costs, src.line_costs, metric_map=metric_map)
        add_cost_tables(out.address_costs, src.address_costs, metric_map=metric_map)
        for key, site in src.address_sites.items():
            out.address_sites.setdefault(key, site)
        for (caller, callee), count in src.arcs.items():
            arc = (ids[caller] if caller >= 0 else caller, ids[callee])
            out.arcs[arc] = out.arcs.get(arc, 0) + count
    if sources:  # the timeline: both runtimes' costs over time, over the joined trees
        out.slices = combine(sources, n)
    return out.finalize()
