"""The layer contract of docs/architecture.md section 1, checked in both directions.

Every module of the package names the layer it belongs to (its folder); a
layer may import only the layers listed for it.  `tui -> collectors`, never
back; inside collectors, collector subpackages -> base/runtime/symbols ->
model -> errors; collectors never import each other; panes read the model,
never ELF files, wire decoders or symbol tables.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = {"collectors": ROOT / "collectors", "tui": ROOT / "tui"}

C = "collectors"
COLLECTOR_PACKAGES = ("gprof", "instrument", "sampler", "attach", "heap")
# layer -> layers it may import (besides itself).  Layers are module paths under proftui.
ALLOWED: dict[str, set[str]] = {
    f"{C}.errors": set(),
    f"{C}.lazy": set(),  # a mapping whose values are imported on first use
    # Writing proftui's own files safely: every writer calls it (model's storage too).
    f"{C}.safefile": {f"{C}.errors"},
    # /proc/PID/status parsed one way (uids, masks, namespaced pids) for every layer.
    f"{C}.procfs": set(),
    f"{C}.model": {f"{C}.safefile", f"{C}.procfs", f"{C}.errors"},
    f"{C}.symbols": {f"{C}.model", f"{C}.procfs", f"{C}.errors"},
    f"{C}.runtime": {f"{C}.model", f"{C}.procfs", f"{C}.errors"},
    # The preloaded collectors' launch sequence refuses static binaries (detect).
    f"{C}.runtime.preload": {f"{C}.runtime", f"{C}.detect", f"{C}.errors"},
    f"{C}.detect": {f"{C}.symbols", f"{C}.errors"},
    # The source pane's listing: the model's choice given the binary (disasm) and the disk.
    f"{C}.annotate": {f"{C}.symbols.disasm", f"{C}.model"},
    # base names the stack tables a collector keeps (the fleet push reads them).
    f"{C}.base": {f"{C}.runtime", f"{C}.stacktable", f"{C}.model", f"{C}.errors"},
    # The lifecycle of the LD_PRELOAD collectors (sampler, heap), above base; their
    # address spaces and symbolizer, which --heap shares between the two.
    f"{C}.preloaded": {f"{C}.base", f"{C}.runtime", f"{C}.runtime.preload", f"{C}.symbols",
                       f"{C}.model", f"{C}.errors"},
    # The stack-table data path: stacks symbolized once, counts applied as changes.
    f"{C}.stacktable": {f"{C}.symbols", f"{C}.model", f"{C}.errors"},
    **{f"{C}.{name}": {f"{C}.base", f"{C}.preloaded", f"{C}.detect", f"{C}.runtime",
                       f"{C}.stacktable", f"{C}.symbols", f"{C}.model", f"{C}.procfs",
                       f"{C}.errors"}
       for name in COLLECTOR_PACKAGES},
    # Fleet profiles: intervals of a collector's stack tables (or snapshots) pushed to
    # ClickHouse, queries read back as a Profile; collectors are seen through base only.
    f"{C}.fleet": {f"{C}.base", f"{C}.stacktable", f"{C}.symbols", f"{C}.model",
                   f"{C}.errors"},
    # Importers read gmon.out through the gprof collector's parser, fleet URLs through
    # the fleet's query.
    # The text report words the exit status as the CLI and TUI do (runtime.launch).
    f"{C}.formats": {f"{C}.gprof", f"{C}.fleet", f"{C}.symbols", f"{C}.model",
                     f"{C}.runtime.launch", f"{C}.lazy", f"{C}.safefile", f"{C}.errors"},
    # profile.proto's codec reads varints with DWARF's base-128 decoder (one for both).
    f"{C}.formats.protobuf": {f"{C}.symbols.leb128"},
    # --heap: the sampler and heap collectors side by side over one run (above both).
    f"{C}.sampler_and_heap": {f"{C}.sampler", f"{C}.heap", f"{C}.base", f"{C}.runtime",
                          f"{C}.stacktable", f"{C}.symbols", f"{C}.model", f"{C}.errors"},
    # The agent: every process of the host through attach's helper (its notes shared).
    f"{C}.agent": {f"{C}.attach.notes", f"{C}.base", f"{C}.runtime", f"{C}.stacktable",
                   f"{C}.symbols", f"{C}.model", f"{C}.errors"},
    f"{C}.registry": {f"{C}.{name}" for name in (*COLLECTOR_PACKAGES, "sampler_and_heap")}
    | {f"{C}.base", f"{C}.lazy"},
    f"{C}": set(),
    # The front end: widgets and panes see the model and formatting only.
    "tui.format": {f"{C}.model"},
    # Pure helpers: name shortening, pattern matching, the settings file.
    "tui.names": set(),
    "tui.search": set(),
    "tui.settings": {f"{C}.safefile", f"{C}.errors"},
    "tui.widgets": {"tui.format", "tui.names", f"{C}.model"},
    "tui.screens": {"tui.widgets", "tui.format", f"{C}.formats", f"{C}.model"},
    # annotate: the source pane's worker asks for a function's listing (objdump, DWARF)
    "tui.panes": {"tui.widgets", "tui.format", "tui.names", "tui.search", f"{C}.model",
                  f"{C}.annotate",
                  f"{C}.runtime.process_status", f"{C}.errors"},
    # The app's diff views state (baseline, live mark, time range): the model's diff and
    # the widgets; a fleet range's query may fail (errors).
    "tui.diffstate": {"tui.widgets", f"{C}.base", f"{C}.model", f"{C}.errors"},
    # The live update loop: snapshots of the collector, the process sampled, paced.
    "tui.poller": {"tui.diffstate", f"{C}.base", f"{C}.errors", f"{C}.model",
                   f"{C}.runtime.launch", f"{C}.runtime.process_status"},
    # ProfTuiApp's mixins: what acts on the run and the profile; the choices it remembers.
    "tui.run_controls": {"tui.screens", f"{C}.base", f"{C}.errors", f"{C}.formats",
                         f"{C}.model", f"{C}.runtime.launch"},
    # A fleet profile's picker breaks it down another way: a new query (fleet).
    "tui.view_choices": {"tui.settings", "tui.names", "tui.panes", "tui.screens",
                         f"{C}.model", f"{C}.fleet", f"{C}.errors"},
    "tui.app": {"tui.diffstate", "tui.run_controls", "tui.view_choices", "tui.panes",
                "tui.poller", "tui.screens", "tui.widgets", "tui.format", "tui.names",
                "tui.settings", f"{C}.base", f"{C}.fleet",
                f"{C}.formats", f"{C}.model", f"{C}.runtime.launch",
                f"{C}.runtime.process_status", f"{C}.errors"},
    "tui.demo": {f"{C}.errors", f"{C}.symbols.cachedir"},
    # The terminal around the app: the watchdog ends the collector's target itself.
    "tui.terminal": {f"{C}.base"},
    # The command line: its words (arguments), the collector a command asks for (modes),
    # the commands without a TUI (headless), and the entry point (cli) above them.
    "tui.arguments": {f"{C}"},
    "tui.modes": {"tui.arguments", f"{C}"},
    "tui.headless": {"tui.arguments", "tui.modes", f"{C}"},
    "tui.cli": {"tui.app", "tui.demo", "tui.terminal", "tui.arguments", "tui.modes",
                "tui.headless", f"{C}"},
    "tui": set(),
}
THIRD_PARTY_FRONT_END = {"textual", "rich"}


def package_modules() -> list[tuple[str, Path]]:
    found = []
    for top, directory in PACKAGE_DIRS.items():
        for path in sorted(directory.rglob("*.py")):
            parts = path.relative_to(directory).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join((top, *parts)), path))
    return found


def layer_of(module: str) -> str:
    """The longest ALLOWED key that is `module` or a package above it."""
    best = ""
    for layer in ALLOWED:
        if (module == layer or module.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    assert best, f"{module} belongs to no layer: add it to ALLOWED"
    return best


def imports_of(path: Path, module: str) -> set[str]:
    """Absolute names of every module `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            else:
                base = base.removeprefix("proftui.") if base.startswith("proftui.") else (
                    "" if base == "proftui" else "!" + base)
            names.update(f"{base}.{alias.name}".lstrip(".") for alias in node.names)
            names.add(base)
    return {n.removeprefix("proftui.") for n in names if n}


MODULES = package_modules()


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_follow_the_layer_contract(module: str, path: Path) -> None:
    own = layer_of(module)
    allowed = ALLOWED[own]
    bad = set()
    for name in imports_of(path, module):
        if name.startswith("!"):
            top = name[1:].split(".")[0]
            if own.startswith(C) and top in THIRD_PARTY_FRONT_END:
                bad.add(name[1:])  # collectors never load Textual or Rich
            if top in PACKAGE_DIRS:
                bad.add(name[1:] + " (import it as proftui." + name[1:] + ")")
            continue
        if name.split(".")[0] not in PACKAGE_DIRS:
            continue
        target = layer_of(name) if any(name == k or name.startswith(k + ".")
                                       for k in ALLOWED) else name
        if target == own or target.startswith(own + "."):
            continue
        if not any(target == a or target.startswith(a + ".") or a.startswith(target + ".")
                   for a in allowed):
            bad.add(name)
    assert not bad, f"{module} ({own}) may not import {sorted(bad)}"


def test_contract_is_checked_in_both_directions() -> None:
    """The checker itself catches a back edge and a sideways edge (so it cannot pass vacuously)."""
    assert layer_of("collectors.model.views") == f"{C}.model"
    assert not any(a.startswith("tui") for k, v in ALLOWED.items() if k.startswith(C) for a in v)
    assert f"{C}.sampler" not in ALLOWED[f"{C}.attach"]
    assert "tui.app" not in ALLOWED["tui.panes"]
    assert f"{C}.symbols" not in ALLOWED["tui.panes"]
