"""The flame graph widget: a Line API view drawing only the rows on screen.

Geometry comes from `collectors.model.flame.Layout` (rows computed lazily,
narrow frames merged into slivers), cached per (tree, metric, zoom, base,
width).  Root at the bottom (flame) or at the top (icicle).  Frames are
coloured by module (a stable hash, shades that read in dark and light themes),
or by difference to a baseline tree aligned on the same frame ids (Gregg's
differential flame graph: red grew, blue shrank, full red for new frames).
The widget owns the selection, the zoom breadcrumb and the search highlight;
the pane reads `describe()` for its status line.
"""

from __future__ import annotations

import colorsys
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import ClassVar

from proftui.collectors.model.flame import FlameItem, Layout, cost_of, node_at
from proftui.collectors.model.profile import CallNode, CallTree, Frame, FrameTable
from proftui.collectors.model.textsafe import display
from proftui.tui.names import shorten
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

NAME_MIN = 3  # cells a frame needs to show a name; narrower ones are a coloured sliver
DIFF_NEUTRAL = 0.02  # a relative change below this is drawn neutral
MATCHED = Style(bold=True, underline=True)  # a frame the search matches
SELECTED = Style(reverse=True, bold=True)


def _rgb(h: float, lightness: float, saturation: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hls_to_rgb(h, lightness, saturation)
    return int(r * 255), int(g * 255), int(b * 255)


@lru_cache(maxsize=4096)
def module_style(module: str, function: str, dark: bool) -> Style:
    """A stable colour per module (hue) with a shade per function, readable on either theme."""
    hue = (zlib.crc32(module.encode()) % 360) / 360
    shade = zlib.crc32(function.encode()) % 3
    if dark:
        r, g, b = _rgb(hue, 0.26 + 0.05 * shade, 0.50)
        return Style(bgcolor=f"rgb({r},{g},{b})", color="rgb(240,240,240)")
    r, g, b = _rgb(hue, 0.74 + 0.05 * shade, 0.60)
    return Style(bgcolor=f"rgb({r},{g},{b})", color="rgb(20,20,20)")


def diff_style(change: float, dark: bool) -> Style:
    """Red (grew) or blue (shrank), deeper with |change| (0..1, relative)."""
    return _diff_style(round(max(-1.0, min(1.0, change)), 2), dark)


@lru_cache(maxsize=512)
def _diff_style(change: float, dark: bool) -> Style:
    t = abs(change)
    if t < DIFF_NEUTRAL:
        neutral = (72, 72, 72) if dark else (222, 222, 222)
        target = neutral
    elif change > 0:
        neutral, target = ((72, 72, 72), (205, 30, 30)) if dark else \
            ((222, 222, 222), (235, 70, 70))
    else:
        neutral, target = ((72, 72, 72), (40, 80, 210)) if dark else \
            ((222, 222, 222), (90, 130, 240))
    # sqrt: a frame that doubled (t = 0.5) is already deep red, as in Gregg's graphs,
    # while small changes stay pale
    mix = 0.3 + 0.7 * t ** 0.5 if t >= DIFF_NEUTRAL else 0.0
    r, g, b = (int(n + (c - n) * mix) for n, c in zip(neutral, target, strict=True))
    return Style(bgcolor=f"rgb({r},{g},{b})",
                 color="rgb(245,245,245)" if dark or mix > 0.6 else "rgb(20,20,20)")


def relative_change(new: float, old: float) -> float:
    """How much `new` differs from `old`, relative to the larger (1: new from nothing)."""
    top = max(abs(new), abs(old))
    return (new - old) / top if top else 0.0


class FlameGraph(Widget, can_focus=True):
    """A flame graph of one `CallTree`; arrows move, Enter zooms, Esc zooms out."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "zoom", "Zoom", tooltip="Zoom to the frame: it fills the width"),
        Binding("escape", "zoom_out", "Unzoom",
                tooltip="Zoom out one step (not zoomed: back, as everywhere)"),
        Binding("slash", "search", "Search",
                tooltip="Highlight the frames matching a regex and the share they hold"),
        Binding("n", "search_next(1)", "Next match", show=False),
        Binding("N", "search_next(-1)", "Previous match", show=False),
        Binding("up", "move_vertical(-1)", "Up", show=False),
        Binding("down", "move_vertical(1)", "Down", show=False),
        Binding("left", "move_side(-1)", "Left", show=False),
        Binding("right", "move_side(1)", "Right", show=False),
        Binding("home", "to_root", "Root", show=False),
    ]

    class Changed(Message):
        """The selection, the zoom or the search changed (the status line follows)."""

    class Leave(Message):
        """Esc with nothing left to zoom out of."""

    class Search(Message):
        """`/` pressed: the pane asks for a pattern."""

    def __init__(self, icicle: bool = False, show_root: bool = True, root_label: str = "all",
                 **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.icicle = icicle
        self.show_root = show_root
        self.root_label = root_label
        self.call_tree: CallTree | None = None
        self.frames: FrameTable | None = None
        self.base: CallTree | None = None
        self.normalise = "shares"
        self.wholes: tuple[float, float] | None = None
        self.metric = 0
        self.name_mode = "full"
        self.zoom_path: tuple[Frame, ...] = ()  # the zoomed node, as frames from the root
        self.history: list[tuple[Frame, ...]] = []  # zoom breadcrumb, for Esc
        self.selected_path: tuple[Frame, ...] = ()
        self.sel: tuple[int, int] = (0, 0)  # (row, index) in the layout
        self.first_row = 0  # the row drawn at the root edge of the screen
        self.matches: Callable[[int], bool] | None = None  # the search's frame test
        self._layouts: dict[tuple[object, ...], Layout] = {}
        self._labels: dict[int, str] = {}

    # -- data ------------------------------------------------------------------------

    def set_tree(self, tree: CallTree | None, frames: FrameTable | None, metric: int,
                 base: CallTree | None = None, normalise: str = "shares",
                 wholes: tuple[float, float] | None = None) -> None:
        """Show `tree` (a new snapshot keeps the zoom and selection by frame path).

        `wholes`: the (new, base) totals that shares are of, when not the two trees'
        roots (a sandwich's trees hold one function's cost, not the profile's)."""
        if frames is not self.frames:
            self._labels.clear()
        if tree is not self.call_tree:
            self._layouts.clear()  # layouts of an older snapshot: never shown again
        self.call_tree, self.frames, self.metric = tree, frames, metric
        self.base, self.normalise, self.wholes = base, normalise, wholes
        self._restore()

    def set_matches(self, matches: Callable[[int], bool] | None) -> None:
        self.matches = matches
        self.refresh()

    def set_name_mode(self, mode: str) -> None:
        self.name_mode = mode
        self._labels.clear()
        self.refresh()

    def set_icicle(self, icicle: bool) -> None:
        self.icicle = icicle
        self._scroll_to_selection()
        self.refresh()

    def _path_nodes(self, path: tuple[Frame, ...]) -> tuple[CallNode, int]:
        """The node at `path` in the current tree, or its deepest existing ancestor."""
        assert self.call_tree is not None and self.frames is not None
        ids: list[int] = []
        for frame in path:
            fid = self.frames.find(frame)
            if fid is None:
                break
            ids.append(fid)
        return node_at(self.call_tree, tuple(ids))

    def frame_path(self, node: CallNode) -> tuple[Frame, ...]:
        assert self.frames is not None
        return tuple(self.frames[fid] for fid in node.path())

    @property
    def flame_layout(self) -> Layout | None:
        if self.call_tree is None:
            return None
        zoom, _ = self._path_nodes(self.zoom_path) if self.zoom_path else (None, 0)
        cells = max(1, self.size.width or self.app.size.width)
        key = (id(self.call_tree), self.metric, None if zoom is None else zoom.index, cells,
               id(self.base), self.show_root)
        found = self._layouts.get(key)
        if found is None:
            if len(self._layouts) > 8:
                self._layouts.clear()
            found = self._layouts[key] = Layout(self.call_tree, self.metric, cells, zoom,
                                                self.show_root, self.base)
        return found

    def _restore(self) -> None:
        """After a new tree, zoom or resize: find the selected node again."""
        layout = self.flame_layout
        if layout is None:
            return
        if self.zoom_path:
            _zoom, found = self._path_nodes(self.zoom_path)
            if found < len(self.zoom_path):  # the zoomed frame vanished: its deepest ancestor
                self.zoom_path = self.zoom_path[:found]
                layout = self.flame_layout
                assert layout is not None
        node: CallNode | None = self._path_nodes(self.selected_path)[0]
        place = None
        while place is None and node is not None:
            place = layout.locate(node)
            node = node.parent  # culled or outside the zoom: its nearest shown ancestor
        self.sel = place if place is not None else (layout.zoom_row(), 0)
        self._select(*self.sel)

    # -- selection -------------------------------------------------------------------

    def selected_item(self) -> FlameItem | None:
        layout = self.flame_layout
        if layout is None:
            return None
        row = layout.row(self.sel[0])
        return row[self.sel[1]] if self.sel[1] < len(row) else None

    def selected_node(self) -> CallNode | None:
        item = self.selected_item()
        return item.node if item is not None else None

    def selected_frame(self) -> Frame | None:
        node = self.selected_node()
        if node is None or node.parent is None or self.frames is None:
            return None
        return self.frames[node.frame_id]

    def _select(self, k: int, index: int) -> None:
        self.sel = (k, index)
        node = self.selected_node()
        if node is not None:
            self.selected_path = self.frame_path(node)
        self._scroll_to_selection()
        self.refresh()
        self.post_message(self.Changed())

    def _scroll_to_selection(self) -> None:
        height = max(1, self.size.height)
        k = self.sel[0]
        if k < self.first_row:
            self.first_row = k
        elif k >= self.first_row + height:
            self.first_row = k - height + 1

    def action_move_vertical(self, screen_dy: int) -> None:
        """Up/down on screen: towards the leaves or the root, as drawn."""
        layout = self.flame_layout
        if layout is None:
            return
        toward_leaves = (screen_dy > 0) == self.icicle
        k, index = self.sel
        if toward_leaves:
            for i, item in enumerate(layout.row(k + 1)):
                if item.parent == index and item.node is not None:
                    self._select(k + 1, i)
                    return
        elif k > 0:
            parent = layout.row(k)[index].parent
            self._select(k - 1, max(0, parent))

    def action_move_side(self, step: int) -> None:
        layout = self.flame_layout
        if layout is None:
            return
        k, index = self.sel
        row = layout.row(k)
        i = index + step
        while 0 <= i < len(row) and row[i].node is None:
            i += step  # slivers are not frames: skip them
        if 0 <= i < len(row):
            self._select(k, i)

    def action_to_root(self) -> None:
        layout = self.flame_layout
        if layout is not None:
            self._select(layout.zoom_row(), 0)

    # -- zoom ------------------------------------------------------------------------

    def zoom_to(self, node: CallNode) -> None:
        """Zoom so that `node` fills the width (its callers stay above/below as full rows)."""
        path = self.frame_path(node)
        if path == self.zoom_path:
            return
        self.history.append(self.zoom_path)
        self.zoom_path = path
        self.selected_path = path
        self._restore()

    def action_zoom(self) -> None:
        node = self.selected_node()
        if node is not None:
            self.zoom_to(node)

    def action_zoom_out(self) -> None:
        if not self.history and not self.zoom_path:
            self.post_message(self.Leave())
            return
        self.zoom_path = self.history.pop() if self.history else ()
        self._restore()

    @property
    def zoomed(self) -> bool:
        return bool(self.zoom_path)

    # -- search ----------------------------------------------------------------------

    def action_search(self) -> None:
        self.post_message(self.Search())

    def action_search_next(self, step: int) -> None:
        layout, test = self.flame_layout, self.matches
        if layout is None or test is None:
            self.notify("no search yet: / searches the flame graph")
            return
        found = [(k, i) for k, i, item in layout.items()
                 if item.node is not None and item.node.parent is not None
                 and test(item.node.frame_id)]
        if not found:
            self.notify("no matching frame is wide enough to show here", severity="warning")
            return
        after = [p for p in found if (p > self.sel if step > 0 else p < self.sel)]
        target = (after[0] if step > 0 else after[-1]) if after else \
            (found[0] if step > 0 else found[-1])
        self._select(*target)

    # -- drawing ---------------------------------------------------------------------

    def label(self, node: CallNode) -> str:
        if node.parent is None:
            return self.root_label
        label = self._labels.get(node.frame_id)
        if label is None:
            assert self.frames is not None
            name = display(self.frames[node.frame_id].function)
            label = name if self.name_mode == "full" else shorten(name, self.name_mode)
            self._labels[node.frame_id] = label
        return label

    def _style(self, item: FlameItem, dark: bool) -> Style:
        node = item.node
        if node is None:
            return Style(bgcolor="rgb(90,90,90)" if dark else "rgb(190,190,190)",
                         color="rgb(200,200,200)" if dark else "rgb(60,60,60)")
        if self.matches is not None and node.parent is not None \
                and not self.matches(node.frame_id):
            return Style(bgcolor="rgb(48,48,48)" if dark else "rgb(238,238,238)",
                         color="rgb(130,130,130)" if dark else "rgb(140,140,140)")
        if self.base is not None and self.call_tree is not None:
            style = diff_style(self._change(node, item.base), dark)
        elif node.parent is None or self.frames is None:
            style = Style(bgcolor="rgb(80,80,80)" if dark else "rgb(205,205,205)",
                          color="rgb(240,240,240)" if dark else "rgb(20,20,20)")
        else:
            frame = self.frames[node.frame_id]
            style = module_style(frame.module_name, frame.function, dark)
        if self.matches is not None and node.parent is not None:
            style += MATCHED
        return style

    def _change(self, node: CallNode, base: CallNode | None) -> float:
        """Relative change of `node` against its baseline counterpart (1.0: new)."""
        assert self.call_tree is not None and self.base is not None
        new = cost_of(node, self.metric)
        old = cost_of(base, self.metric) if base is not None else 0.0
        if self.normalise == "shares":
            whole_new, whole_old = self.wholes if self.wholes is not None else (
                cost_of(self.call_tree.root, self.metric), cost_of(self.base.root, self.metric))
            new = new / whole_new if whole_new else 0.0
            old = old / whole_old if whole_old else 0.0
        return relative_change(new, old)

    def row_at(self, y: int) -> int:
        """The layout row drawn on screen line `y`."""
        height = max(1, self.size.height)
        return self.first_row + (y if self.icicle else height - 1 - y)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        layout = self.flame_layout
        blank = Style(bgcolor=self.rich_style.bgcolor)
        if layout is None or y >= self.size.height:
            return Strip.blank(width, blank)
        k = self.row_at(y)
        row = layout.row(k)
        if not row:
            return Strip.blank(width, blank)
        dark = self.app.current_theme.dark if self.app.current_theme else True
        segments: list[Segment] = []
        x = 0
        for index, x0, x1 in layout.row_cells(k):
            item = row[index]
            if x0 > x:
                segments.append(Segment(" " * (x0 - x), blank))
            cells = x1 - x0
            style = self._style(item, dark)
            if (k, index) == self.sel:
                style += SELECTED
            if item.node is None:
                text = "░" * cells
            elif cells < NAME_MIN:
                text = " " * cells
            else:
                name = self.label(item.node)
                room = cells - 1
                if len(name) > room:
                    name = name[:room - 1] + "…"
                text = (" " + name).ljust(cells)
            segments.append(Segment(text, style))
            x = x1
        if x < width:
            segments.append(Segment(" " * (width - x), blank))
        return Strip(segments, width)

    # -- mouse -----------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        layout = self.flame_layout
        offset = event.get_content_offset(self)
        if layout is None or offset is None:
            return
        k = self.row_at(offset.y)
        row = layout.row(k)
        for index, x0, x1 in layout.row_cells(k):
            item = row[index]
            if x0 <= offset.x < x1 and item.node is not None:
                again = (k, index) == self.sel
                self._select(k, index)
                if again or event.chain >= 2:
                    self.zoom_to(item.node)
                return

    def on_resize(self) -> None:
        if self.call_tree is not None:
            self._restore()
