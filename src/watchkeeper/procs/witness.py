"""The witness file: how a run's exit becomes a fact the engine trusts.

The shim, not the command, writes it once the command has exited, through a
temporary file, ``fsync`` and an atomic rename: a reader sees the whole file
or none. A file that is still unreadable (truncated by a full disk, edited by
hand) is reported as :class:`WitnessCorrupt`, never guessed at.

The run's folder is writable by the command, so the shim signs the witness.
Each run has an Ed25519 key pair: the launcher hands the private half (its
seed) to the shim on the handshake socket and records only the public half, so
a command that reads the store (its own user may) finds nothing to sign with.
A witness whose signature does not check is :class:`WitnessForged`, and says
nothing about how the run ended. Runs recorded before key pairs keep a shared
HMAC-SHA256 key in the store, which their shims (and anybody reading the
store) can sign with: a key without the :data:`ED25519` prefix is one.

A signature says who wrote a witness, not that it is the last word: the engine
believes one only once the shim and the command it names have both exited
(:mod:`watchkeeper.procs.settle`).

Stdlib and the leaf :mod:`watchkeeper.errors` when imported: the shim imports this module
and must start fast. PyNaCl is loaded only to make, sign with or check an Ed25519 key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import NamedTuple

from watchkeeper.errors import WatchkeeperError

# Paths are plain strings or path-likes: pathlib costs the shim milliseconds at start.
PathLike = str | os.PathLike[str]

WITNESS_NAME = "witness.json"
LOG_NAME = "output.log"
OWNER_NAME = "owner.json"


class WitnessCorrupt(WatchkeeperError):
    """A witness file exists but does not say how the run ended.

    The engine catches it and records the reason. This module is imported by
    the shim, which must not pay for the package's imports: it imports only the
    leaf :mod:`watchkeeper.errors`, which needs nothing but the standard library.
    """


class WitnessForged(WatchkeeperError):
    """A witness the shim did not sign: the command (or anybody) wrote it.

    The engine ignores it and judges the run by its processes.
    """


class Witness(NamedTuple):
    """How the command ended: an exit code or a signal, and when."""

    run_id: str
    exit_code: int | None
    signal: int | None
    ended_at: float
    error: str | None = None  # the command could not be started at all

    @property
    def succeeded(self) -> bool:
        """Exited with status 0 of its own accord.

        A command the shim ended (its owner went away, its lease ran out) did not
        succeed, even if a trap made it exit 0: the witness then says why it ended.
        """
        return self.exit_code == 0 and self.signal is None and self.error is None


def write_json_atomic(path: PathLike, data: dict[str, object]) -> None:
    """Write ``data`` to ``path`` so a reader sees all of it or nothing."""
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, json.dumps(data).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


_SIGNED = ("run_id", "exit_code", "signal", "ended_at", "error")
SIGNATURE = "signature"
#: How an Ed25519 key is written: this prefix, then 64 hex digits. The shim's key is the
#: private seed, the run's record holds the public key. A key without it is a shared
#: HMAC-SHA256 secret (runs recorded before key pairs).
ED25519 = "ed25519:"
_HEX = frozenset("0123456789abcdef")


def new_key_pair() -> tuple[str, str]:
    """A fresh run's ``(signing key, verifying key)``: the shim's seed and the record's key."""
    # PyNaCl's bindings, not nacl.signing: half the import, which launchers and shims pay.
    from nacl.bindings import crypto_sign_seed_keypair

    seed = os.urandom(32)
    public, _ = crypto_sign_seed_keypair(seed)
    return ED25519 + seed.hex(), ED25519 + public.hex()


def usable(key: str) -> bool:
    """Whether the shim can sign with ``key``: an Ed25519 seed, or any non-empty secret."""
    if not key.startswith(ED25519):
        return bool(key)
    digits = key[len(ED25519) :]
    return len(digits) == 64 and set(digits) <= _HEX


def sign(key: str, message: bytes) -> str:
    """The hex signature of ``message``: Ed25519 with a seed, else HMAC-SHA256 with a secret."""
    if key.startswith(ED25519):
        from nacl.bindings import crypto_sign, crypto_sign_BYTES, crypto_sign_seed_keypair

        _, secret = crypto_sign_seed_keypair(bytes.fromhex(key[len(ED25519) :]))
        return crypto_sign(message, secret)[:crypto_sign_BYTES].hex()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def verify(key: str, message: bytes, given: object) -> bool:
    """Whether ``given`` is a signature of ``message`` under the run's ``key`` (as recorded)."""
    if not isinstance(given, str):
        return False
    if not key.startswith(ED25519):
        expected = hmac.new(key.encode(), message, hashlib.sha256).hexdigest()
        return hmac.compare_digest(given, expected)
    from nacl.bindings import crypto_sign_BYTES, crypto_sign_open, crypto_sign_PUBLICKEYBYTES
    from nacl.exceptions import BadSignatureError

    try:
        public, signed = bytes.fromhex(key[len(ED25519) :]), bytes.fromhex(given)
    except ValueError:
        return False
    if len(public) != crypto_sign_PUBLICKEYBYTES or len(signed) != crypto_sign_BYTES:
        return False
    try:
        crypto_sign_open(signed + message, public)
    except BadSignatureError:
        return False
    return True


def _message(data: dict[str, object]) -> bytes:
    return json.dumps([data.get(name) for name in _SIGNED]).encode()


def signature(key: str, data: dict[str, object]) -> str:
    """The signature of the fields that say how the run ended, under the shim's ``key``."""
    return sign(key, _message(data))


def write(run_dir: PathLike, witness: Witness, key: str | None = None) -> None:
    """Record ``witness`` in ``run_dir``, signed with ``key`` when there is one."""
    data: dict[str, object] = {
        "run_id": witness.run_id,
        "exit_code": witness.exit_code,
        "signal": witness.signal,
        "ended_at": witness.ended_at,
        "error": witness.error,
    }
    if key:
        data[SIGNATURE] = signature(key, data)
    write_json_atomic(os.path.join(run_dir, WITNESS_NAME), data)


def read(run_dir: PathLike, run_id: str, key: str | None = None) -> Witness | None:
    """The witness in ``run_dir``; ``None`` if there is none yet.

    With ``key`` (the run's recorded key: an Ed25519 public key, or an older
    run's shared secret), one not signed with it raises :class:`WitnessForged`;
    without one (a run recorded before runs had keys), any well-formed witness
    is taken as before.
    """
    path = os.path.join(run_dir, WITNESS_NAME)
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WitnessCorrupt(f"{path}: cannot be read: {exc.strerror}") from None
    return _parse(raw, path, run_id, key)


def _parse(raw: bytes, path: str, run_id: str, key: str | None) -> Witness:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise WitnessCorrupt(f"{path}: not valid JSON ({len(raw)} bytes)") from None
    if not isinstance(data, dict) or data.get("run_id") != run_id:
        raise WitnessCorrupt(f"{path}: not the witness of run {run_id}")
    if key and not verify(key, _message(data), data.get(SIGNATURE)):
        raise WitnessForged(f"{path}: not signed by the run's shim")
    exit_code, signal, ended = data.get("exit_code"), data.get("signal"), data.get("ended_at")
    if not isinstance(ended, int | float) or (exit_code is None) == (signal is None):
        raise WitnessCorrupt(f"{path}: needs ended_at and exactly one of exit_code or signal")
    if not all(isinstance(v, int) for v in (exit_code, signal) if v is not None):
        raise WitnessCorrupt(f"{path}: exit_code and signal must be integers")
    error = data.get("error")
    return Witness(
        run_id, exit_code, signal, float(ended), error if isinstance(error, str) else None
    )


def exists(run_dir: PathLike) -> bool:
    """Whether a witness file (readable or not) is present."""
    return os.path.exists(os.path.join(run_dir, WITNESS_NAME))
