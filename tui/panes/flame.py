"""Flame graph pane (`5`): the calling-context tree as a flame graph or icicle, and the
sandwich view of one function (its callers as an inverted flame above, its callees below,
as speedscope draws it).

The graph is `tui.widgets.flame_graph.FlameGraph`; this pane feeds it the tree of the
shown thread (`part`) and metric, the baseline when the app has one (`app.baseline`,
aligned on the shown profile's frame ids: a differential flame graph), runs the search
prompt, and writes the status line under the graph: the selected frame's name, total
and self cost and share, the zoom breadcrumb, and the search's combined share.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from proftui.collectors.model.flame import ShareWalk, cost_of
from proftui.collectors.model.profile import CallTree, Frame, FrameTable, Profile
from proftui.collectors.model.textsafe import display
from proftui.collectors.model.views import FlatEntry, callee_tree, caller_tree, select_tree
from proftui.tui.format import format_cost, percent
from proftui.tui.names import shorten
from proftui.tui.panes.base import Command, NavState, Pane, drill
from proftui.tui.search import FrameMatcher
from proftui.tui.widgets.flame_graph import FlameGraph
from proftui.tui.widgets.search_prompt import SearchPrompt
from proftui.tui.widgets.status_line import NameSelected, SettingChanged, tell_selection
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

SHARE_SLICE = 20_000  # tree nodes per slice of the search share (a few ms)


class FlamePane(Pane, Vertical):
    """Flame graph of the current metric; `v` the sandwich of the selected function."""

    KEY, PANE_ID, TITLE, TAB = "5", "flame", "Flame graph", "Flame"
    HINT = "Flame graph of the call tree (zoom, search, sandwich)"

    DEFAULT_CSS = """
    FlamePane { height: 1fr; }
    FlamePane FlameGraph { height: 1fr; }
    FlamePane #flame-sandwich { height: 1fr; display: none; }
    FlamePane .flame-title { height: 1; text-style: bold; }
    FlamePane #flame-info { height: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "toggle_icicle", "Icicle",
                tooltip="Root at the bottom (flame) or at the top (icicle)"),
        Binding("v", "sandwich", "Sandwich",
                tooltip="The selected function's callers above it and callees below"),
        Binding("f", "focus_tree", "Tree", show=False,
                tooltip="Open the selected function in the call tree (callers and callees)"),
        Binding("s", "source", "Source", show=False,
                tooltip="Open the selected function's source"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.profile: Profile | None = None
        self.metric = 0
        self.call_tree: CallTree | None = None
        self.pattern = ""
        self.matcher: FrameMatcher | None = None
        self.share: float | None = None  # the search's combined share of the whole
        self._share_key: tuple[object, ...] = ()
        self.sandwich: Frame | None = None  # the function of the sandwich view
        self._part_trees: tuple[object, ...] = ()  # (profile, part, tree, base, base tree)
        self.last_graph = "flame-graph"  # the graph of the view that had the focus
        self.sandwich_pending = False  # the sandwich's trees are being derived

    def compose(self) -> ComposeResult:
        yield FlameGraph(id="flame-graph")
        with Vertical(id="flame-sandwich"):
            yield Static("", id="sandwich-callers-title", classes="flame-title", markup=False)
            yield FlameGraph(icicle=False, show_root=False, id="sandwich-callers")
            yield Static("", id="sandwich-callees-title", classes="flame-title", markup=False)
            yield FlameGraph(icicle=True, show_root=False, id="sandwich-callees")
        yield Static("", id="flame-info", markup=False)

    @property
    def graph(self) -> FlameGraph:
        return self.query_one("#flame-graph", FlameGraph)

    def graphs(self) -> list[FlameGraph]:
        return list(self.query(FlameGraph))

    # -- pane hooks ------------------------------------------------------------------

    def on_mount(self) -> None:
        settings = getattr(self.app, "settings", None)
        self.graph.icicle = bool(getattr(settings, "flame_icicle", False))

    def show_profile(self, profile: Profile, entries: list[FlatEntry], metric: int,
                     state: NavState | None) -> None:
        self.profile, self.metric = profile, metric
        if state is not None:  # hidden: redrawn by show_step when shown
            self.redraw()

    def show_step(self, profile: Profile | None, state: NavState, metric: int) -> None:
        self.profile, self.metric = profile, metric
        self.redraw()

    def focus_widget(self) -> Widget | None:
        if self.sandwich is None:
            return self.graph
        return self.query_one(f"#{self.last_graph}", FlameGraph) \
            if self.last_graph != "flame-graph" else self.query_one("#sandwich-callees",
                                                                    FlameGraph)

    def selected_frame(self) -> Frame | None:
        return self._current().selected_frame()

    def set_name_mode(self, mode: str) -> None:
        for graph in self.graphs():
            graph.set_name_mode(mode)

    def commands(self) -> list[Command]:
        return [("Flame / icicle (i)", "Root at the bottom or at the top",
                 self.action_toggle_icicle),
                ("Sandwich view (v)", "Callers above the selected function, callees below",
                 self.action_sandwich),
                ("Search the flame graph (/)", "Regex: matching frames highlighted, their "
                 "combined share shown; n/N: next, previous", self.on_flame_graph_search)]

    # -- data ------------------------------------------------------------------------

    def _trees(self) -> tuple[CallTree, CallTree | None]:
        """The shown part's tree and the baseline's (cached per snapshot and part)."""
        assert self.profile is not None
        base = getattr(self.app, "baseline", None)
        cached = self._part_trees
        if cached and cached[0] is self.profile and cached[1] == self.part and cached[3] is base:
            return cached[2], cached[4]  # type: ignore[return-value]
        tree = select_tree(self.profile, self.part)
        base_tree = select_tree(base, self.part) if isinstance(base, Profile) else None
        self._part_trees = (self.profile, self.part, tree, base, base_tree)
        return tree, base_tree

    def redraw(self) -> None:
        """Give the graphs the current snapshot, metric, part and baseline."""
        if self.profile is None:
            self._info(Text(" no profile yet", style="italic"))
            return
        tree, base_tree = self._trees()
        self.call_tree = tree
        normalise = str(getattr(self.app, "normalise", "shares"))
        self.graph.set_tree(tree, self.profile.frames, self.metric, base_tree, normalise)
        if self.matcher is not None and self.matcher.table is not self.profile.frames:
            # Frame ids may mean other frames in a new snapshot: a new matcher.
            self.matcher = FrameMatcher(self.pattern, self.profile.frames)
            for graph in self.graphs():
                graph.set_matches(self.matcher)
        if self.sandwich is not None:
            self._fill_sandwich()
        self.update_info()

    def _fill_sandwich(self) -> None:
        """Derive the sandwich's trees in a worker (a walk of the whole tree: ~1 s at
        200,000 nodes); the graphs keep the previous ones until then."""
        assert self.profile is not None and self.sandwich is not None
        frame_id = self.profile.frames.find(self.sandwich)
        name = shorten(display(self.sandwich.function), "params")
        if frame_id is None:
            for graph in (self.query_one("#sandwich-callers", FlameGraph),
                          self.query_one("#sandwich-callees", FlameGraph)):
                graph.set_tree(None, None, self.metric)
            self.query_one("#sandwich-callers-title", Static).update(
                f" {name} is not in this profile")
            return
        self.sandwich_pending = True
        base = getattr(self.app, "baseline", None)
        self._sandwich_worker(self.profile, frame_id, self.part, self.sandwich, self.metric,
                              base if isinstance(base, Profile) else None)

    @work(thread=True, exclusive=True, group="flame-sandwich")
    def _sandwich_worker(self, profile: Profile, frame_id: int, part: str | None,
                         frame: Frame, metric: int, base: Profile | None) -> None:
        up = caller_tree(profile, frame_id, part)
        down = callee_tree(profile, frame_id, part)
        # The baseline is aligned on the shown profile's frame ids: the same frame id
        # names the same function in it, so its sandwich lines up frame by frame.
        base_up = caller_tree(base, frame_id, part) if base is not None else None
        base_down = callee_tree(base, frame_id, part) if base is not None else None
        self.app.call_from_thread(self._sandwich_ready, profile, frame, metric, up, down,
                                  base, base_up, base_down)

    def _sandwich_ready(self, profile: Profile, frame: Frame, metric: int, up: CallTree,
                        down: CallTree, base: Profile | None = None,
                        base_up: CallTree | None = None,
                        base_down: CallTree | None = None) -> None:
        if frame != self.sandwich or profile is not self.profile or metric != self.metric \
                or base is not getattr(self.app, "baseline", None):
            return  # the user (or a newer snapshot) moved on: its own worker follows
        self.sandwich_pending = False
        name = shorten(display(frame.function), "params")
        normalise = str(getattr(self.app, "normalise", "shares"))
        # Widths from NEW; colours by change against the baseline's sandwich.  Shares
        # are of each whole profile: the sandwich's roots hold only this function's cost.
        wholes = None
        if base is not None:
            tree, base_tree = self._trees()
            wholes = (cost_of(tree.root, metric),
                      cost_of(base_tree.root, metric) if base_tree is not None else 0.0)
        self.query_one("#sandwich-callers", FlameGraph).set_tree(
            up, profile.frames, metric, base_up, normalise, wholes)
        self.query_one("#sandwich-callees", FlameGraph).set_tree(
            down, profile.frames, metric, base_down, normalise, wholes)
        cut = f" (callers cut at {up.cut_depth} levels)" if up.cut_depth is not None else ""
        self.query_one("#sandwich-callers-title", Static).update(
            f" who calls {name} (inverted: callers above){cut}")
        self.query_one("#sandwich-callees-title", Static).update(
            f" {name} and what it calls")
        self.update_info()

    def _current(self) -> FlameGraph:
        if self.sandwich is None:
            return self.graph
        focused = self.app.focused
        if isinstance(focused, FlameGraph) and focused.id != "flame-graph":
            self.last_graph = focused.id or self.last_graph
        return self.query_one(f"#{self.last_graph}", FlameGraph) \
            if self.last_graph != "flame-graph" else self.query_one("#sandwich-callees",
                                                                    FlameGraph)

    # -- status line -----------------------------------------------------------------

    def search_share(self) -> float | None:
        """The search's combined share of the whole (each path counted once); None while
        it is being computed: in slices between key presses (`_share_slices`)."""
        if self.matcher is None or self.call_tree is None or self.profile is None:
            return None
        key = (id(self.call_tree), self.metric, self.pattern, self.matcher)
        if key != self._share_key:
            self._share_key = key
            self.share = None
            slices = self._share_slices(self.call_tree, self.metric, self.matcher)
            self.call_after_refresh(self._share_step, key, slices)
        return self.share

    def _share_slices(self, tree: CallTree, metric: int, matcher: FrameMatcher
                      ) -> Iterator[float | None]:
        """Yields None after each slice of work, then the share.  Slices, not a thread:
        a thread walking the tree would hold the GIL against the key presses."""
        walk = ShareWalk(tree, metric, matcher.every_frame())
        while not walk.run(SHARE_SLICE):
            yield None
        whole = tree.root.total_cost[metric] if tree.n_metrics else 0.0
        yield walk.total / whole if whole > 0 else 0.0

    def _share_step(self, key: tuple[object, ...], slices: Iterator[float | None]) -> None:
        if key != self._share_key:
            return  # another search, snapshot or metric meanwhile
        share = next(slices, 0.0)
        if share is None:
            self.set_timer(0.001, lambda: self._share_step(key, slices))
            return
        self.share = share
        self.update_info()

    def update_info(self) -> None:
        graph = self._current()
        node = graph.selected_node()
        profile = self.profile
        if profile is None or node is None or graph.call_tree is None:
            self._info(Text(""))
            tell_selection(self, NameSelected(self.PANE_ID, None, self._note()))
            return
        m = self.metric
        unit = profile.metrics[m].unit if profile.metrics else "count"
        whole = self.call_tree.root.total_cost[m] if self.call_tree is not None else 0.0
        text = Text(no_wrap=True, end="")
        text.append(f" {graph.label(node)}", style="bold")
        total = node.total_cost[m] if m < len(node.total_cost) else 0.0
        own = node.self_cost[m] if m < len(node.self_cost) else 0.0
        text.append(f"  total {format_cost(total, unit)} ({percent(total, whole):.1f}%)")
        text.append(f"  self {format_cost(own, unit)} ({percent(own, whole):.1f}%)", style="dim")
        item = graph.selected_item()
        if graph.base is not None and item is not None:
            old = item.base.total_cost[m] if item.base is not None else 0.0
            text.append(f"  base {format_cost(old, unit)}"
                        + (" (new)" if item.base is None else ""), style="italic")
        if graph.zoomed:
            crumbs = " › ".join(shorten(display(f.function), "params")
                                for f in graph.zoom_path[-3:])
            text.append(f"  · zoom: {'… › ' if len(graph.zoom_path) > 3 else ''}{crumbs}",
                        style="cyan")
        note = self._note()
        if note:
            text.append(f"  · {note}", style="bold magenta")
        self._info(text)
        tell_selection(self, NameSelected(self.PANE_ID, graph.selected_frame(), note))

    def _note(self) -> str:
        if self.matcher is None:
            return ""
        share = self.search_share()
        if share is None:
            return f"/{self.pattern}: …"
        return f"/{self.pattern}: {100 * share:.1f}% in matching frames"

    def _info(self, text: Text) -> None:
        self.query_one("#flame-info", Static).update(text)

    # -- messages and actions --------------------------------------------------------

    def on_flame_graph_changed(self, message: FlameGraph.Changed) -> None:
        message.stop()
        self.update_info()

    async def on_flame_graph_leave(self, message: FlameGraph.Leave) -> None:
        message.stop()
        if self.sandwich is not None:
            self.action_sandwich()
            return
        await self.app.run_action("back")

    def on_flame_graph_search(self, message: FlameGraph.Search | None = None) -> None:
        if message is not None:
            message.stop()

        def done(pattern: str | None) -> None:
            if pattern is not None:
                self.search(pattern)
            self.app.set_focus(self._current())

        self.screen.query_one(SearchPrompt).ask(self.pattern, "the flame graph", done)

    def search(self, pattern: str) -> None:
        """Highlight frames matching `pattern` ("" clears the search)."""
        self.pattern = pattern
        frames = self.profile.frames if self.profile is not None else FrameTable()
        self.matcher = FrameMatcher(pattern, frames) if pattern else None
        self._share_key = ()
        for graph in self.graphs():
            graph.set_matches(self.matcher)
        if self.matcher is not None and self.matcher.matcher.error:
            self.notify(f"invalid regex ({self.matcher.matcher.error}): substring search",
                        severity="warning")
        self.update_info()

    def action_toggle_icicle(self) -> None:
        graph = self.graph
        graph.set_icicle(not graph.icicle)
        settings = getattr(self.app, "settings", None)
        if settings is not None and hasattr(settings, "flame_icicle"):
            settings.flame_icicle = graph.icicle
            self.post_message(SettingChanged())
        self.notify("icicle: root at the top" if graph.icicle else "flame: root at the bottom")

    def action_sandwich(self) -> None:
        """Toggle the sandwich view of the selected function."""
        box = self.query_one("#flame-sandwich")
        if self.sandwich is not None:
            self.sandwich = None
            box.display = False
            self.graph.display = True
            self.app.set_focus(self.graph)
            self.update_info()
            return
        frame = self.graph.selected_frame()
        if frame is None or self.profile is None:
            self.notify("select a function first (the root is not one)")
            return
        self.sandwich = frame
        self.last_graph = "sandwich-callees"
        self.graph.display = False
        box.display = True
        name = shorten(display(frame.function), "params")
        self.query_one("#sandwich-callers-title", Static).update(
            f" who calls {name}: computing…")
        for graph in (self.query_one("#sandwich-callers", FlameGraph),
                      self.query_one("#sandwich-callees", FlameGraph)):
            graph.set_tree(None, None, self.metric)
        self._fill_sandwich()
        self.app.set_focus(self.query_one("#sandwich-callees", FlameGraph))
        self.update_info()

    def action_focus_tree(self) -> None:
        frame = self.selected_frame()
        if frame is not None:
            self.post_message(drill("tree", tree_view="focus", focus=frame))

    def action_source(self) -> None:
        frame = self.selected_frame()
        if frame is not None:
            self.post_message(drill("source", source=frame))

