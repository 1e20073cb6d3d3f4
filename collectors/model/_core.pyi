"""Types of the native core (csrc/core/); collectors/model/core.py explains the contract.

`tree` arguments are CallTree objects (read through their columns); "ids" arguments
take an array('i'/'q'), bytes or any sequence of ints; "mask" arguments a bytes-like
object indexed by frame id (past its end: not flagged).
"""

from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import Buffer

class Index:
    """A CallTree's (parent, frame) -> child index (CallTree._index)."""

    def get(self, key: int, default: Any = None, /) -> Any:
        """The child `key` = parent << 32 | frame names, or `default`."""

    def rebind(self, parents: array, frames: array, /) -> None:
        """Index these columns instead (a copy with the same items)."""

class AddressCache:
    """(runtime address, is the leaf) -> frame ids, for one address space."""

    def put(self, address: int, leaf: bool, ids: Sequence[int], /) -> None:
        """Remember the frame ids (outermost first) of one address."""

    def path(self, ips: Sequence[int], extra: Mapping[tuple[int, bool], Sequence[int]] | None
             = None, /) -> tuple[array | None, list[tuple[int, bool]]]:
        """Frame ids of a stack given innermost first (outermost first), or None and
        the keys neither the cache nor `extra` knows (each once, outermost first)."""

    def __len__(self) -> int: ...

def child(tree: Any, node: int, frame: int, /) -> int:
    """The child of `node` for `frame`, made (zero cost, calls unknown) if absent."""

def find(tree: Any, node: int, frame: int, /) -> int:
    """The child of `node` for `frame`, or -1."""

def walk(tree: Any, frames: Sequence[int], at: int, /) -> int:
    """The node at `frames` (outermost first) below `at`, made as needed."""

def insert_paths(tree: Any, paths: Buffer, offsets: Buffer, outer: bytearray | None,
                 group_of: Sequence[int] | None, groups: int, /) -> array:
    """Insert paths[offsets[s]:offsets[s+1]] (array('i') frames, array('q') offsets) from
    the root, in order; the leaves (array('i')).  With `outer`, extend it with each new
    node's flag: no ancestor is of its function group (group_of[frame] < groups)."""

def fold(tree: Any, node: int, other: Any, other_nodes: Sequence[int], sign: float,
         frame_map: Sequence[int] | None, metric_pairs: Sequence[tuple[int, int]], /) -> None:
    """CallTree.fold of each of `other_nodes` in turn: `sign` times `other`'s subtree at it
    into `node`."""

def node_map(tree: Any, into: Any, frame_map: Sequence[int] | None, /) -> array:
    """For each node, the node of `into` at the same (mapped) path, or -1 (array('q'))."""

def invert(src: Any, dst: Any, max_depth: int, /) -> bool:
    """Bottom-up tree of `src` into `dst` (paths of at most `max_depth`); True if cut."""

def callers(src: Any, src_totals: list[array], dst: Any, nodes: Sequence[int],
            root_frame: int, max_depth: int, /) -> bool:
    """Caller tree of `nodes` of `src` into `dst`, each weighted by its total and calls,
    its own frame replaced by `root_frame`; True if a path was cut."""

def paths_of(tree: Any, leaves: Sequence[int], /) -> tuple[array, array]:
    """Each leaf's path from the root, concatenated (array('i')), and offsets (array('q'))."""

def totals(tree: Any, /) -> list[array]:
    """Per metric, each node's self plus its children's totals."""

def link(parents: Buffer, with_last: bool = True, /) -> tuple[array, array | None, array]:
    """(first_child, last_child, next_sibling) of a parents column (ValueError if bad);
    last_child None unless `with_last`."""

def function_sums(tree: Any, keymap: Sequence[int] | None, width: int,
                  outer: bytearray | None, /
                  ) -> tuple[list[array], list[array], bytearray, array | None, bytearray]:
    """(selfs, totals, present, calls, outer) summed by key: see CallTree.function_sums."""

def add_along(tree: Any, leaf: int, values: Sequence[float], outer: bytearray | None,
              group_of: Buffer | None, fn_self: list[array] | None,
              fn_total: list[array] | None, /) -> None:
    """A count change along the leaf's path: self, totals (when held), and unless `outer`
    is None the function sums (fn_self/fn_total by group_of[frame])."""

def preorder(tree: Any, /) -> array:
    """Every node but the root, parents before children, children in order."""

def max_depth(tree: Any, /) -> int:
    """Depth of the deepest node."""

def outermost_of(tree: Any, mask: Buffer, /) -> array:
    """Nodes of flagged frames with no flagged ancestor, in stack-walk order."""

def nodes_matching(tree: Any, mask: Buffer, /) -> array:
    """Nodes of flagged frames, in pre-order."""

def pruned(tree: Any, totals: list[array], /) -> tuple[array, array, list[array], array]:
    """(parents, frames, selfs, calls) of the nodes with a cost or calls, and ancestors."""

def remap_frames(tree: Any, frame_map: Sequence[int], /) -> tuple[array, bool]:
    """The frames column through `frame_map`, and whether two siblings now share one."""

def neighbours(tree: Any, totals: list[array], mask: Buffer, callees: bool, /
               ) -> tuple[array, list[array], array]:
    """Callers (or callees) of the flagged frames' nodes: keys (frame ids, -1 the root) in
    first-met order, their summed totals per metric, their summed calls (-1: unknown)."""

def share_walk(tree: Any, totals: list[array], metric: int, matches: Buffer, stack: array,
               budget: int, /) -> tuple[float, array]:
    """Up to `budget` steps of flame.ShareWalk: (cost found, the stack left)."""

def display_order(tree: Any, totals: list[array], metric: int, start: int, mask: Buffer,
                  max_depth: int, /) -> array:
    """The nodes below `start` whose frame `mask` flags, as a call tree view lists them:
    depth first, siblings by descending total (ties in sibling order), children of nodes
    `max_depth` levels down left out."""

def check(column: array, lo: float, hi: float, start: int, /) -> int:
    """The first index >= start whose item is outside [lo, hi] (or NaN), else -1."""

def scatter_add(dst: array, index: array, src: array, lo: int, hi: int, /) -> None:
    """dst[index[e]] += src[e] for e in [lo, hi)."""

def add_stacks(selfs: list[array], leaves: array, per_stack: list[array],
               parts: array | None, part: int, /) -> None:
    """selfs[m][leaves[s]] += per_stack[m][s] for stacks (of `part`) with a cost."""

def add_rows(selfs: list[array], leaves: array, index: array, values: list[array],
             parts: array | None, part: int, /) -> None:
    """selfs[m][leaves[index[e]]] += values[m][e] for entries with a cost (of stacks of
    `part`, when `parts` is given), in entry order."""

def take_changes(costs: list[array], handed: list[array], index: array, /
                 ) -> tuple[array, list[array]]:
    """(stacks of `index` whose costs differ from `handed`, costs - handed per metric);
    `handed` is brought up to `costs` there."""

def slice_parts(offsets: array, stacks: array, part: array, column: array, parts: int, /
                ) -> list[list[float]]:
    """Per part, its cost in each time slice."""

def group_sums(per_stack: list[array], keys: array, width: int, /
               ) -> tuple[list[array], array]:
    """Per metric, costs of stacks with a key summed by key; the keys, first met first."""
