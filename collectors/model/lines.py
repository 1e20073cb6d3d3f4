"""Line and address costs (docs/architecture.md section 2, `LineCosts`): recording and queries.

Collectors call `add_code_cost` at collection time with the symbolizer's
answer for each costed instruction, so the profile alone (saved, opened on
another machine, without the binary) can say what each line and instruction
of a function cost.  Three tables of `Profile` take part:

* `address_costs[(module, address)]` - self cost per link-time instruction address;
* `address_sites[(module, address)]` - that address's function and source line;
* `line_costs[(file, line)]` - self cost per source line, over all functions.

The tables are profile-wide (like `arcs`): every part (thread, process)
adds into the same ones, so merging parts needs nothing more; `merge_code_costs`
adds one profile's tables into another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proftui.collectors.model.profile import CodeSite, Frame, Profile


def add_costs(table: dict, key: object, costs: Sequence[float]) -> None:
    """table[key] += costs, per metric (a new key gets a copy of `costs`)."""
    old = table.get(key)
    if old is None:
        table[key] = list(costs)
    else:
        for i, value in enumerate(costs):
            old[i] += value


def add_code_cost(profile: Profile, module: str, address: int, site: CodeSite | None,
                  costs: Sequence[float]) -> None:
    """Add `costs` (per metric) to the instruction at link-time `address` of `module`,
    and to its source line when `site` knows one."""
    record_code_cost(profile.address_costs, profile.address_sites, profile.line_costs,
                     module, address, site, costs)


def record_code_cost(address_costs: dict, address_sites: dict, line_costs: dict, module: str,
                     address: int, site: CodeSite | None, costs: Sequence[float]) -> None:
    """`add_code_cost` into the three tables themselves (a profile being built)."""
    add_costs(address_costs, (module, address), costs)
    if site is not None:
        address_sites[(module, address)] = site
        if site.file is not None and site.line is not None:
            add_costs(line_costs, (site.file, site.line), costs)


def merge_code_costs(into: Profile, other: Profile) -> Profile:
    """Add `other`'s line and address costs (same metrics) into `into`; returns `into`."""
    if len(into.metrics) != len(other.metrics):
        raise ValueError("profiles with different metrics")
    add_cost_tables(into.address_costs, other.address_costs)
    for key, site in other.address_sites.items():
        into.address_sites.setdefault(key, site)
    add_cost_tables(into.line_costs, other.line_costs)
    return into


def add_cost_tables(into: dict[Any, list[float]], table: Mapping[Any, Sequence[float]],
               sign: float = 1.0, metric_map: Sequence[int | None] | None = None,
               width: int | None = None) -> dict[Any, list[float]]:
    """Add `sign` times each cost list of `table` into `into` (keys: a line or an
    address), as `CallTree.add_tree` does for trees: `metric_map[i]` is the metric of
    `table` that is `into`'s metric `i` (None: nothing).  Returns `into`."""
    for key, values in table.items():
        n = width if width is not None else (
            len(metric_map) if metric_map is not None else len(values))
        slot = into.get(key)
        if slot is None:
            slot = into[key] = [0.0] * n
        for i, j in enumerate(metric_map if metric_map is not None else range(len(values))):
            if j is not None and j < len(values):
                slot[i] += sign * values[j]
    return into


def _owner_starts(profile: Profile, module: str) -> list[int]:
    """Sorted start addresses of the non-inlined frames of `module`."""
    return sorted({f.address for f in profile.frames
                   if f.module == module and f.address is not None and not f.inlined})


def function_addresses(profile: Profile, frame: Frame) -> dict[int, list[float]]:
    """Costed link-time addresses of `frame`'s function -> self cost per metric.

    An address belongs to the function its recorded `CodeSite` names; an
    address without one (an imported or older profile) belongs to the closest
    function of the profile that starts at or below it.  Inlined frames own no
    address (their code is part of the function they were inlined into).
    """
    if frame.inlined or frame.address is None or not frame.module:
        return {}
    starts: list[int] | None = None
    owned: dict[int, list[float]] = {}
    for (module, address), costs in profile.address_costs.items():
        if module != frame.module or address < frame.address:
            continue
        site = profile.address_sites.get((module, address))
        if site is not None and site.function is not None:
            if site.function == frame.address:
                owned[address] = costs
            continue
        if starts is None:
            starts = _owner_starts(profile, module)
        # the owner is the last start <= address; it is ours when no start lies in between
        if not any(frame.address < s <= address for s in starts):
            owned[address] = costs
    return owned


def function_lines(profile: Profile, frame: Frame) -> tuple[dict[tuple[str, int], list[float]],
                                                             bool]:
    """(file, line) -> self cost of `frame`'s function, and whether it is exact.

    Exact: built from the function's own addresses and their recorded lines
    (lines of code inlined from other files included).  Otherwise (no sites:
    imported profiles, inlined frames) every costed line of `frame.file`, which
    may include other functions defined in that file.
    """
    lines = lines_of(profile, frame.module, function_addresses(profile, frame))
    if lines:
        return lines, True
    if frame.file is None:
        return {}, False
    return {key: list(c) for key, c in profile.line_costs.items() if key[0] == frame.file}, False


def lines_of(profile: Profile, module: str | None, owned: dict[int, list[float]]
             ) -> dict[tuple[str, int], list[float]]:
    """(file, line) -> cost of the addresses `owned` (address -> cost) of `module`, by
    the lines recorded for them."""
    lines: dict[tuple[str, int], list[float]] = {}
    for address, costs in owned.items():
        site = profile.address_sites.get((module or "", address))
        if site is not None and site.file is not None and site.line is not None:
            add_costs(lines, (site.file, site.line), costs)
    return lines
