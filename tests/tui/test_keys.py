"""Keys: focus after every modal on every pane (the Process-pane trap), the help screen,
the key bar and breadcrumb at 80 columns, the palette, save from the TUI, Ctrl-C."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta
from proftui.collectors.model.storage import load
from proftui.tui.app import PANES, ProfTuiApp
from proftui.tui.panes.flat import FilterInput, FlatPane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.screens.export import ExportScreen
from proftui.tui.screens.help import HelpScreen, pane_keys
from proftui.tui.widgets.breadcrumb import Breadcrumb
from proftui.tui.widgets.key_bar import Item, fit
from proftui.tui.widgets.search_prompt import SearchPrompt
from proftui.tui.widgets.status_line import StatusLine
from textual.binding import Binding
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input

from tests.helpers.profiles import sample_profile
from tests.helpers.tui import ReplayCollector, run, run_app, screen_ready, screen_text, wait_for

SMALL = (80, 24)
README = Path(__file__).resolve().parents[2] / "README.md"
# Each key that opens a modal screen, and the screen it opens.
MODALS = {"w": "NotesScreen", "e": "ExportScreen", "ctrl+p": "CommandPalette",
          "question_mark": "HelpScreen", "f1": "HelpScreen"}


async def started(pilot: Pilot, app: ProfTuiApp) -> None:
    await wait_for(pilot, lambda: bool(app.query_one(FlatPane).shown), what="flat profile")


def on_sample(body: Callable[[Pilot, ProfTuiApp], Awaitable[None]],
              size: tuple[int, int] = SMALL) -> None:
    """`body(pilot, app)` on the app showing sample_profile(), once its flat profile shows."""

    async def started_body(pilot: Pilot, app: ProfTuiApp) -> None:
        await started(pilot, app)
        await body(pilot, app)

    run_app(ProfTuiApp(profile=sample_profile()), started_body, size)  # type: ignore[arg-type]


def visible_focus_ok(app: ProfTuiApp) -> None:
    """Focus is the visible pane's focus widget, or nothing when it has none; never a
    hidden widget, and nothing was typed into the flat filter."""
    pane = app.pane(app.nav[-1].pane)
    assert app.screen is app.screen_stack[0], app.screen
    assert app.focused is pane.focus_widget(), (app.nav[-1].pane, app.focused)
    focused: Widget | None = app.focused
    while focused is not None and isinstance(focused, Widget):
        assert focused.display, f"{focused} is hidden"
        focused = focused.parent if isinstance(focused.parent, Widget) else None
    assert app.query_one(FilterInput).value == "" and app.query_one(FlatPane).filter_text == ""


def test_process_pane_trap_sequence() -> None:
    """The reported sequence: 4, then w (or e, ctrl+p), then Esc; then 1, 2 and q work."""
    for opener in ("w", "e", "ctrl+p"):
        async def body(opener: str = opener) -> None:
            app = ProfTuiApp(profile=sample_profile())
            async with app.run_test(size=SMALL) as pilot:
                await started(pilot, app)
                await pilot.press("4")
                await pilot.press(opener)
                await wait_for(pilot, lambda: type(app.screen).__name__ == MODALS[opener],
                               what=MODALS[opener])
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.screen_stack[0], what="close")
                visible_focus_ok(app)
                await pilot.press("1")
                assert app.nav[-1].pane == "flat"
                await pilot.press("2")
                assert app.nav[-1].pane == "tree"
                visible_focus_ok(app)
                await pilot.press("q")
                await pilot.pause()
                assert app._exit, f"q did not quit after {opener}, Esc"
        run(body)


def test_every_modal_returns_focus_to_every_pane() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        for pane in PANES:
            for opener, screen in MODALS.items():
                await pilot.press(pane.KEY)
                assert app.nav[-1].pane == pane.PANE_ID
                await pilot.press(opener)
                await wait_for(pilot, lambda s=screen: type(app.screen).__name__ == s,
                               what=f"{screen} on {pane.PANE_ID}")
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is app.screen_stack[0],
                               what=f"{screen} closed on {pane.PANE_ID}")
                visible_focus_ok(app)
                await pilot.press("tab")  # focus cycling must not reach a hidden widget
                focused = app.focused
                assert focused is None or focused.display, focused
                await pilot.press("escape")  # keep the trail short
        # The quit dialog (a running target) is covered in test_tmux; Stay returns here.

    on_sample(body)


def test_help_screen_lists_every_key() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        for pane in PANES:
            await pilot.press(pane.KEY)
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: screen_ready(app, HelpScreen), what="help")
            text = screen_text(app)
            assert f"{pane.TITLE} (this pane)" in text and "Everywhere" in text
            widget = app.pane(pane.PANE_ID)
            assert isinstance(widget, Widget)
            for entry in pane_keys(app, widget):  # every key of the pane...
                assert entry.key_text in text and entry.description in text, entry
            for binding in app.BINDINGS:  # ...and of the app (pause: live only)
                assert isinstance(binding, Binding)
                if app.check_action(binding.action, ()) is not False:
                    assert binding.description in text, binding
            for other in PANES:
                assert f"{other.KEY}  " in text or f"{other.KEY} " in text
            for closer in ("escape", "q", "question_mark", "f1"):
                if not isinstance(app.screen, HelpScreen):
                    await pilot.press("question_mark")
                await pilot.press(closer)
                await wait_for(pilot, lambda: app.screen is app.screen_stack[0],
                               what=f"{closer} closes help")
                assert not app._exit  # q closed help, not the app
                visible_focus_ok(app)

    on_sample(body, (100, 60))


def test_key_bar_keeps_help_and_quit_at_80_columns() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        for pane in PANES:
            await pilot.press(pane.KEY)
            await pilot.pause()
            bar = screen_text(app).rstrip("\n").splitlines()[-1]
            assert " ? Help " in bar and " q Quit " in bar, (pane.PANE_ID, bar)
            assert not bar.rstrip().endswith("…"), bar
        await pilot.resize_terminal(160, 30)
        await pilot.pause()
        bar = screen_text(app).rstrip("\n").splitlines()[-1]
        assert "1 Flat" in bar and "4 Process" in bar and "m Metric" in bar, bar

    on_sample(body)


def test_key_bar_gives_way_in_order() -> None:
    def items(*words: str) -> list[Item]:
        return [Item(w[0], w, True, w[0]) for w in words]

    local, app = items("Enter-drill", "Filter"), items("Back", "Metric", "Export")
    panes = [Item(str(i), f"Pane{i}", True, str(i)) for i in range(1, 5)]
    pinned, palette = items("?Help", "quit"), Item("^p", "palette", True, None)
    everything = local + panes + app + pinned + [palette]
    width = sum(i.width() for i in everything)
    assert fit(local, panes, app, pinned, palette, width) == everything
    assert fit(local, panes, app, pinned, palette, width - 1) == local + panes + app + pinned
    shorter = fit(local, panes, app, pinned, palette, width - palette.width() - 1)
    assert shorter == local + panes + app[:2] + pinned  # the last app key goes first
    narrow = fit(local, panes, app, pinned, palette, 60)
    assert narrow[:len(local)] == local and narrow[len(local)].key == "1-4"
    assert narrow[-2:] == pinned and len(narrow) == len(local) + 3
    assert fit(local, panes, app, pinned, palette, 45) == local[:1] + narrow[-3:]
    assert fit(local, panes, app, pinned, palette, 10) == pinned  # never without ? and q


def long_name_profile() -> Profile:
    """main -> a C++-sized function name, to drill into at 80 columns."""
    # Long even once templates are shortened (the breadcrumb shortens them).
    name = ("storage_engine::btree_internals::node_allocator_policy<long, Node>::"
            "rebalance_after_insert_unique_position")
    profile = Profile(ProfileMeta(mode="sampler", argv=["prog"], pids=[1]), (SAMPLES,))
    main = profile.frames.intern(Frame("main", module="/bin/prog"))
    hot = profile.frames.intern(Frame(name, module="/bin/prog"))
    profile.tree.add_stack([main, hot], [90])
    profile.tree.add_stack([main], [10])
    return profile.finalize()


def test_breadcrumb_keeps_the_current_step_at_80_columns() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await started(pilot, app)
        await pilot.press("2", "1", "2", "3")  # a trail longer than the line
        await pilot.pause()
        line = screen_text(app).splitlines()[1]
        assert line.rstrip().endswith(app.nav[-1].label), line
        assert "…" in line  # earlier steps gave way
        await pilot.press("1", "enter")  # focus the tree on the long name
        await wait_for(pilot, lambda: app.nav[-1].pane == "tree", what="tree focus")
        line = screen_text(app).splitlines()[1]
        label = app.nav[-1].label
        assert len(label) > 60
        assert line.rstrip().endswith(label[-30:]), line  # its end (the method) shown
        bar = app.query_one(Breadcrumb)
        assert bar.size.width == 80

    run_app(ProfTuiApp(profile=long_name_profile()), body, SMALL)


def readme_keys() -> list[str]:
    """The keys of the README's key table (first column, each `...` token)."""
    text = README.read_text()
    table = text[text.index("| key | where | does |"):]
    table = table[: table.index("\n\n")]
    keys = []
    for row in table.splitlines()[2:]:
        keys += re.findall(r"`([^`]+)`", row.split("|")[1])
    return keys


def test_readme_key_table_matches_the_bindings() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await started(pilot, app)
        # As while live: pause and reset are offered only then.
        app.check_action = lambda action, parameters: True  # type: ignore[method-assign]
        titles = [t for t, _h, _c in app.palette_commands()]
        spelled = {k.strip().lower() for t in titles
                   for group in re.findall(r"\(([^()]*)\)$", t) for k in group.split(",")}
        documented = readme_keys()
        aliases = {"esc": "escape", "ctrl+p": None}  # the palette itself
        for key in documented:
            name = aliases.get(key.lower(), key.lower())
            if name is not None:
                assert name in spelled, (key, sorted(spelled))
        # The other way: every key the app offers in a key bar or as a letter is listed.
        lowered = {k.lower() for k in documented}
        offered = set(spelled) - {"ctrl+q"}  # Textual's own quit key, listed in help
        for key in offered:
            assert key in lowered or (key == "escape" and "esc" in lowered), key

    run_app(ProfTuiApp(collector=None, profile=sample_profile()), body, SMALL)


def test_palette_runs_a_pane_key_it_generated() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        command = next(c for t, _h, c in app.palette_commands() if t == "Reverse sort (S)")
        flat = app.query_one(FlatPane)
        before = flat.descending
        result = command()
        if result is not None:
            await result  # type: ignore[misc]
        await pilot.pause()
        assert flat.descending is not before
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: screen_ready(app, CommandPalette), what="palette")
        await pilot.press(*"Reverse sort")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: flat.descending is before, what="palette command")
        visible_focus_ok(app)

    on_sample(body)


def test_save_from_the_tui_writes_a_profile_open_reads(tmp_path: Path) -> None:
    profile = sample_profile()

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await started(pilot, app)
        await pilot.press("e")
        await wait_for(pilot, lambda: screen_ready(app, ExportScreen), what="dialog")
        dialog = app.screen
        assert isinstance(dialog, ExportScreen) and dialog.fmt == "proftui"
        box = dialog.query_one("#export-path", Input)
        assert box.value.endswith(".proftui")
        assert box.value in screen_text(app) or Path(box.value).name in screen_text(app)
        text = screen_text(app)
        for fmt in ("proftui", "pprof", "folded", "callgrind", "speedscope", "Save"):
            assert fmt in text, text  # the whole dialog fits 80x24
        box.value = str(tmp_path / "saved.proftui")
        box.focus()
        await pilot.press("enter")
        await wait_for(pilot, (tmp_path / "saved.proftui").exists, what="saved file")
        await wait_for(pilot, lambda: app.screen is app.screen_stack[0], what="closed")
        visible_focus_ok(app)

    run_app(ProfTuiApp(profile=profile), body, SMALL)
    back = load(tmp_path / "saved.proftui")
    assert back.total(0) == profile.total(0) == 105
    assert sorted(f.function for f in back.frames) == sorted(f.function for f in profile.frames)


def test_saving_to_a_fifo_is_refused_without_blocking(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A FIFO as the save dialog's path: the save is refused in one notification, with
    no worker waiting for a reader, so `q` still quits (the profile goes to a fallback
    file in the current directory, as for any unwritable path)."""
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("e")
        await wait_for(pilot, lambda: screen_ready(app, ExportScreen), what="dialog")
        box = app.screen.query_one("#export-path", Input)
        box.value = str(fifo)
        box.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("not a regular file" in str(n.message)
                                          for n in app._notifications),
                       what="the refusal")
        await pilot.press("q")
        await wait_for(pilot, lambda: app._exit, what="exit")

    on_sample(body)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert len(list(tmp_path.glob("proftui-*.proftui"))) == 1


def test_default_save_path_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proftui-sampler.proftui").write_text("earlier")

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("e")
        await wait_for(pilot, lambda: screen_ready(app, ExportScreen), what="dialog")
        box = app.screen.query_one("#export-path", Input)
        assert box.value == str(tmp_path / "proftui-sampler-1.proftui")

    on_sample(body)


def test_ctrl_c_without_a_cli_quits() -> None:
    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("slash")  # even from the filter box (priority binding)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit

    on_sample(body)


def test_a_theme_reaches_every_panes_colours() -> None:
    from proftui.tui.format import heat_style
    from proftui.tui.widgets.flat_table import FlatTable
    from textual.color import Color

    def heat_hex(color: object) -> str:
        assert color is not None
        return color.get_truecolor().hex.lower()  # type: ignore[attr-defined]

    def colours(app: ProfTuiApp) -> tuple[str, str]:
        table = app.query_one(FlatTable)
        strip = table.render_line(1)  # the cursor row: the hottest function (leaf, 85.7%)
        first = next(iter(strip))
        assert first.style is not None and first.style.bgcolor is not None
        assert first.style.color is not None
        return first.style.bgcolor.get_truecolor().hex, first.style.color.get_truecolor().hex

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        dark = colours(app)
        assert dark[1] == Color.parse(app.get_css_variables()["error"]).hex.lower()
        app.theme = "textual-light"
        await pilot.pause(0.3)
        light = colours(app)
        variables = app.get_css_variables()
        assert light[0] != dark[0], (dark, light)
        assert heat_hex(heat_style(0.3).color) == variables["error"].lower()
        await pilot.press("2")
        await pilot.pause(0.3)
        tree = app.query_one(CallTreeView)
        label = tree.root.children[0].label  # main: 100% of the whole, the hottest colour
        colours_used = {heat_hex(span.style.color) for span in label.spans
                        if not isinstance(span.style, str) and span.style.color}
        assert variables["error"].lower() in colours_used, label.spans

    on_sample(body)


def test_live_quit_dialog_gives_the_focus_back() -> None:
    """While a target runs: the quit question (q, then n or Esc) on every pane gives the
    focus back to the pane; pause and reset are in the palette; ? and q still fit."""
    collector = ReplayCollector(sample_profile())
    app = ProfTuiApp(collector=collector)

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await wait_for(pilot, lambda: collector.ticks >= 2, what="snapshots")
        await started(pilot, app)
        titles = [t for t, _h, _c in app.palette_commands()]
        assert "Pause (p)" in titles and "Reset (r)" in titles, titles
        for pane in PANES:
            await pilot.press(pane.KEY)
            bar = screen_text(app).rstrip("\n").splitlines()[-1]
            assert " ? Help " in bar and " q Quit " in bar, bar
            for answer in ("n", "escape"):
                await pilot.press("q")
                await wait_for(pilot, lambda: type(app.screen).__name__ == "QuitScreen",
                               what="quit question")
                await pilot.press(answer)
                await wait_for(pilot, lambda: app.screen is app.screen_stack[0],
                               what="back from the quit question")
                visible_focus_ok(app)
        collector.ended.set()
        await wait_for(pilot, lambda: app.ended, what="end")
        assert "Pause (p)" not in [t for t, _h, _c in app.palette_commands()]

    try:
        run_app(app, body, SMALL)
    finally:
        collector.stop()


def test_search_prompt_closes_into_the_pane_and_the_status_line_follows_at_once() -> None:
    """The tree's `/` prompt: Esc leaves the search as it was, Enter runs it, and either
    way the prompt is gone and the tree has the focus.  The status line takes a pane's
    selection in the pane's own handler (no posted message that lands a frame later)."""

    async def body(pilot: Pilot, app: ProfTuiApp) -> None:
        await pilot.press("2")
        tree = app.query_one(CallTreeView)
        prompt = app.query_one(SearchPrompt)
        line = app.query_one(StatusLine)
        await pilot.press("slash", *"main")
        assert prompt.has_focus and prompt.display
        await pilot.press("escape")
        assert not prompt.display and app.focused is tree and tree.search.pattern == ""
        await pilot.press("slash", *"leaf", "enter")  # a -> leaf and b -> leaf
        assert not prompt.display and app.focused is tree
        assert tree.search.pattern == "leaf" and line.note.endswith("/leaf: match 1 of 2")
        tree.search.step(1)  # no await: the status line must already say it
        assert line.note.endswith("/leaf: match 2 of 2"), line.note
        visible_focus_ok(app)

    on_sample(body)
