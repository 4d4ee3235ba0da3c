"""Witness keys: a run's record holds a key that checks signatures but cannot make them."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from watchkeeper.procs import witness
from watchkeeper.procs.witness import Witness, WitnessForged

ENDED = Witness("p-1", 0, None, 1700000000.5)


def test_the_shims_key_signs_and_the_records_key_checks(tmp_path: Path) -> None:
    signing, verifying = witness.new_key_pair()
    assert signing != verifying
    assert signing.startswith(witness.ED25519) and verifying.startswith(witness.ED25519)
    witness.write(tmp_path, ENDED, signing)
    assert witness.read(tmp_path, "p-1", verifying) == ENDED


def test_the_records_key_cannot_sign_what_it_checks(tmp_path: Path) -> None:
    _, verifying = witness.new_key_pair()
    witness.write(tmp_path, ENDED, verifying)  # a command that took the key from the store
    with pytest.raises(WitnessForged):
        witness.read(tmp_path, "p-1", verifying)


def test_another_runs_key_and_an_edited_witness_are_refused(tmp_path: Path) -> None:
    signing, verifying = witness.new_key_pair()
    _, other = witness.new_key_pair()
    witness.write(tmp_path, Witness("p-1", 3, None, 1.0), signing)
    with pytest.raises(WitnessForged):
        witness.read(tmp_path, "p-1", other)
    path = tmp_path / witness.WITNESS_NAME
    said = json.loads(path.read_text())
    path.write_text(json.dumps({**said, "exit_code": 0}))
    with pytest.raises(WitnessForged):
        witness.read(tmp_path, "p-1", verifying)


def test_a_shared_key_of_an_older_run_still_signs_and_checks(tmp_path: Path) -> None:
    shared = secrets.token_hex(32)
    witness.write(tmp_path, ENDED, shared)
    assert witness.read(tmp_path, "p-1", shared) == ENDED
    _, verifying = witness.new_key_pair()
    with pytest.raises(WitnessForged):  # an HMAC is no Ed25519 signature
        witness.read(tmp_path, "p-1", verifying)


@pytest.mark.parametrize(
    ("key", "usable"),
    [
        (witness.ED25519 + "0f" * 32, True),
        ("ab" * 32, True),  # an older run's shared secret
        ("", False),
        (witness.ED25519 + "ab" * 31, False),
        (witness.ED25519 + "zz" * 32, False),
    ],
    ids=["seed", "shared", "empty", "short-seed", "not-hex"],
)
def test_a_key_the_shim_cannot_sign_with_is_told_apart(key: str, usable: bool) -> None:
    assert witness.usable(key) is usable


@pytest.mark.parametrize("given", [None, 7, "", "not hex", "ab" * 32, "ab" * 64])
def test_a_misshapen_signature_never_checks(given: object) -> None:
    _, verifying = witness.new_key_pair()
    assert witness.verify(verifying, b"message", given) is False
