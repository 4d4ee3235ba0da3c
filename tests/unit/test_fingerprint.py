"""One failure fingerprint for every kind: what counts as "the same failure"."""

from __future__ import annotations

import pytest

from watchkeeper.contract import fingerprint

SAME = [
    ("exited with status 1", "exited with status 137"),
    ("DNS lookup failed for host 10.0.0.7", "DNS lookup failed for host 10.0.0.9"),
    ("segfault at 0x7ffd1a2b", "segfault at 0x55aa00ff"),
    ("job 3f2a9c1e4b7d lost its lease", "job 9e8d7c6b5a4f lost its lease"),
    ("Timeout  after\t30 s", "timeout after 45 s"),
    ("Disk Full", "disk full"),
    ("  padded\nreason ", "padded reason"),
]

DIFFERENT = [
    ("disk full", "permission denied"),
    ("exited with status 1", "killed by signal 9 (SIGKILL)"),
    ("timeout reading page", "timeout writing page"),
    ("", "failed"),
]


@pytest.mark.parametrize(("one", "other"), SAME)
def test_reasons_that_differ_in_numbers_ids_case_or_spacing_are_one_failure(
    one: str, other: str
) -> None:
    assert fingerprint(one) == fingerprint(other)


@pytest.mark.parametrize(("one", "other"), DIFFERENT)
def test_reasons_that_differ_in_words_are_different_failures(one: str, other: str) -> None:
    assert fingerprint(one) != fingerprint(other)


def test_the_algorithm_is_pinned() -> None:
    # Stored incidents and dismissals hold these digests: a new algorithm reopens them all.
    assert fingerprint("Exited with status 137") == fingerprint("exited with status #")
    assert fingerprint("exited with status 137") == "4e880878b6184f80"
