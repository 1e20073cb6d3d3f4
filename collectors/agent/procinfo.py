"""What /proc says of a sampled process: its user, and whether it shares our mount
namespace."""

from __future__ import annotations

import os
import pwd


def own_mount_namespace() -> int:
    """The inode of our own mount namespace (-1 when /proc does not say)."""
    try:
        return os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return -1


def user_of(pid: int) -> str:
    """The name of the user owning process `pid` (its uid when unnamed; "" when gone)."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
