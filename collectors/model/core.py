"""The native core of the data model: per-node and per-frame work in C.

`_core` is a CPython extension (csrc/core/, plain C11, stable ABI 3.11) built by
`pip install` with the runtimes; it is required.  Its functions operate on a
`CallTree`'s own columns through the buffer protocol, so the model stays one set
of Python arrays that every collector and view reads:

* structure: `parents`, `frames`, `first_child`, `last_child`, `next_sibling` are
  array('i'); `calls` array('q'); `selfs` and (once computed, `_totals`) lists of
  array('d'), one per metric;
* `CallTree._index` holds an `Index`: (parent, frame) -> child, 4 bytes a slot,
  keyed through the columns and brought up to date with them at each call.

Contract (what tests/unit/test_core.py checks against the pure-Python model in
tests/helpers/reference_calltree.py): nodes are made in the order the Python
methods made them and float sums are done in the same order, so every result is
bit-identical to it.  Functions that add nodes append them to every column and
link them; costs of new nodes are zero, their calls unknown (-1).  Errors are
Python exceptions (IndexError for a node or frame out of range, ValueError for a
malformed tree); nothing here is thread-safe beyond the GIL.  `invert`, `callers`
and `fold` release the GIL while they insert paths (the TUI derives bottom-up, focus
and caller trees in a worker and keeps drawing meanwhile): during the call no other
thread may change their source tree (profiles handed to views are snapshots that never
change) or touch their destination tree (each thread builds its own).

Interface (details in _core.pyi):

  child, find, walk, insert_paths      find or make nodes
  fold, node_map                       one tree into another
  invert, callers, paths_of            bottom-up and caller trees; paths of leaves
  totals, link, function_sums,         whole-tree passes
  add_along, preorder, max_depth,
  outermost_of, nodes_matching,
  neighbours, pruned, remap_frames,
  share_walk, display_order
  check, scatter_add, add_stacks,      plain columns: load checks, time slices
  slice_parts, group_sums
  add_rows, take_changes               a stack table's cost changes, as columns
  AddressCache                         (address, leaf) -> frame ids of a stack table
"""

from __future__ import annotations

from proftui.collectors.model._core import (
    AddressCache,
    Index,
    add_along,
    add_rows,
    add_stacks,
    callers,
    check,
    child,
    display_order,
    find,
    fold,
    function_sums,
    group_sums,
    insert_paths,
    invert,
    link,
    max_depth,
    neighbours,
    node_map,
    nodes_matching,
    outermost_of,
    paths_of,
    preorder,
    pruned,
    remap_frames,
    scatter_add,
    share_walk,
    slice_parts,
    take_changes,
    totals,
    walk,
)

__all__ = [
    "AddressCache", "Index", "add_along", "add_rows", "add_stacks", "callers", "check", "child",
    "display_order", "find",
    "fold", "function_sums", "group_sums", "insert_paths", "invert", "link", "max_depth",
    "neighbours", "node_map", "nodes_matching", "outermost_of", "paths_of", "preorder", "pruned",
    "remap_frames", "scatter_add", "share_walk", "slice_parts", "take_changes", "totals",
    "walk",
]
