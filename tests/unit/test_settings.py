"""Remembered settings (tui/settings.py): the XDG path, atomic 0600 writes, bad files
ignored with one notification, and the app restoring and saving its choices."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest
from proftui.tui import settings
from proftui.tui.app import ProfTuiApp
from proftui.tui.panes.flat import FlatPane
from proftui.tui.panes.tree import CallTreeView
from proftui.tui.widgets.flat_table import FlatTable

from tests.helpers.profiles import template_profile


def test_path_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings.config_path() == tmp_path / "proftui" / "settings.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert settings.config_path() == tmp_path / "home" / ".config" / "proftui" / "settings.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert settings.config_path() == tmp_path / "home" / ".config" / "proftui" / "settings.json"


def test_settings_round_trip_through_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "proftui" / "settings.json"
    assert settings.load(path) == (settings.Settings(), "")  # first run: defaults, no error
    chosen = settings.Settings(theme="nord", sort="total", descending=False, metric="cpu_ns",
                               names="params", percent_of_parent=True)
    assert settings.save(chosen, path) == ""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert settings.load(path) == (chosen, "")
    chosen.sort = "name"
    assert settings.save(chosen, path) == ""
    assert settings.load(path)[0].sort == "name"
    assert sorted(os.listdir(path.parent)) == ["settings.json"]  # no temporary left behind


@pytest.mark.parametrize("content", [
    b"{not json", b"[1, 2]", b"\xff\xfe\x00", b"", b"[" * 100_000, b"{}" + b" " * 70_000])
def test_corrupt_file_is_ignored_with_a_reason(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(content)
    loaded, error = settings.load(path)
    assert loaded == settings.Settings()
    assert error.startswith(f"settings file {path} ignored: ")


def test_bad_values_are_dropped_one_by_one(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"theme": 7, "sort": "bogus", "names": "params",
                                "percent_of_parent": "yes", "metric": "cpu_ns",
                                "descending": False, "unknown": 1}))
    loaded, error = settings.load(path)
    assert error == ""
    assert loaded == settings.Settings(names="params", metric="cpu_ns", descending=False)


@pytest.fixture
def saved_settings(tmp_path: Path) -> Path:
    """Default settings saved, for a user that file permissions hold back (not root)."""
    if os.geteuid() == 0:
        pytest.skip("root reads and writes any file: permissions cannot be tested")
    path = tmp_path / "proftui" / "settings.json"
    assert settings.save(settings.Settings(), path) == ""
    return path


def test_unreadable_file_gives_defaults(saved_settings: Path) -> None:
    saved_settings.chmod(0)
    loaded, error = settings.load(saved_settings)
    assert loaded == settings.Settings() and "ignored" in error


def test_unwritable_directory_is_said(saved_settings: Path) -> None:
    path = saved_settings
    path.parent.chmod(0o500)
    try:
        assert "not saved" in settings.save(settings.Settings(), path)
    finally:
        path.parent.chmod(0o700)


def test_directory_in_the_way(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.mkdir()
    loaded, error = settings.load(path)
    assert loaded == settings.Settings() and "ignored" in error
    assert "not saved" in settings.save(settings.Settings(), path)


def _run(app: ProfTuiApp, keys: list[str], seen: dict[str, object] | None = None) -> list[str]:
    """Run the app, press `keys`; return the notifications; fill `seen` with pane state."""
    notes: list[str] = []

    async def body() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(200):  # the flat profile is computed in a worker
                if app.query_one(FlatPane).shown:
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            notes.extend(n.message for n in app._notifications)
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            if seen is not None:
                flat = app.query_one(FlatPane)
                seen["sort"] = (flat.sort_key, flat.descending)
                seen["parent"] = app.query_one(CallTreeView).percent_of_parent
                seen["labels"] = {app.query_one(FlatTable).label(e) for e in flat.shown}

    asyncio.run(body())
    return notes


def test_app_remembers_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "proftui" / "settings.json"
    app = ProfTuiApp(profile=template_profile())
    _run(app, ["s", "m", "c", "2", "percent_sign"])  # sort total, cpu_ns, params, % parent
    saved = json.loads(path.read_text())
    assert saved["sort"] == "total" and saved["descending"] is True
    assert saved["metric"] == "cpu_ns" and saved["names"] == "params"
    assert saved["percent_of_parent"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved["theme"] = "nord"
    path.write_text(json.dumps(saved))

    again = ProfTuiApp(profile=template_profile())
    seen: dict[str, object] = {}
    notes = _run(again, [], seen)
    assert not any("settings" in n for n in notes)
    assert again.theme == "nord" and again.metric == 1 and again.name_mode == "params"
    assert seen["sort"] == ("total", True) and seen["parent"] is True
    assert seen["labels"] == {"std::vector<…>::push_back(…)", "main"}
    final = json.loads(path.read_text())
    assert final["metric"] == "cpu_ns" and final["theme"] == "nord"  # kept, not overwritten


def test_app_ignores_a_corrupt_file_with_one_notification(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "proftui" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(b"\x00garbage{")
    app = ProfTuiApp(profile=template_profile())
    notes = _run(app, [])
    assert [n for n in notes if "settings" in n] == [
        f"settings file {path} ignored: not valid JSON " + notes[0].split("JSON ", 1)[1]]
    assert app.name_mode == "templates" and app.metric == 0


def test_a_fifo_at_settings_json_does_not_stop_the_tui(tmp_path: Path) -> None:
    """Issue 26: reading settings.json waited for a writer when it was a FIFO, before the
    TUI drew anything.  Now one notification and the defaults; saving refuses it too."""
    path = tmp_path / "settings.json"
    os.mkfifo(path)
    loaded, note = settings.load(path)
    assert loaded == settings.Settings()
    assert note == f"settings file ignored: {path}: not a regular file"
    assert settings.save(settings.Settings(theme="nord"), path) == \
        f"settings not saved: {path}: not a regular file"
    assert stat.S_ISFIFO(path.lstat().st_mode)
