"""Calling-context trees from proftui and from uftrace (the reference tool) in one
shape, so instrument-mode tests can compare parents and inclusive shares on the
same binary."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from proftui.collectors.model.profile import Profile

_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9}
_LINE = re.compile(r"^\s*([\d.]+)\s+(ns|us|ms|s|m)\s+:(.*?)\((\d+)\) (\S+)\s*$")


@dataclass
class Node:
    """One calling context: inclusive time (ns), calls, children by function name."""

    name: str
    total: float = 0.0
    calls: int = 0
    inlined: bool = False
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node


@dataclass
class Shares:
    """Per function: inclusive share (recursion counted once), self share, callers."""

    total: float
    incl: dict[str, float]
    self: dict[str, float]
    parents: dict[str, set[str]]
    inlined: set[str]

    def incl_pct(self, name: str) -> float:
        return 100.0 * self.incl.get(name, 0.0) / self.total

    def self_pct(self, name: str) -> float:
        return 100.0 * self.self.get(name, 0.0) / self.total


def simple_name(name: str) -> str:
    """A C++ name the way uftrace prints it by default: no template arguments,
    parameters or return type ("int reduce<int>(int const*, int)" -> "reduce")."""
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    return "".join(out).split()[-1] if "".join(out).split() else name


def _merge(into: Node, other: Node) -> None:
    """Add `other` (a sibling of the same name) to `into`, children included."""
    into.total += other.total
    into.calls += other.calls
    into.inlined = into.inlined or other.inlined
    for name, kid in other.children.items():
        if name in into.children:
            _merge(into.children[name], kid)
        else:
            into.children[name] = kid


def from_profile(profile: Profile, simple: bool = False) -> Node:
    """The profile's merged tree (metric 0) as a Node tree rooted at an unnamed root;
    `simple` shortens C++ names as uftrace does.  Siblings of one name (a function's
    node and the row of ticks in its code before its enter hook ran) are merged."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

    def convert(src: object, name: str, inlined: bool) -> Node:
        node = Node(name, calls=getattr(src, "calls", 0) or 0, inlined=inlined)
        total = src.self_cost[0]  # type: ignore[attr-defined]
        for kid in src.children.values():  # type: ignore[attr-defined]
            frame = profile.frames[kid.frame_id]
            name = simple_name(frame.function) if simple else frame.function
            converted = convert(kid, name, frame.inlined)
            if name in node.children:
                _merge(node.children[name], converted)
            else:
                node.children[name] = converted
            total += converted.total
        node.total = total
        return node

    return convert(profile.tree.root, "", False)


def shares(root: Node) -> Shares:
    """Inclusive/self time per function and its set of callers over the whole tree."""
    incl: dict[str, float] = {}
    self_t: dict[str, float] = {}
    parents: dict[str, set[str]] = {}
    inlined: set[str] = set()
    stack: list[tuple[Node, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, active = stack.pop()
        kids = node.children.values()
        if node.name:
            self_t[node.name] = self_t.get(node.name, 0.0) + max(
                0.0, node.total - sum(k.total for k in kids))
        for kid in kids:
            if kid.name not in active:
                incl[kid.name] = incl.get(kid.name, 0.0) + kid.total
            if node.name:
                parents.setdefault(kid.name, set()).add(node.name)
            if kid.inlined:
                inlined.add(kid.name)
            stack.append((kid, active | {kid.name}))
    return Shares(sum(k.total for k in root.children.values()), incl, self_t, parents, inlined)


def uftrace_reason() -> str | None:
    """Why uftrace cannot be used here, or None."""
    return None if shutil.which("uftrace") else "uftrace is not installed (apt-get install uftrace)"


def uftrace_tree(argv: list[str | Path], workdir: Path) -> Node:
    """Run `argv` under `uftrace record` and parse `uftrace graph` into a Node tree.

    --no-libcall keeps uftrace to the -finstrument-functions events proftui
    sees too; kernel pseudo-functions (linux:schedule) are dropped (their time
    stays in the parents' totals, as it does in proftui's wall time).  uftrace
    loses its stack on longjmp under --no-libcall (and crashes Lua without it),
    so compare only runs that do not longjmp.
    """
    data = workdir / "uftrace.data"
    subprocess.run(["uftrace", "record", "--no-libcall", "--max-stack=8192", "-d", str(data),
                    *map(str, argv)], check=True, capture_output=True, timeout=300)
    graph = subprocess.run(["uftrace", "graph", "-d", str(data)], check=True,
                           capture_output=True, text=True, timeout=300).stdout
    # "+-(n) f" starts a child one column step right of its parent; "| (n) f"
    # at its parent's column continues a single-child chain.
    root = Node("")
    stack: list[tuple[int, Node]] = []
    for line in graph.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        value, unit, prefix, calls, name = m.groups()
        pos = len(prefix)
        if not stack:  # "(1) <program name>": the session, not a function
            stack.append((pos, root))
            continue
        if prefix.endswith("+-"):
            while stack[-1][0] >= pos:
                stack.pop()
        if name.startswith("linux:"):
            continue
        node = stack[-1][1].child(name)
        node.total += float(value) * _UNITS[unit]
        node.calls += int(calls)
        stack.append((pos, node))
    root.total = sum(k.total for k in root.children.values())
    return root
