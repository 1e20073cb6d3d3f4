"""The vDSO as a file the symbolizer can open.

clock_gettime, gettimeofday, time and getcpu run in the vDSO: an ELF image the
kernel maps into every process with no file behind it ("[vdso]" in
/proc/PID/maps; the runtimes' map logs use the same name).  Its image is read
from the process's memory into an anonymous memory file, which then opens as
/proc/self/fd/N like any module.  A process that is gone is read from
proftui's own image: one kernel maps the same image into every 64-bit process,
and the runtimes that log it are 64-bit only.  A live process whose memory may
not be read gets no vDSO names rather than perhaps the wrong ones.
"""

from __future__ import annotations

import errno
import functools
import os

VDSO = "[vdso]"


def vdso_file(pid: int | None) -> str | None:
    """A path that opens the vDSO image of process `pid` (None: a process that is
    gone, or proftui's own), or None when it cannot be read."""
    image = None
    if pid is not None:
        image, gone = _image(str(pid))
        if image is None and not gone:
            return None
    if image is None:
        image, _ = _image("self")
    return _memory_file(image) if image else None


@functools.cache
def _memory_file(image: bytes) -> str:
    """One memory file per distinct image, open for the life of this process."""
    fd = os.memfd_create("proftui-vdso", os.MFD_CLOEXEC)
    os.write(fd, image)
    return f"/proc/self/fd/{fd}"


def _image(who: str) -> tuple[bytes | None, bool]:
    """(the [vdso] mapping's bytes or None, whether the process is gone)."""
    try:
        with open(f"/proc/{who}/maps") as f:
            lines = [line for line in f.read().splitlines() if line.endswith(" " + VDSO)]
        if not lines:
            return None, False
        lo, hi = (int(x, 16) for x in lines[0].split()[0].split("-"))
        with open(f"/proc/{who}/mem", "rb", buffering=0) as mem:
            mem.seek(lo)
            data = mem.read(hi - lo)
    except OSError as exc:
        return None, exc.errno in (errno.ENOENT, errno.ESRCH)
    except ValueError:
        return None, False
    return (data if data.startswith(b"\x7fELF") else None), False
