"""Raw sampled stacks (runtime addresses) -> symbolized Frames.

Shared by the collectors that sample stacks of addresses (attach, sampler, heap):
one `StackFrames` per process address space; the Symbolizer (ELF/DWARF per
module, its frames memoized by (module, link-time address)) can be shared
between processes.  `StackFrames.cache` memoizes by runtime address on top of
it: a hit is ~7x cheaper than the map lookup plus the Symbolizer's memo, and
attach looks up every address of every sample as it arrives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from proftui.collectors.errors import ProftuiError
from proftui.collectors.model.profile import CodeSite, Frame
from proftui.collectors.symbols.jitdump import JitNames
from proftui.collectors.symbols.maps import AddressSpace, Mapping
from proftui.collectors.symbols.perfmap import PerfMap, jit_place, process_uid

if TYPE_CHECKING:  # imported when first made: a run that symbolizes nothing never loads it
    from proftui.collectors.symbols.symbolizer import Symbolizer

# Pseudo-addresses a collector appends to a stack whose outermost frames are
# unknown, so it hangs under a root that says why instead of starting at
# whatever address the unwinder reached (no user-space address is this high).
STACK_CUT = 0xFFFF_FFFF_FFFF_FFFF  # the unwinder stopped before the outermost frame
STACK_TOO_DEEP = 0xFFFF_FFFF_FFFF_FFFE  # frames past the unwinder's limit were not kept
STACK_UNREADABLE = 0xFFFF_FFFF_FFFF_FFFD  # the stack's memory could not be read at the sample
JIT_MODULE = "[jit]"  # the module of code a perf map or jitdump names (perfmap.py, jitdump.py)
PSEUDO_ROOTS = {
    STACK_CUT: "[stack cut: the unwinder stopped here; outer frames unknown]",
    STACK_TOO_DEEP: "[deeper than the frames kept; outer frames not kept]",
    STACK_UNREADABLE: "[stack unreadable at the sample; outer frames unknown]",
}


class StackFrames:
    """Turns the runtime addresses of one process into function-level Frames (cached)."""

    def __init__(self, space: AddressSpace | None, symbolizer: Symbolizer | None,
                 images: ImageSpaces | None = None) -> None:
        self.space = space  # collectors.maps.AddressSpace (or the attach fallback)
        # collectors.symbols.Symbolizer (or fallback); with `images`, theirs, made when
        # first needed
        self._symbolizer = symbolizer
        self._images = images
        self.cache: dict[tuple[int, bool], list[Frame]] = {}
        self.sites: dict[int, tuple[str, int, CodeSite]] = {}  # leaf address -> its line
        self.jit: JitNames | None = None  # names of code outside every ELF mapping
        # Called at the first address outside every ELF mapping, to set `jit` then
        # (watch_jit_on_miss): most processes of a host never need one.
        self._watch_on_miss: Callable[[], None] | None = None

    @property
    def symbolizer(self) -> Symbolizer | None:
        if self._symbolizer is None and self._images is not None:
            self._symbolizer = self._images.symbolizer
        return self._symbolizer

    @classmethod
    def of_maps(cls, maps_text: str) -> StackFrames:
        """Frames through the executable mappings of a /proc/PID/maps text that a
        profile file embeds (no live process), symbolized from this machine's files."""
        from proftui.collectors.symbols.symbolizer import Symbolizer

        space = AddressSpace(None)
        space.add_maps(maps_text)
        return cls(space, Symbolizer())

    def resolve(self, address: int) -> tuple[str, int] | None:
        """Runtime address -> (module path, link-time address), or None."""
        if self.space is None:
            return None
        return self.space.resolve(address)

    def stack_frames(self, ips: Sequence[int]) -> list[Frame]:
        """Frames of a stack given innermost first, returned outermost first."""
        out: list[Frame] = []
        for depth in range(len(ips) - 1, -1, -1):
            out.extend(self.frames_at(ips[depth], depth == 0))
        return out

    def frames_at(self, address: int, leaf: bool) -> list[Frame]:
        """Frames (inlined ones expanded) at `address`; return addresses are looked up at addr-1."""
        key = (address, leaf)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        if address in PSEUDO_ROOTS:
            frames = self.cache[key] = [Frame(function=PSEUDO_ROOTS[address])]
            return frames
        # A return address points after the call: look up the call itself.
        lookup = address if leaf else address - 1
        resolved = self.resolve(lookup)
        if resolved is None and self.space is not None:
            self.space.refresh()  # a library loaded since the last look
            resolved = self.resolve(lookup)
        if resolved is None and self._watch_on_miss is not None:
            watch, self._watch_on_miss = self._watch_on_miss, None
            watch()
        jitted = self.jit.lookup(lookup) if resolved is None and self.jit is not None else None
        if jitted is not None:
            frames = [Frame(function=jitted[1], module=JIT_MODULE, address=jitted[0],
                            raw_name=jitted[1])]
        elif resolved is None or self.symbolizer is None:
            frames = [Frame(function=f"0x{address:x}", module="", address=address)]
        else:
            module, vaddr = resolved
            try:
                # The space knows where the file opens from (/proc/PID/root, map_files).
                readable = self.space.readable_path(module) if self.space is not None else None
                frames = self.symbolizer.frames(module, vaddr, readable) or [
                    Frame(function=f"{os.path.basename(module)}+0x{vaddr:x}",
                          module=module, address=vaddr)]
            except ProftuiError:
                frames = [Frame(function=f"{os.path.basename(module)}+0x{vaddr:x}",
                                module=module, address=vaddr)]
        self.cache[key] = frames
        return frames

    def leaf_site(self, address: int) -> tuple[str, int, CodeSite] | None:
        """(module, link-time address, its function and innermost source line) of a
        sampled leaf `address`, or None outside every known mapping (cached)."""
        found = self.sites.get(address)
        if found is not None:
            return found
        resolved = self.resolve(address)
        if resolved is None:
            return None  # not cached: a later refresh of the mappings may find it
        module, vaddr = resolved
        function = self.frames_at(address, True)[0]
        start = function.address if function.raw_name and not function.inlined else None
        file = line = None
        if self.symbolizer is not None:
            try:
                location = self.symbolizer.location(module, vaddr)
                file, line = location.file, location.line
            except ProftuiError:
                pass
        found = self.sites[address] = (module, vaddr, CodeSite(start, file, line))
        return found

    def lines_at(self, address: int, leaf: bool) -> list[tuple[str | None, int | None]]:
        """The source line each of `frames_at(address, leaf)` is at (same order): the
        innermost frame's is the instruction's, each outer frame's the call of the
        function inlined into it; (None, None) where unknown."""
        frames = self.frames_at(address, leaf)
        unknown: list[tuple[str | None, int | None]] = [(None, None)] * len(frames)
        resolved = self.resolve(address if leaf else address - 1)
        if resolved is None or self.symbolizer is None:
            return unknown
        try:
            location = self.symbolizer.location(*resolved)
        except ProftuiError:
            return unknown
        lines = [(inline.file, inline.line) for inline in reversed(location.inlined)]
        lines.append((location.file, location.line))
        return lines if len(lines) == len(frames) else unknown

    def call_sites(self, ips: Sequence[int], leaf_is_return: bool = False
                   ) -> list[tuple[Frame, str | None, int | None]]:
        """Every frame of a stack (`ips` innermost first, as `StackProfile.stack` takes
        them), innermost first, with the line it was at: what valgrind's "at" and "by"
        lines say, where the tree keeps functions only."""
        out: list[tuple[Frame, str | None, int | None]] = []
        for depth, ip in enumerate(ips):
            address = ip - 1 if depth == 0 and leaf_is_return else ip
            pairs = zip(self.frames_at(address, depth == 0), self.lines_at(address, depth == 0),
                        strict=True)
            out.extend((frame, file, line) for frame, (file, line) in reversed(list(pairs)))
        return out

    def forget_unresolved(self) -> None:
        """Drop cached lookups that found no module (call after new mappings appear)."""
        self.cache = {k: v for k, v in self.cache.items() if v[-1].module}

    def watch_jit(self, pid: int, uid: int, alive: bool = True) -> None:
        """Name code outside every ELF mapping from process `pid`'s perf map and jitdump
        files, trusted only if owned by `uid` and not older than the process (`alive`
        False: it ended, its pid maybe reused: files are read from our /tmp, not aged);
        collectors/symbols/jitdump.py."""
        assert self.space is not None
        space = self.space
        place = jit_place(pid, alive)
        self.jit = JitNames(PerfMap(pid, uid, space.overlaps, place=place), uid,
                            space.overlaps, space.jit_dumps, place)

    def watch_jit_on_miss(self, watch: Callable[[], None]) -> None:
        """Call `watch` (which calls watch_jit) at the first address no ELF mapping
        covers, not before."""
        self._watch_on_miss = watch

    def jit_grew(self) -> bool:
        """Whether a perf map or jitdump gained entries since the last call."""
        return self.jit is not None and self.jit.grew()

    def warnings(self) -> list[str]:
        found = list(self.symbolizer.warnings) if self.symbolizer is not None else []
        return found + (self.jit.warnings() if self.jit is not None else [])


class ImageSpaces:
    """The address space of each process image that wrote a runtime file, keyed by the
    file's name (a process that exec'd writes a new file: a new image), all sharing one
    symbolizer.  Fed by the runtimes' map logs (csrc/common: one entry per object loaded);
    not thread-safe: the collector's symbol lock guards it."""

    def __init__(self) -> None:
        self._symbolizer: Symbolizer | None = None
        self._wanted = False  # want_symbols(): the symbolizer is made on first use
        self._frames: dict[str, StackFrames] = {}
        self._pids_gone = False  # forget_pids(): no /proc/PID/maps for later images either

    def want_symbols(self) -> None:
        """The collector starts: a symbolizer is made when the first frame needs one
        (a run that symbolizes nothing never loads the ELF/DWARF readers)."""
        self._wanted = True

    @property
    def symbolizer(self) -> Symbolizer | None:
        if self._symbolizer is None and self._wanted:
            from proftui.collectors.symbols.symbolizer import Symbolizer

            self._symbolizer = Symbolizer()
        return self._symbolizer

    @symbolizer.setter
    def symbolizer(self, symbolizer: Symbolizer | None) -> None:
        self._symbolizer = symbolizer

    def frames_for(self, name: str, pid: int) -> StackFrames:
        """The address space of the image that wrote file `name`.

        Only the newest image of a pid may also look at /proc/PID/maps (for code
        loaded behind the runtime's back, e.g. glibc's own NSS modules): an older
        image's pid now shows another program.
        """
        frames = self._frames.get(name)
        if frames is None:
            space = AddressSpace(None)  # plain paths: the target shares our mount namespace
            frames = self._frames[name] = StackFrames(space, None, self)
            for other, other_frames in self._frames.items():
                if other != name and other_frames.space is not None \
                        and other_frames.space.pid == pid:
                    other_frames.space.pid = None  # that image exec'd: this one is newer
            space.pid = None if self._pids_gone else pid
            # The map outlives the process: read after its end too, expecting our own
            # uid then (we launched it; a reused pid's /proc would name another's).
            uid = os.geteuid() if self._pids_gone else process_uid(pid)
            frames.watch_jit(pid, uid, alive=not self._pids_gone)
        return frames

    def jit_grew(self) -> bool:
        """Whether a perf map or jitdump gained entries since the last call (stacks may
        name more); every image is asked, so each answers once."""
        return any([f.jit_grew() for f in self._frames.values()])

    def add_loads(self, name: str, pid: int,
                  loads: Sequence[tuple[int, int, int, str]]) -> None:
        """Objects loaded into image `name`: (start, end, file offset, path) each."""
        frames = self.frames_for(name, pid)
        assert frames.space is not None
        for start, end, offset, path in loads:
            frames.space.add(Mapping(start, end, offset, "r-xp", path))
        if loads:
            frames.forget_unresolved()

    def forget_pids(self) -> None:
        """The processes are gone (their pids maybe reused): map logs only from now on."""
        self._pids_gone = True
        for frames in self._frames.values():
            if frames.space is not None:
                frames.space.pid = None

    def warnings(self) -> list[str]:
        """The shared symbolizer's warnings (once, not once per image)."""
        found = list(self._symbolizer.warnings) if self._symbolizer is not None else []
        jit = (w for f in self._frames.values() if f.jit is not None for w in f.jit.warnings())
        return found + [w for w in jit if w is not None]


def make_symbolizer(pid: int | None, root: str | None = None) -> tuple[AddressSpace, Symbolizer]:
    """An AddressSpace + Symbolizer for `pid`.

    `root` defaults to /proc/PID/root (a running process in another mount namespace).
    """
    from proftui.collectors.symbols.symbolizer import Symbolizer

    if root is None:
        root = f"/proc/{pid}/root" if pid is not None else "/"
    return AddressSpace(pid, root=root), Symbolizer()
