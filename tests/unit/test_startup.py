"""Start-up imports only what the command and the file need (issue 33): a .proftui file
is read without the other importers, pyelftools or the collectors; a `record` loads the
symbolizer (ELF/DWARF readers, the demangler's libstdc++ lookup) only when a frame needs
it.  Each check runs in a fresh interpreter and lists what it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proftui.collectors.model import storage
from proftui.collectors.model.profile import SAMPLES, Frame, Profile, ProfileMeta


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def small_profile(path: Path) -> Path:
    profile = Profile(meta=ProfileMeta(mode="sampler"), metrics=(SAMPLES,))
    main = profile.frames.intern(Frame("main", "/bin/p"))
    profile.tree.add_stack([main], [3.0])
    return storage.save(profile.finalize(), path)


def test_a_saved_profile_is_read_without_the_importers(tmp_path: Path) -> None:
    path = small_profile(tmp_path / "small.proftui")
    mods = imported_after(
        "from proftui.collectors.formats.importers import load_any\n"
        f"assert load_any({str(path)!r}).total() == 3")
    unwanted = sorted(m for m in mods if m.startswith((
        "elftools", "symbolic", "proftui.collectors.formats.importers.",
        "proftui.collectors.gprof", "proftui.collectors.symbols", "textual")))
    assert not unwanted, unwanted


def test_storage_loads_its_validator_only_to_read() -> None:
    assert "proftui.collectors.model.validate" not in imported_after(
        "import proftui.collectors.model.storage")


def test_a_sampler_run_loads_the_symbolizer_on_the_first_frame() -> None:
    mods = imported_after(
        "from proftui.collectors.sampler.collector import SamplerCollector\n"
        "from proftui.collectors.symbols.stacks import ImageSpaces\n"
        "images = ImageSpaces()\n"
        "images.want_symbols()\n"
        "images.add_loads('f', 1, [(0x1000, 0x2000, 0, '/bin/true')])\n"
        "assert images.warnings() == []")
    unwanted = sorted(m for m in mods if m in (
        "proftui.collectors.symbols.symbolizer", "proftui.collectors.symbols.dwarfnames",
        "proftui.collectors.symbols.demangle", "ctypes", "hashlib"))
    assert not unwanted, unwanted
    mods = imported_after(
        "from proftui.collectors.symbols.stacks import ImageSpaces\n"
        "images = ImageSpaces()\n"
        "images.want_symbols()\n"
        "images.add_loads('f', 1, [(0x1000, 0x2000, 0, '/bin/true')])\n"
        "assert images.frames_for('f', 1).symbolizer is images.symbolizer is not None")
    assert "proftui.collectors.symbols.symbolizer" in mods


def test_the_demangler_is_found_on_the_first_mangled_name() -> None:
    assert "ctypes" not in imported_after(
        "from proftui.collectors.symbols.demangle import demangle\n"
        "assert demangle('main') == 'main'")
    assert "ctypes" in imported_after(
        "from proftui.collectors.symbols.demangle import demangle\n"
        "assert demangle('_ZN3foo3barEv') in ('foo::bar()', '_ZN3foo3barEv')")
