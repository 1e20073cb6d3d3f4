"""Allocations in a dlopen'd object get whole stacks, however few they are.

The heap runtime notices new objects without a lock (an unwound address in
no object it knows, confirmed by glibc's _dl_find_object) and refreshes its
unwind tables without waiting (a tracked allocation may be in a signal
handler).  The plugin (tests/fixtures/heap_plugin_lib.c, no frame pointers)
can only be unwound with its own CFI table, and allocates far fewer than the
4096 allocations of the periodic check.
"""

from __future__ import annotations

import subprocess

from tests.conftest import build_fixture
from tests.helpers.heap import by_site, run_heap, stack_of

COUNT = 300  # plugin allocations: well under the periodic check's 4096


def test_plugin_allocations_have_whole_stacks() -> None:
    plugin = build_fixture("heap_plugin_lib.c",
                           ["-O2", "-g", "-fPIC", "-shared", "-fomit-frame-pointer"],
                           output="heap_plugin_lib")
    binary = build_fixture("heap_plugin.c", ["-O2", "-g", "-ldl"])
    plain = subprocess.run([str(binary), str(plugin), str(COUNT)], capture_output=True,
                           text=True, timeout=60)
    assert plain.returncode == 0 and plain.stdout == "plugin done\n"
    profile, output = run_heap(binary, str(plugin), str(COUNT))
    assert output.strip() == "plugin done"
    assert by_site(profile, "allocs")["plugin_alloc"] == COUNT
    assert by_site(profile, "alloc_bytes")["plugin_alloc"] == COUNT // 2 * (64 + 65)
    # Every one of them is unwound through the plugin's own table up to main.
    index = profile.metric_index("allocs")
    whole = 0.0
    for node in profile.tree.nodes():
        if node.frame_id < 0 or profile.frames[node.frame_id].function != "plugin_alloc":
            continue
        names, up = [], node
        while up is not None and up.frame_id >= 0:
            names.append(profile.frames[up.frame_id].function)
            up = up.parent
        if names[1:4] == ["plugin_work", "plugin_run", "main"]:
            whole += node.self_cost[index]
    assert whole == COUNT
    assert stack_of(profile, "plugin_alloc")[-4:] == ["main", "plugin_run", "plugin_work",
                                                     "plugin_alloc"]
