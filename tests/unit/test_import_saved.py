"""Saved proftui profiles through load_any, with embedded sources (format version 1)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from proftui.collectors.formats.importers import detect, load_any
from proftui.collectors.model import storage
from proftui.collectors.model.profile import Frame
from proftui.collectors.model.sourcefiles import ORIGINS

from tests.helpers.profiles import sample_profile


def _named_by_debug_info(root: Path, files: list[Path]) -> None:
    """As a symbolizer does: `files` were named by a unit compiled in `root`."""
    ORIGINS.note_module(str(root), lambda: frozenset({str(root)}))
    for file in files:
        ORIGINS.note_path(str(file), str(root))


def test_embedded_sources_come_back_from_the_file(tmp_path: Path) -> None:
    src = tmp_path / "prog.c"
    src.write_text("int main(void)\n{\n    return 0;\n}\n")
    big = tmp_path / "big.c"
    big.write_bytes(b"x" * (storage.MAX_SOURCE_BYTES + 1))
    binary = tmp_path / "blob.c"
    binary.write_bytes(b"\x7fELF\x00\x00")
    profile = sample_profile()
    profile.frames.intern(Frame("other", module="/bin/prog", file=str(big), line=1))
    profile.frames.intern(Frame("blob", module="/bin/prog", file=str(binary), line=1))
    profile.line_costs[(str(src), 3)] = [4.0]
    profile.line_costs[("/nonexistent/gone.c", 1)] = [1.0]
    _named_by_debug_info(tmp_path, [src, big, binary])
    path = tmp_path / "run.proftui"
    storage.save(profile, path)
    assert detect(path.read_bytes()[:4]) == "proftui"
    src.unlink()  # the other machine has no sources
    loaded = load_any(path)
    assert loaded.sources == {str(src): "int main(void)\n{\n    return 0;\n}\n"}
    expected = storage.profile_to_dict(profile)
    expected["sources"] = loaded.sources
    assert storage.profile_to_dict(loaded) == expected
    # saving again keeps the embedded text though the file is gone now
    storage.save(loaded, path)
    assert load_any(path).sources == loaded.sources


def test_sources_total_budget(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(storage, "MAX_SOURCES_BYTES", 10)
    a, b = tmp_path / "a.c", tmp_path / "b.c"
    a.write_text("12345678\n")
    b.write_text("second file\n")
    profile = sample_profile()
    profile.line_costs[(str(a), 1)] = [1.0]
    profile.line_costs[(str(b), 1)] = [1.0]
    _named_by_debug_info(tmp_path, [a, b])
    assert storage.gather_sources(profile) == {str(a): "12345678\n"}


def test_version_1_file_without_sources_loads(tmp_path: Path) -> None:
    doc = storage.profile_to_dict(sample_profile())
    del doc["sources"]  # written before the optional section existed
    path = tmp_path / "old.proftui"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    loaded = load_any(path)
    assert loaded.sources == {} and loaded.total() == 105
