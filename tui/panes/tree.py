"""Call tree pane: top-down, bottom-up, or focused on one function (callers and callees).

Tree children are created only when a node is expanded (a 200,000-node tree
mounts instantly), capped at `MAX_CHILDREN` per node plus a "more" row that
loads the next batch.  Live refreshes rebuild the view and re-expand the same
paths (paths are matched by `Frame`, since frame ids change between snapshots).
With a baseline (the app's `baseline`) each row shows its change (tree_delta.py).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from proftui.collectors.model.profile import CallNode, CallTree, Frame, Profile
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry, group_part, is_group_frame
from proftui.tui.format import format_cost, heat_style, metric_label, percent
from proftui.tui.names import Fitter, distinct_labels, shorten
from proftui.tui.panes.base import Command, NavState, Pane, SelectPart, View, drill
from proftui.tui.panes.tree_delta import TreeDeltas, base_trees
from proftui.tui.panes.tree_derive import Derived, Need, ahead_needs, derive
from proftui.tui.panes.tree_search import TreeSearch
from proftui.tui.panes.tree_state import restore_state, save_state
from proftui.tui.widgets.search_prompt import SearchPrompt
from proftui.tui.widgets.status_line import NameSelected, SettingChanged, tell_selection
from proftui.tui.widgets.tree_labels import set_label_quietly
from rich.text import Text
from textual import work
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

MAX_CHILDREN = 50
# Textual builds its line table recursively, copying the path for every line: rows
# deeper than this are not offered (a 100,000-deep recursion would overflow the stack).
MAX_VIEW_DEPTH = 200
HOT_CUTOFF = 0.01  # the hot path stops at children below 1% of the whole
GONE_KEY = "…gone"  # a row's key (with the baseline's frame id): a context only BASE has
FOCUS_AHEAD_S = 0.05  # a selection at rest this long has its focus view derived ahead
MAX_TRUNK = 30  # a fresh top-down view opens at most this many single-child rows


@dataclass
class NodeData:
    """What a tree row stands for: a call node, a section header, or "more children"."""

    call: CallNode | None
    key: object  # Frame, or a header name; a row's path of keys survives a refresh
    whole: float  # the total the percentages are of
    populated: int = 0  # how many children rows were added
    more: bool = False  # the "N more" row
    inverted: bool = False  # a callers tree: children are callers, "self" means nothing


State = tuple[list[tuple[object, ...]], tuple[object, ...] | None]  # tree_state.save_state

class CallTreeView(Pane, Tree[NodeData]):
    """The Textual tree plus profile-aware actions; Enter opens the source."""

    KEY, PANE_ID, TITLE, TAB = "2", "tree", "Call tree", "Tree"
    HINT = "Top-down call tree"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_source", "Source"),
        Binding("space", "toggle_node", "Expand", show=True),
        Binding("h", "hot_path", "Hot path"),
        Binding("u", "toggle_view", "Bottom-up/top-down"),
        Binding("f", "focus_function", "Focus function"),
        Binding("T", "thread_roots", "Thread roots"),
        Binding("slash", "search", "Search"),
        Binding("n", "search_next(1)", "Next match", show=False),
        Binding("N", "search_next(-1)", "Previous match", show=False),
        Binding("percent_sign", "toggle_percent", "% total/parent", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__("call tree", **kwargs)  # type: ignore[arg-type]
        self.auto_expand = False
        self.show_root = False
        self.guide_depth = 2
        self.profile: Profile | None = None
        self.metric = 0
        self.view: View = "top-down"
        self.focus_frame: Frame | None = None
        self.thread_roots = False  # `T`: one root per thread (process) at the top
        self._shown_part: tuple[str | None, bool] = (None, False)  # (part, thread_roots) shown
        self.pending = False  # a derived tree is being computed in a worker
        self.view_profile: Profile | None = None  # the profile the shown rows come from
        self.freeze_results = False  # gc.freeze() derived trees (saved profiles: they stay)
        # need -> (the snapshot it was derived from, the profile its rows index, trees,
        # the baseline and its trees of the same view)
        self._derived: dict[Need, Derived] = {}
        # Computed ahead (tree_derive.ahead_needs) for `_ahead_profile`: kept in the cache;
        # those still being computed; the view waiting for one of them (and its state).
        self._ahead_profile: Profile | None = None
        self._ahead_kept: set[Need] = set()
        self._ahead_running: set[Need] = set()
        self._waiting: tuple[Need, Profile, State | None] | None = None
        self._focus_ahead: Need | None = None  # the one focus view derived ahead (focus_ahead)
        self._focus_timer: Timer | None = None
        self.name_mode = "full"  # tui.names.MODES
        self.percent_of_parent = False  # `%`: a row's share of its parent, not of the whole
        self.search = TreeSearch(self)
        self.deltas = TreeDeltas()
        # room -> the names cut to it: rows cut to the same room never read alike
        self._fitters: dict[int, Fitter] = {}

    # -- pane hooks (tui.panes.base.Pane) --------------------------------------------

    @classmethod
    def label(cls, state: NavState) -> str:
        if state.focus is not None:  # a trail label: short, the status line has it whole
            return f"tree: {shorten(display(state.focus.function), 'params')}"
        return cls.TITLE if state.tree_view == "top-down" else f"tree: {state.tree_view}"

    def begin(self, live: bool, has_profile: bool) -> None:
        self.freeze_results = not live and has_profile

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        if state is not None:  # hidden: rebuilt by show_step when shown
            self.show(profile, metric=metric)
        if self.freeze_results and self._ahead_profile is None:
            # The profile as opened (not a time range of it, which the user leaves soon).
            self._ahead_profile = profile
            self.app.call_after_refresh(self._start_ahead, profile)

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        if profile is not None:
            self.show(profile, view=state.tree_view, focus=state.focus, metric=metric)

    def focus_widget(self) -> Widget | None:
        return self

    def commands(self) -> list[Command]:
        return [("Hot path (h)", "Expand the costliest call chain", self.action_hot_path),
                ("Bottom-up / top-down (u)", "Toggle the call tree direction",
                 self.action_toggle_view),
                ("Threads as roots (T)", "One root per thread (and process) in the tree",
                 self.action_thread_roots),
                ("Search the tree (/)", "Regex over every function of the tree; n/N: next, "
                 "previous", self.action_search),
                ("% of total / % of parent (%)", "Percentages of the whole or of the caller",
                 self.action_toggle_percent)]

    @property
    def status_note(self) -> str:
        """What the status line says before the selected name: percentages, search."""
        notes = ["% of parent" if self.percent_of_parent else "% of total"]
        profile = self.view_profile
        if profile is not None and self.metric < len(profile.metrics):  # what the rows sum
            notes.insert(0, metric_label(profile.metrics[self.metric]))
        if self.search.note:
            notes.append(self.search.note)
        return " · ".join(notes)

    def announce(self) -> None:
        """Tell the status line about the selection (and the notes)."""
        tell_selection(self, NameSelected(self.PANE_ID, self.selected_frame(), self.status_note))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[NodeData]) -> None:
        self.announce()

    # -- building --------------------------------------------------------------------

    def label_for(self, call: CallNode, whole: float, inverted: bool = False,
                  name: str | None = None, parent: CallNode | None = None,
                  depth: int = 0) -> Text:
        """A row's text; `name` is the function as shown (shortened), `parent` the
        caller whose total the percentages are of when `percent_of_parent` is on;
        a shortened name is cut in the middle to fit a row `depth` levels deep."""
        profile = self.view_profile
        assert profile is not None
        m = self.metric
        unit = profile.metrics[m].unit if profile.metrics else "count"
        total = call.total_cost[m] if call.total_cost else 0.0
        own = call.self_cost[m] if call.self_cost else 0.0
        frame = profile.frames[call.frame_id]
        base = whole
        if self.percent_of_parent and parent is not None and parent.total_cost:
            base = parent.total_cost[m]
        text = Text()
        text.append(f"{percent(total, base):5.1f}% ", style=heat_style(total / whole if whole
                                                                       else 0))
        text.append(f"{format_cost(total, unit):>8} ", style="")
        delta = self.deltas.cell(call, profile, self.part, m, unit)
        if delta is not None:
            text.append_text(delta)
        if not inverted and not is_group_frame(frame):  # a thread row has no code of its own
            text.append(f"self {percent(own, base):4.1f}% ", style="dim")
        shown = name if name is not None else display(frame.function)
        if self.name_mode != "full":  # "full" means full: the row scrolls instead
            width = self.size.width or self.app.size.width
            room = width - 2 * depth - len(text) - 6 - (len(" [inlined]") if frame.inlined else 0)
            room = max(24, room)
            shown = self._fitters.setdefault(room, Fitter()).get(shown, room)
        text.append(shown, style="bold" if whole and total / whole >= 0.05 else "")
        if frame.inlined:  # as perf and pprof mark them: no call happened here
            text.append(" [inlined]", style="italic dim")
        if call.calls is not None:
            text.append(f"  ×{call.calls:,}", style="cyan")
        if frame.module_name:
            text.append(f"  {display(frame.module_name)}", style="dim")
        return text

    def populate(self, node: TreeNode[NodeData]) -> None:
        """Add the next batch of `node`'s children (costliest first)."""
        data = node.data
        if data is None or data.call is None:
            return
        children = data.call.children
        if data.populated >= len(children):
            return
        if self._depth(node) >= MAX_VIEW_DEPTH:
            data.populated = len(children)
            node.add_leaf(Text(f"… calls deeper than {MAX_VIEW_DEPTH} levels are not shown "
                               "(f focuses a function)", style="dim italic"),
                          NodeData(None, "…deep", data.whole))
            return
        m = self.metric
        ordered = sorted(children.values(), key=lambda c: -c.total_cost[m])
        assert self.view_profile is not None
        # Drop a previous "more" row: the next batch replaces it.
        for child in list(node.children):
            if child.data is not None and child.data.more:
                child.remove()
        batch = ordered[data.populated:data.populated + MAX_CHILDREN]
        frames = self.view_profile.frames
        labels = self._labels([frames[call.frame_id] for call in batch])
        depth = self._depth(node) + 1
        for call in batch:
            frame = frames[call.frame_id]
            node.add(self.label_for(call, data.whole, data.inverted, labels.get(frame.function),
                                    data.call, depth),
                     NodeData(call, frame, data.whole, inverted=data.inverted),
                     allow_expand=bool(call.children))
        data.populated += len(batch)
        rest = ordered[data.populated:]
        if rest:
            cost = sum(c.total_cost[m] for c in rest)
            label = Text(f"… {len(rest):,} more ({percent(cost, data.whole):.1f}%) "
                         "— Enter to show", style="dim italic")
            node.add_leaf(label, NodeData(None, "…more", data.whole, more=True))
        else:  # after the last batch: what the baseline called here and NEW does not
            self._add_gone(node, data.call)

    def _add_gone(self, node: TreeNode[NodeData], call: CallNode) -> None:
        profile = self.view_profile
        assert profile is not None
        unit = profile.metrics[self.metric].unit if profile.metrics else "count"
        for base in self.deltas.gone(call, self.metric):
            node.add_leaf(self.deltas.gone_label(base, profile, self.part, self.metric, unit),
                          NodeData(None, (GONE_KEY, base.frame_id), 0.0))

    def _labels(self, frames: list[Frame]) -> dict[str, str]:
        """Shown names of sibling rows, keyed by full name (distinct among the siblings)."""
        if self.name_mode == "full":
            return {}
        # Thread rows of `T` ("thread 13 worker-2") are not C++ names: never shortened.
        full = {f.function: display(f.function) for f in frames if not is_group_frame(f)}
        shown = distinct_labels(full.values(), self.name_mode)
        return {raw: shown[safe] for raw, safe in full.items()}

    def relabel(self) -> None:
        """Redraw every row's text (names mode or percentages changed)."""
        profile = self.view_profile
        if profile is None:
            return
        self._fitters.clear()
        stack = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            rows = [c for c in node.children if c.data is not None and c.data.call is not None
                    and not c.data.more and node.data is not None]
            if rows and node.data is not None:
                labels = self._labels([profile.frames[c.data.call.frame_id] for c in rows
                                       if c.data is not None and c.data.call is not None])
                for child in rows:
                    d = child.data
                    assert d is not None and d.call is not None
                    function = profile.frames[d.call.frame_id].function
                    set_label_quietly(child, self.label_for(
                        d.call, d.whole, d.inverted, labels.get(function), node.data.call,
                        depth + 1))
            stack.extend((child, depth + 1) for child in node.children)
        self.refresh()  # once: TreeNode.set_label schedules a refresh per node
        self.announce()

    def set_name_mode(self, mode: str) -> None:
        """Show function names in `mode` (tui.names.MODES)."""
        if mode != self.name_mode:
            self.name_mode = mode
            self.relabel()

    def _depth(self, node: TreeNode[NodeData]) -> int:
        depth, current = 0, node
        while current.parent is not None and depth <= MAX_VIEW_DEPTH:
            depth, current = depth + 1, current.parent
        return depth

    def _cut_note(self, parent: TreeNode[NodeData], tree: CallTree) -> None:
        """Say that an inverted tree left out deep callers (views.INVERTED_MAX_DEPTH)."""
        if tree.cut_depth is not None:
            parent.add_leaf(Text(f"… callers more than {tree.cut_depth} levels up are cut",
                                 style="dim italic"), NodeData(None, "…cut", 0.0))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeData]) -> None:
        if event.node.data is not None and event.node.data.populated == 0:
            self.populate(event.node)

    def _section(self, label: str, tree: CallTree, key: str, inverted: bool,
                 whole: float) -> TreeNode[NodeData]:
        """A focus view's section; its rows' percentages are of `whole` (the part's total)."""
        return self.root.add(Text(label, style="bold underline"),
                             NodeData(tree.root, key, whole, inverted=inverted),
                             allow_expand=True)

    def show(self, profile: Profile, view: View | None = None, focus: Frame | None = None,
             metric: int | None = None) -> None:
        """(Re)build the view; keeps expanded paths and the cursor when the view is the same.

        Bottom-up and focused trees are derived in a thread worker (seconds on a
        200,000-node profile); until then a placeholder (or, on a live refresh, the
        previous tree) stays on screen.
        """
        same = (view is None or view == self.view) and (focus is None or focus == self.focus_frame)
        same = same and self._shown_part == (self.part, self.thread_roots)
        if metric is not None:
            same = same and metric == self.metric
            self.metric = metric
        if same and self.pending:
            return  # a live refresh while deriving: show that result first, then refresh
        state = save_state(self) if same and self.view_profile is not None else None
        self.profile = profile
        if view is not None:
            self.view = view
        if focus is not None:
            self.focus_frame = focus
        self._shown_part = (self.part, self.thread_roots)
        if self.view == "top-down" and not self.thread_roots and (
                self.part is None or self.part in profile.parts):
            tree = profile.tree if self.part is None else profile.parts[self.part]
            baseline = self._baseline()
            bases = base_trees(baseline, "top-down", None, self.part) if baseline else ()
            self._build_view(profile, (tree,), state, baseline, bases)
            return
        need = self._need()
        cached = self._derived.get(need)
        if cached is not None and cached[0] is profile and cached[3] is self._baseline():
            self._build_view(cached[1], cached[2], state, cached[3], cached[4])
            return
        if not same or self.pending or not self.root.children:
            self.clear()
            self.root.data = None
            what = {"focus": "callers and callees", "bottom-up": "the bottom-up tree"}.get(
                self.view, "the tree")
            self.root.add_leaf(Text(f"computing {what}…", style="italic dim"))
            self.root.expand()
        self.pending = True
        self._waiting = None
        if need in self._ahead_running and profile is self._ahead_profile and \
                self._baseline() is None:
            self._waiting = (need, profile, state)  # _ahead_ready shows it
            return
        self._derive(profile, need, state, self._baseline())

    def _baseline(self) -> Profile | None:
        """The app's baseline (aligned onto the profile shown), if any."""
        return getattr(self.app, "baseline", None)

    @work(thread=True, exclusive=True, group="derive-tree")
    def _derive(self, profile: Profile, need: Need, state: State | None,
                baseline: Profile | None = None) -> None:
        _, shown, trees, _, bases = derive(profile, need, baseline)
        self.app.call_from_thread(self._derived_ready, profile, need, trees, state, shown,
                                  baseline, bases)

    def _start_ahead(self, profile: Profile) -> None:
        """Derive the likely next trees of a saved profile (tree_derive.ahead_needs)."""
        if profile is not self._ahead_profile or self._baseline() is not None:
            return  # a baseline's trees come with it: derived when asked
        needs = [n for n in ahead_needs(profile, self.part)
                 if n not in self._derived or self._derived[n][0] is not profile]
        self._ahead_kept = set(needs)
        self._ahead_running = set(needs)
        if needs:
            self._derive_ahead(profile, needs)

    @work(thread=True, exclusive=True, group="derive-ahead")
    def _derive_ahead(self, profile: Profile, needs: list[Need]) -> None:
        worker = get_current_worker()
        for need in needs:
            derived = derive(profile, need, None)
            if worker.is_cancelled:  # the app is closing: no event loop to hand it to
                return
            self.app.call_from_thread(self._ahead_ready, derived, need)

    def focus_ahead(self, frame: Frame) -> None:
        """Derive `frame`'s focus view (Enter on the flat profile, `f` here) once the
        selection has rested FOCUS_AHEAD_S on it, while the user reads: a saved profile
        only, and one such view at a time (a newer selection drops the older one)."""
        if self._focus_timer is not None:
            self._focus_timer.stop()
            self._focus_timer = None
        profile = self._ahead_profile  # the saved profile as opened (show_profile)
        shown = getattr(self.app, "profile", None)
        if profile is None or self._baseline() is not None or id(shown) != id(profile):
            return  # live, a baseline, or a time range is shown
        need: Need = ("focus", frame, self.part, False)
        if need == self._focus_ahead or (need in self._derived and
                                         self._derived[need][0] is profile):
            return
        self._focus_timer = self.set_timer(FOCUS_AHEAD_S,
                                           partial(self._start_focus_ahead, profile, need))

    def _start_focus_ahead(self, profile: Profile, need: Need) -> None:
        self._focus_timer = None
        if self.pending or profile is not self._ahead_profile:
            return  # a view is being derived or awaited (perhaps the older one): let it be
        if self._focus_ahead is not None:
            self._ahead_running.discard(self._focus_ahead)  # its worker is cancelled below
        self._focus_ahead = need
        self._ahead_running.add(need)
        self._derive_focus_ahead(profile, need)

    @work(thread=True, exclusive=True, group="derive-focus-ahead")
    def _derive_focus_ahead(self, profile: Profile, need: Need) -> None:
        derived = derive(profile, need, None)
        if not get_current_worker().is_cancelled:  # else a newer one (or the app's end)
            self.app.call_from_thread(self._ahead_ready, derived, need)

    def _ahead_ready(self, derived: Derived, need: Need) -> None:
        self._ahead_running.discard(need)
        if need == self._focus_ahead:
            self._focus_ahead = None
        profile, shown, trees, baseline, bases = derived
        if profile is not self._ahead_profile:
            return
        self._store(need, derived)
        waiting = self._waiting
        if waiting is not None and waiting[:2] == (need, profile):
            self._waiting = None
            if self.pending and need == self._need():
                self._build_view(shown, trees, waiting[2], baseline, bases)

    def _store(self, need: Need, derived: Derived) -> None:
        """Cache a derived view: a few recent ones, and those computed ahead."""
        self._derived[need] = derived
        if len(self._derived) > 4 + len(self._ahead_kept):  # Escape back is instant
            oldest = next((n for n in self._derived if n not in self._ahead_kept), None)
            if oldest is not None:
                del self._derived[oldest]
        if self.freeze_results:
            # Long-lived trees of a saved profile: keep them out of the cyclic GC's
            # full scans (a second-long pause per scan at 200,000 nodes).
            gc.freeze()

    def _need(self) -> Need:
        return (self.view, self.focus_frame if self.view == "focus" else None, self.part,
                self.thread_roots and self.view != "focus")

    def _derived_ready(self, profile: Profile, need: Need, trees: tuple[CallTree, ...],
                       state: State | None,
                       shown: Profile | None = None, baseline: Profile | None = None,
                       bases: tuple[CallTree, ...] = ()) -> None:
        if need != self._need():
            return  # the user moved on meanwhile (a newer snapshot of the same view is fine)
        self._store(need, (profile, shown or profile, trees, baseline, bases))
        self.pending = False
        self._build_view(shown or profile, trees, state, baseline, bases)

    def _build_view(self, profile: Profile, trees: tuple[CallTree, ...], state: State | None,
                    baseline: Profile | None = None, bases: tuple[CallTree, ...] = ()
                    ) -> None:
        self.pending = False
        self.view_profile = profile
        self.deltas.set(baseline, trees, bases, getattr(self.app, "normalise", "shares"))
        # The matches point into the previous tree; a new view (not a refresh of the
        # same one, which keeps the expanded rows in `state`) also drops the "match k of n".
        self.search.forget(keep_note=state is not None)
        self._fitters.clear()
        self.clear()
        m = self.metric
        if self.view == "focus" and self.focus_frame is not None:
            name = shorten(display(self.focus_frame.function), self.name_mode)
            if not trees:
                self.root.add_leaf(Text(f"{name} is not in this profile", style="italic"))
                self.root.expand()
                return
            whole = trees[2].root.total_cost[m] if trees[2].n_metrics else 0.0
            own = trees[0].root.total_cost[m] if trees[0].n_metrics else 0.0
            callees = self._section(f"{name} and what it calls ({percent(own, whole):.1f}% "
                                    "of total)", trees[0], "callees", False, whole)
            callers = self._section(f"who calls {name}", trees[1], "callers", True, whole)
            self._cut_note(self.root, trees[1])
            self.root.data = None
            if state is None:
                for section in (callees, callers):
                    self.populate(section)
                    section.expand()
                    for child in section.children:
                        self.populate(child)
                        child.expand()
                state = ([], ("callees", self.focus_frame))  # cursor on the function itself
        else:
            tree = trees[0]
            whole = tree.root.total_cost[m] if tree.n_metrics else 0.0
            self.root.data = NodeData(tree.root, "root", whole,
                                      inverted=self.view == "bottom-up")
            self.populate(self.root)
            self._cut_note(self.root, tree)
        self.root.expand()
        if state is not None:
            restore_state(self, *state)
        else:
            if self.view == "top-down":
                self._open_trunk()
            self.move_to(self.root.children[0] if self.root.children else None)

    def _open_trunk(self) -> None:
        """Expand the single-child chain at the top (`_start` -> `__libc_start_main` ->
        `main`, as a fresh view would otherwise show one collapsed row), down to the
        first row with several callees."""
        node = self.root
        for _ in range(MAX_TRUNK):
            rows = [c for c in node.children if c.data is not None and c.data.call is not None]
            if len(rows) != 1 or len(node.children) != 1:
                return
            node = rows[0]
            self.populate(node)
            node.expand()

    def move_to(self, node: TreeNode[NodeData] | None) -> None:
        """Put the cursor on `node` now (the line table is rebuilt first)."""
        if node is None:
            return
        self._tree_lines  # noqa: B018 - builds the line table so node.line is valid
        self.move_cursor(node)

    # -- actions ---------------------------------------------------------------------

    def selected_frame(self) -> Frame | None:
        node = self.cursor_node
        if node is None or node.data is None or not isinstance(node.data.key, Frame) or \
                is_group_frame(node.data.key):  # a thread row of `T`: no code to show
            return None
        return node.data.key

    def action_open_source(self) -> None:
        node = self.cursor_node
        if node is None or node.data is None:
            return
        if node.data.more and node.parent is not None:
            parent = node.parent
            self.populate(parent)
            return
        if isinstance(node.data.key, tuple) and node.data.key[:1] == (GONE_KEY,):
            self.notify("gone: this call path is only in the baseline (no cost here)")
            return
        group = self._group_part(node)
        if group is not None:  # Enter on a thread (process) row: show that one only
            self.post_message(SelectPart(group))
            return
        frame = self.selected_frame()
        if frame is not None:
            self.post_message(drill("source", source=frame))

    def _group_part(self, node: TreeNode[NodeData]) -> str | None:
        """The part label of a `T` thread/process row, or None for any other row."""
        key = node.data.key if node.data is not None else None
        return group_part(key) if isinstance(key, Frame) else None

    def action_hot_path(self) -> None:
        """Expand the costliest chain below the cursor and put the cursor at its end."""
        node = self.cursor_node or self.root
        while node.data is not None and node.data.call is not None:
            if node.data.populated == 0:
                self.populate(node)
            child = next((c for c in node.children if c.data is not None and not c.data.more),
                         None)
            if child is None or child.data is None or child.data.call is None:
                break
            whole = child.data.whole
            if whole <= 0 or child.data.call.total_cost[self.metric] < HOT_CUTOFF * whole:
                break
            node.expand()
            node = child
        self.move_to(node if node is not self.root else None)

    def action_toggle_view(self) -> None:
        view = "top-down" if self.view == "bottom-up" else "bottom-up"
        self.post_message(drill("tree", tree_view=view, focus=None))

    def action_thread_roots(self) -> None:
        """Toggle one root per thread (per process, then thread, with several processes)."""
        if not self.thread_roots and self.profile is not None and not self.profile.parts:
            self.notify("this profile has no per-thread data (one thread, or a collector "
                        "that does not record threads)")
            return
        self.thread_roots = not self.thread_roots
        if self.view == "focus":
            self.notify("threads as roots " + ("on" if self.thread_roots else "off")
                        + ": shown in the top-down and bottom-up trees")
        if self.profile is not None:
            self.show(self.profile)

    def action_focus_function(self) -> None:
        frame = self.selected_frame()
        if frame is not None:
            self.post_message(drill("tree", tree_view="focus", focus=frame))

    def action_toggle_percent(self) -> None:
        self.percent_of_parent = not self.percent_of_parent
        self.relabel()
        self.post_message(SettingChanged())
        self.notify("percentages of the " + ("parent" if self.percent_of_parent
                                             else "total"))

    def action_search(self) -> None:
        def done(pattern: str | None) -> None:
            if pattern:
                self.search.start(pattern)
            self.focus()

        self.screen.query_one(SearchPrompt).ask(self.search.pattern, "the call tree", done)

    def action_search_next(self, step: int) -> None:
        if not self.search.pattern:
            self.notify("no search yet: / searches the tree")
            return
        self.search.step(step)
