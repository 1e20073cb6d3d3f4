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


def uid_of(pid: int) -> int:
    """The uid owning process `pid` (/proc/PID's owner: its effective uid), -1 when gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def user_name(uid: int) -> str:
    """The name of user `uid` (the number when unnamed; "" for -1, unknown)."""
    if uid < 0:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
