"""Shortened C++ function names for narrow columns (pure functions, no widgets).

Demangled libstdc++ names run to hundreds of characters; a column shows a few
dozen.  As hotspot and KCachegrind do, names can be shown in three modes:

- ``full``: the demangled name as c++filt prints it;
- ``templates``: template arguments collapsed to ``<…>``, the return type of
  template functions dropped, ``(anonymous namespace)`` as ``(anon)``, ABI
  tags dropped and clone suffixes compacted (``[clone .isra.0] [clone .cold]``
  becomes ``[.isra.0.cold]``);
- ``params``: as ``templates``, and non-empty parameter lists as ``(…)``.

`fit` then truncates in the middle so that the last component (the method and
its parameters) stays visible, and `distinct_labels` falls back to a longer
mode, then numbers, names that would otherwise show as identical rows.

The scanner knows operator names (``operator<``, ``operator<<``, ``operator()``,
``operator->``...), so their brackets are not taken for template or parameter
brackets, and lambdas (``{lambda(int)#1}``), function pointer parameters and
nested templates are bracket groups like any other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

MODES = ("full", "templates", "params")
MODE_TITLES = {"full": "full names", "templates": "templates shortened",
               "params": "templates and parameters shortened"}
ELLIPSIS = "…"

_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {">", ")", "]", "}"}
# Longest first: "operator<<=" must not be read as "operator<" then "<=".
_OPERATORS = sorted(["<<=", ">>=", "<=>", "->*", "<<", ">>", "<=", ">=", "->", "()", "[]",
                     "<", ">", "==", "!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=",
                     "%=", "&=", "|=", "^=", "+", "-", "*", "/", "%", "^", "&", "|", "~",
                     "!", "=", ","], key=len, reverse=True)
_CLONE = re.compile(r" \[clone (\.[^\]]+)\]$")
_ABI = re.compile(r"\[abi:[^\]]*\]")
_ANON = "(anonymous namespace)"
_SPACE_TOKENS = re.compile(r"\boperator\b|[<>(){}\[\] ]")
_TOKENS = re.compile(r"\boperator\b|\(anonymous namespace\)|\(anon\)|[<>(){}\[\]]")
# What the demangler puts before a special name; kept whole (it is not a return type).
_SPECIAL = re.compile(r"^((?:(?:non-virtual |virtual |covariant return )?thunk to "
                      r"|(?:construction )?vtable for |VTT for |typeinfo (?:name )?for "
                      r"|guard variable for |transaction clone for |TLS (?:init|wrapper) "
                      r"function for |reference temporary #\d+ for |hidden alias for )+)")
_PLAIN = re.compile(r"[A-Za-z0-9_.:$@]*")  # a C name: nothing to shorten


def next_mode(mode: str) -> str:
    """The mode after `mode` in the toggle's cycle (unknown modes restart it)."""
    return MODES[(MODES.index(mode) + 1) % len(MODES)] if mode in MODES else MODES[0]


def _operator_end(name: str, i: int) -> int:
    """If an `operator` keyword starts at `i`, the index after its symbol; else -1.

    `operator new[]`, `operator delete` and conversion operators have no symbol:
    the keyword alone is returned (their spaces are handled by the caller)."""
    if not name.startswith("operator", i) or (i > 0 and (name[i - 1].isalnum()
                                                       or name[i - 1] == "_")):
        return -1
    j = i + len("operator")
    if j < len(name) and (name[j].isalnum() or name[j] == "_"):
        return -1  # e.g. "operators" or "operator_x": an ordinary identifier
    for op in _OPERATORS:
        if name.startswith(op, j):
            return j + len(op)
    return j


def _groups(name: str) -> list[tuple[int, int]]:
    """The top-level bracket groups of `name` as (open index, close index) pairs."""
    groups: list[tuple[int, int]] = []
    stack: list[str] = []
    start = 0
    skip = -1  # an operator's symbol ends here: its brackets are not groups
    # Only the brackets and keywords are visited (a regex scan): names run to kilobytes.
    for match in _TOKENS.finditer(name):
        i = match.start()
        if i < skip:
            continue
        c = match.group()
        if c == "operator":
            skip = _operator_end(name, i)
            continue
        if len(c) > 1:
            continue  # "(anonymous namespace)" is a name, not a group
        if c in _OPEN:
            if not stack:
                start = i
            stack.append(_OPEN[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                groups.append((start, i))
        # else: a ">" inside parentheses (a template's value argument), or unbalanced
    if stack and not groups:  # unbalanced (a cut name): nothing to collapse safely
        return []
    return groups


def _collapse(name: str, params: bool, top: bool = True) -> str:
    """Template groups as `<…>`; parameter groups as `(…)` when `params`, else recursed into."""
    out: list[str] = []
    last = 0
    for start, end in _groups(name):
        out.append(name[last:start])
        opener, inner = name[start], name[start + 1:end]
        if opener == "<":
            out.append("<" + ELLIPSIS + ">" if inner.strip() else "<>")
        elif opener == "(" and params and inner.strip() and inner != "void":
            out.append("(" + ELLIPSIS + ")")
        else:
            out.append(opener + _collapse(inner, params, top=False) + name[end])
        last = end + 1
    out.append(name[last:])
    return "".join(out)


def _drop_return_type(name: str) -> str:
    """`void std::vector<…>::f<…>(…)` -> `std::vector<…>::f<…>(…)`: the return type that
    c++filt prints for template functions goes; spaces inside `operator new`,
    `unsigned long` parameters or `(anon)` are not top-level name breaks."""
    if " " not in name:
        return name
    depth = 0
    cut = -1
    for match in _SPACE_TOKENS.finditer(name):
        c = match.group()
        i = match.start()
        if c == "operator":
            if depth == 0:
                break  # everything after `operator` is the name itself
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0:  # a space between words at the top level
            if name.startswith(("const", "volatile", "&", "noexcept", "["), i + 1):
                break  # trailing qualifiers of a member function, not a type before it
            cut = i
    return name[cut + 1:] if cut >= 0 else name


@lru_cache(maxsize=65536)
def shorten(name: str, mode: str) -> str:
    """`name` (demangled) shown in `mode` (one of `MODES`)."""
    if mode not in ("templates", "params") or _PLAIN.fullmatch(name):
        return name
    clones: list[str] = []
    base = name
    while True:  # "f() [clone .isra.0] [clone .cold]": suffixes come off from the end
        match = _CLONE.search(base)
        if match is None:
            break
        clones.insert(0, match.group(1))
        base = base[:match.start()]
    base = _ABI.sub("", base).replace(_ANON, "(anon)")
    special = _SPECIAL.match(base)
    prefix = special.group(1) if special else ""
    short = prefix + _drop_return_type(_collapse(base[len(prefix):], params=mode == "params"))
    if clones:
        short += " [" + "".join(clones) + "]"
    return short


def components(name: str) -> list[str]:
    """`name` split at its top-level `::` (not inside brackets or an operator's symbol)."""
    parts: list[str] = []
    depth = 0
    last = 0
    i, n = 0, len(name)
    while i < n:
        c = name[i]
        if c == "o" and depth == 0:
            end = _operator_end(name, i)
            if end > 0:
                i = end
                continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE and depth:
            depth -= 1
        elif c == ":" and depth == 0 and name.startswith("::", i):
            parts.append(name[last:i])
            last = i + 2
            i += 2
            continue
        i += 1
    parts.append(name[last:])
    return parts


def fit(name: str, width: int, *, collapse: bool = True) -> str:
    """`name` in at most `width` characters, cut in the middle so the last component
    stays: `std::_Rb_tree<…>::_M_insert_unique(…)` -> `std::…::_M_insert_unique(…)`.

    Leading components that go are marked (`…::`, or `…` where that is all the room
    left); with `collapse`, a last component too long for the room loses its parameter
    list (`(…)`) before anything of its name is cut."""
    if width <= 0:
        return ""
    if len(name) <= width:
        return name
    if width == 1:
        return ELLIPSIS
    parts = components(name)
    last = parts[-1]
    if collapse and len(last) + (3 if len(parts) > 1 else 0) > width:
        short = _collapse_params(last)
        if short != last:
            return fit("::".join([*parts[:-1], short]), width, collapse=False)
    if len(parts) == 1:
        return _cut(last, width)
    # Keep the last component, then as many leading ones as fit before "…::".
    tail = ELLIPSIS + "::" + last
    if len(tail) <= width:
        head = ""
        for part in parts[:-2]:
            candidate = head + part + "::"
            if len(candidate) + len(tail) > width:
                break
            head = candidate
        return head + tail
    if len(last) < width:  # the last component, marked as cut
        return ELLIPSIS + last
    return ELLIPSIS + _cut(last, width - 1)  # its scope went too: say so


def _cut(text: str, width: int) -> str:
    """`text` (one component) in `width` characters: its start (the method's name), "…",
    and its end."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:max(0, width)]
    keep_end = min(len(text) // 3, (width - 1) // 3)
    keep_start = width - 1 - keep_end
    return text[:keep_start] + ELLIPSIS + (text[len(text) - keep_end:] if keep_end else "")


def _collapse_params(component: str) -> str:
    """`component` with its parameter list (its last top-level parentheses, when not
    empty or `void`) as `(…)`: `lower_bound(long const&) const` -> `lower_bound(…) const`."""
    groups = [g for g in _groups(component) if component[g[0]] == "("]
    if not groups:
        return component
    start, end = groups[-1]
    inner = component[start + 1:end].strip()
    if not inner or inner == "void" or inner == ELLIPSIS:
        return component
    return component[:start] + "(" + ELLIPSIS + ")" + component[end + 1:]


def fit_distinct(labels: Iterable[str], width: int) -> dict[str, str]:
    """Each distinct label in at most `width` characters, no two alike (see `Fitter`).
    Test seam: the panes use a `Fitter` they keep."""
    fitter = Fitter()
    fitter.add(labels, width)
    return dict(fitter.fitted)


class Fitter:
    """Labels cut to one width (`fit`), kept distinct from each other as labels arrive.

    A cut can remove what told two labels apart (`std::map<…>::lower_bound(long
    const&)` and `std::_Rb_tree<…>::lower_bound(long const&)` both become
    `std::…::lower_bound(long const&)` in 32 columns).  The labels of such a group
    are then cut differently, the first way that keeps them apart: their parameter
    lists and templates collapsed, then the components from the first one that
    differs on; else they are numbered `#1`, `#2` in the order of their full labels
    (the status line shows the whole name)."""

    def __init__(self) -> None:
        self.width = -1
        self.fitted: dict[str, str] = {}  # label -> as shown
        self._owners: dict[str, set[str]] = {}  # shown -> the labels shown that way

    def add(self, labels: Iterable[str], width: int) -> bool:
        """Fit the `labels` not seen yet (all of them after a change of `width`); True
        when a label fitted earlier is now shown differently (redraw it)."""
        if width != self.width:
            self.width = width
            self.fitted.clear()
            self._owners.clear()
        changed = False
        for label in labels:
            if label in self.fitted:
                continue
            shown = fit(label, width)
            owners = self._owners.get(shown)
            if owners:
                changed = self._separate({label, *owners}) or changed
            else:
                self._show(label, shown)
        return changed

    def get(self, label: str, width: int) -> str:
        """`label` as shown at `width` (added if new)."""
        if width != self.width or label not in self.fitted:
            self.add((label,), width)
        return self.fitted[label]

    def _show(self, label: str, shown: str) -> None:
        old = self.fitted.get(label)
        if old is not None:
            self._owners[old].discard(label)
        self.fitted[label] = shown
        self._owners.setdefault(shown, set()).add(label)

    def _separate(self, group: set[str]) -> bool:
        """Show the labels of `group`, which one cut made alike, distinctly."""
        ordered = sorted(group)
        taken = {s for s, owners in self._owners.items() if owners - group}
        for way in (_collapsed, _from_difference):
            shown = [way(label, ordered, self.width) for label in ordered]
            if len(set(shown)) == len(shown) and not taken & set(shown):
                break
        else:
            shown = [fit(label, self.width - len(f" #{k}")) + f" #{k}"
                     for k, label in enumerate(ordered, 1)]
        changed = any(label in self.fitted for label in ordered)
        for label, text in zip(ordered, shown, strict=True):
            self._show(label, text)
        return changed


def _collapsed(label: str, _group: list[str], width: int) -> str:
    return fit(shorten(label, "params"), width)


def _from_difference(label: str, group: list[str], width: int) -> str:
    """`label` from its first component that differs within `group` on (the scope that
    tells them apart), parameters collapsed, marked as cut at the front."""
    parts = components(shorten(label, "params"))
    others = [components(shorten(g, "params")) for g in group if g != label]
    first = 0
    while first < len(parts) - 1 and all(first < len(o) and o[first] == parts[first]
                                         for o in others):
        first += 1
    rest = "::".join(parts[first:])
    text = rest if first == 0 else ELLIPSIS + "::" + rest
    return text if len(text) <= width else _cut(text, width)


def distinct_labels(names: Iterable[str], mode: str) -> dict[str, str]:
    """The label of each distinct name in `mode`, distinct from each other.

    Two different names whose labels collide fall back to the next longer mode
    (params -> templates), so two overloads show their parameters; names that still
    collide (two instantiations of one template) are numbered `#1`, `#2`... in the
    order of their full names, which the status line shows."""
    unique = list(dict.fromkeys(names))
    labels = {n: shorten(n, mode) for n in unique}
    if mode == "params":
        for group in _clashes(labels):
            for n in group:
                labels[n] = shorten(n, "templates")
    if mode != "full":
        for group in _clashes(labels):
            for k, n in enumerate(sorted(group), 1):
                labels[n] = f"{labels[n]} #{k}"
    return labels


def _clashes(labels: dict[str, str]) -> list[list[str]]:
    """Groups of names that share a label."""
    seen: dict[str, list[str]] = {}
    for name, label in labels.items():
        seen.setdefault(label, []).append(name)
    return [group for group in seen.values() if len(group) > 1]


class Labeler:
    """`distinct_labels` kept up to date as names arrive, for a view refreshed live.

    `add` shortens only names not seen before (a live snapshot repeats almost
    all of them), and a label is made distinct only within its group of
    colliding names, when asked for; `clean` (e.g. `display`) is applied to a
    name before shortening."""

    def __init__(self, mode: str, clean: Callable[[str], str] = str) -> None:
        self.mode = mode
        self.clean = clean
        self._short: dict[str, str] = {}  # raw name -> shortened label
        self._groups: dict[str, list[str]] = {}  # shortened label -> raw names that have it
        self._distinct: dict[str, dict[str, str]] = {}  # label -> its group's labels

    @property
    def known(self) -> int:
        """How many names have a label (grows as `add` meets new ones)."""
        return len(self._short)

    def add(self, names: Iterable[str]) -> None:
        short = self._short
        names = names if isinstance(names, list) else list(names)
        if short.keys() >= set(names):
            return  # none new (the loop below costs tens of ms at 50,000 names)
        for name in names:
            if name not in short:
                label = shorten(self.clean(name), self.mode)
                short[name] = label
                self._groups.setdefault(label, []).append(name)
                self._distinct.pop(label, None)  # the group grew: its labels change

    def label(self, name: str) -> str:
        """The label of `name` (added first if new)."""
        label = self._short.get(name)
        if label is None:
            self.add((name,))
            label = self._short[name]
        group = self._groups[label]
        if len(group) == 1:
            return label
        distinct = self._distinct.get(label)
        if distinct is None:
            cleaned = {n: self.clean(n) for n in group}
            shown = distinct_labels(cleaned.values(), self.mode)
            distinct = self._distinct[label] = {n: shown[c] for n, c in cleaned.items()}
        return distinct[name]
