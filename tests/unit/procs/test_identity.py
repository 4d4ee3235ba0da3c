"""Ownership: a pid is ours only with its recorded start time, on this host and boot."""

from __future__ import annotations

import os
import subprocess

from watchkeeper.procs import identity
from watchkeeper.procs.identity import Ownership


def test_this_process_is_ours() -> None:
    me = os.getpid()
    start = identity.start_time(me)
    assert start is not None
    assert identity.ownership(identity.host(), identity.boot_id(), me, start) is Ownership.OURS
    assert identity.alive(Ownership.OURS) is True


def test_a_recycled_pid_is_not_ours() -> None:
    me = os.getpid()
    found = identity.ownership(identity.host(), identity.boot_id(), me, "t1")
    assert found is Ownership.RECYCLED
    assert identity.alive(found) is False


def test_a_finished_process_is_gone_even_as_a_zombie() -> None:
    child = subprocess.Popen(["true"])
    try:
        # Read as its parent would: ``true`` may already have exited, unreaped.
        start = identity.start_time(child.pid, allow_zombie=True)
        assert start is not None
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
        assert identity.start_time(child.pid) is None
        assert identity.start_time(child.pid, allow_zombie=True) == start
    finally:
        child.wait()
    assert identity.ownership(identity.host(), None, child.pid, start) is Ownership.GONE


def test_another_host_cannot_be_told_and_another_boot_is_dead() -> None:
    me, start = os.getpid(), identity.start_time(os.getpid())
    assert identity.ownership("elsewhere", None, me, start) is Ownership.UNKNOWN
    assert identity.alive(Ownership.UNKNOWN) is None
    other_boot = identity.ownership(identity.host(), "another-boot", me, start)
    assert other_boot is (Ownership.GONE if identity.boot_id() else Ownership.OURS)
