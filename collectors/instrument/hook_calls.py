"""Where an instrumented binary calls the -finstrument-functions hooks.

A sampling clock's tick on a `call __cyg_profile_func_enter@plt` instruction,
or on the instruction right after it (the hook call's return address), is the
hook call's own cost: the call, the PLT's indirect jump and the return retire
around there, and samplers charge them to those two instructions.  With
glibc's empty hooks, perf put 24 % of a Lua run's samples on return addresses
alone (sort_comp, which makes ten hook calls per call, showed 17 % where the
uninstrumented build spends 3.5 %; index2value had a third of its samples on
its enter hook's call instruction).  Counting those ticks as instrumentation,
like the hooks' own code and PLT stubs, leaves each function the time of its
own work, with any hooks.  x86-64 call forms: `call rel32` to a hook's PLT stub
or definition, and `call *slot(%rip)` through its GOT slot (-fno-plt).
"""

from __future__ import annotations

import os

from proftui.collectors.symbols.elf import EM_X86_64, PT_LOAD, ElfFile

HOOK_NAMES = frozenset({"__cyg_profile_func_enter", "__cyg_profile_func_exit"})
_CALL_REL32 = 0xE8  # call rel32
_CALL_RIP = b"\xff\x15"  # call *disp32(%rip)


class _Module:
    """One binary's hook call targets (stub and definition addresses, GOT slots) and
    its loadable segments, to read the bytes before a code address."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.targets: set[int] = set()
        self.slots: set[int] = set()
        self.segments: list[tuple[int, int, int]] = []  # (vaddr, file offset, size)
        with ElfFile(path) as elf:
            if elf.machine != EM_X86_64:
                return
            self.segments = [(s.vaddr, s.offset, s.filesz) for s in elf.segments
                             if s.type == PT_LOAD]
            self.targets = {address for address, _size, name in elf.plt_symbols()
                            if name.split("@", 1)[0] in HOOK_NAMES}
            self.slots = {slot for slot, name in elf._got_slots().items() if name in HOOK_NAMES}
            for section_name in (".symtab", ".dynsym"):
                section = elf.section(section_name)
                if section is not None:
                    self.targets |= {value for value, _size, _bind, name
                                     in elf.function_symbols(section) if name in HOOK_NAMES}

    def before(self, vaddr: int, size: int) -> bytes:
        """The `size` bytes of the file ending at link-time `vaddr` ("" where unmapped)."""
        for start, offset, filesz in self.segments:
            if start <= vaddr - size and vaddr <= start + filesz:
                try:
                    fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    return b""
                try:
                    return os.pread(fd, size, offset + vaddr - size - start)
                finally:
                    os.close(fd)
        return b""

    def calls_hook(self, code: bytes, end: int) -> bool:
        """Whether the 6 bytes `code`, ending at link-time `end`, end in a hook call."""
        if len(code) != 6:
            return False
        if code[1] == _CALL_REL32:
            rel = int.from_bytes(code[2:6], "little", signed=True)
            if end + rel in self.targets:
                return True
        if code[:2] == _CALL_RIP:
            disp = int.from_bytes(code[2:6], "little", signed=True)
            return end + disp in self.slots
        return False

    def at_hook_call(self, vaddr: int) -> bool:
        """A hook call instruction starts, or its return address is, at `vaddr`."""
        if not self.targets and not self.slots:
            return False
        if self.calls_hook(self.before(vaddr, 6), vaddr):
            return True
        # A call starting here: 5 (rel32) or 6 (*disp32(%rip)) bytes long.
        return any(self.calls_hook(self.before(vaddr + n, 6), vaddr + n) and
                   self.before(vaddr + n, n)[:1] in (b"\xe8", b"\xff") for n in (5, 6))


class HookCalls:
    """Whether link-time code addresses are hook call instructions or their return
    addresses (cached per module and address; a module that cannot be read has none)."""

    def __init__(self) -> None:
        self._modules: dict[str, _Module | None] = {}
        self._seen: dict[tuple[str, int], bool] = {}

    def at_hook_call(self, path: str, vaddr: int) -> bool:
        """Whether the instruction at `vaddr` of `path` calls a hook or follows one."""
        key = (path, vaddr)
        found = self._seen.get(key)
        if found is None:
            module = self._module(path)
            found = self._seen[key] = module is not None and module.at_hook_call(vaddr)
        return found

    def _module(self, path: str) -> _Module | None:
        if path not in self._modules:
            try:
                self._modules[path] = _Module(path)
            except (OSError, ValueError):
                self._modules[path] = None
        return self._modules[path]
