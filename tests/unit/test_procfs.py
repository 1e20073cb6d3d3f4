"""collectors/procfs.py: the one /proc/PID/status reader."""

from __future__ import annotations

import os

from proftui.collectors.procfs import parse_status, proc_status, status_bytes, status_ints


def test_fields_numbers_and_odd_bytes() -> None:
    data = (b"Name:\tw\xffrk\xe2\x82\xac\nUid:\t1000\t1001\t1002\t1003\n"
            b"SigBlk:\t0000000000002000\nNSpid:\t4242\t7\nGroups:\t\nVmHWM:\t  2048 kB\n")
    fields = parse_status(data)
    assert fields["Name"] == "w\\xffrk\u20ac"  # escaped, never refused
    assert status_ints(fields, "Uid") == [1000, 1001, 1002, 1003]
    assert status_ints(fields, "SigBlk", 16) == [0x2000]
    assert status_ints(fields, "NSpid")[-1] == 7  # the pid inside the innermost namespace
    assert status_ints(fields, "Groups") == []
    assert status_ints(fields, "VmHWM") == []  # "kB" is not a number: no silent guess
    assert status_bytes(fields, "VmHWM") == 2048 * 1024
    assert status_bytes(fields, "Uid") is None and status_bytes(fields, "Missing") is None
    assert status_ints(fields, "Missing") == []


def test_own_process_and_a_gone_one() -> None:
    mine = proc_status(os.getpid())
    assert status_ints(mine, "Uid")[1] == os.geteuid()
    assert status_ints(mine, "Tgid") == [os.getpid()]
    assert proc_status(os.getpid(), os.getpid())["Pid"] == str(os.getpid())
    assert status_bytes(mine, "VmHWM") > 1 << 20  # a Python process holds over 1 MiB
    assert proc_status(2**22 + 12345) == {}  # above pid_max: never a process
