"""/proc/PID/status read once, one way, for every reader (uids, signal masks,
namespaced pids, peak RSS...).

The "Name:" line holds the comm's raw bytes, which need not be UTF-8: values are
decoded with backslash escapes, never refused.
"""

from __future__ import annotations


def parse_status(data: bytes) -> dict[str, str]:
    """The fields of a /proc/PID/status text ("Uid" -> "1000\\t1000\\t1000\\t1000")."""
    fields: dict[str, str] = {}
    for line in data.decode("utf-8", "backslashreplace").splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def proc_status(pid: int, tid: int | None = None) -> dict[str, str]:
    """/proc/PID/status (or /proc/PID/task/TID/status) as a dict; empty if gone or
    not readable."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    try:
        with open(path, "rb") as f:
            return parse_status(f.read())
    except OSError:
        return {}


def status_ints(fields: dict[str, str], key: str, base: int = 10) -> list[int]:
    """The numbers of one field ("Uid" -> [real, effective, saved, filesystem]);
    empty when the field is missing or not numbers."""
    try:
        return [int(v, base) for v in fields.get(key, "").split()]
    except ValueError:
        return []


def status_bytes(fields: dict[str, str], key: str) -> int | None:
    """A size field ("VmHWM" -> "2048 kB") in bytes; None when missing or odd."""
    words = fields.get(key, "").split()
    if len(words) != 2 or words[1] != "kB" or not words[0].isdigit():
        return None
    return int(words[0]) * 1024
