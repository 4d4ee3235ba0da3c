"""Completion hooks: fired by the engine, never by the process, exactly once.

Journal: ``pending`` -> ``firing`` is one conditional update committed before
anything fires; ``fired`` or ``failed`` after. A ``firing`` row left by an
engine that stopped mid-fire becomes ``maybe_fired`` and is never refired.

A hook is a command (run with the result in ``WATCHKEEPER_RESULT`` and a few
plain variables) and/or a POST of the result as JSON, signed with
HMAC-SHA256 over the raw body in ``X-Watchkeeper-Signature: sha256=<hex>``,
and/or, for a run that came from GitHub, a comment and a label there
(:mod:`watchkeeper.procs.github_results`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import subprocess
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper import redact
from watchkeeper.clock import rfc3339
from watchkeeper.procs import layout
from watchkeeper.records.procs import HookState, ProcRun

if TYPE_CHECKING:
    from watchkeeper.config import ForgeConfig
    from watchkeeper.store.procs import ProcStore

log = logging.getLogger(__name__)
HOOK_TIMEOUT_S = 30.0
SIGNATURE_HEADER = "X-Watchkeeper-Signature"
SECRET_FILE = "hook-secret"  # noqa: S105 - a file name, not a secret
TAIL_LINES = 20


def result_of(run: ProcRun, data_dir: Path, now: datetime) -> dict[str, Any]:
    """What a hook is told: id, name, how it ended, duration and the redacted log tail."""
    text = layout.read_tail(layout.log_path(data_dir, run.run_id))
    return {
        "id": run.run_id,
        "name": run.name,
        "status": run.status.value,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "reason": run.reason,
        "duration_s": run.duration_s(now),
        "started_at": rfc3339(run.started_at),
        "finished_at": rfc3339(run.finished_at),
        "host": run.host,
        "origin": run.origin,
        "log_tail": redact.tail(text, TAIL_LINES),
    }


def hook_secret(data_dir: Path, configured: str | None) -> bytes:
    """The signing key: ``[ops] webhook_secret`` when set, else one kept in the data folder."""
    if configured:
        return configured.encode()
    path = layout.procs_dir(data_dir) / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        return _create_secret(path)


def _create_secret(path: Path) -> bytes:
    """Write a new key where several threads or processes may race to do the same.

    The key is written whole to a file of its own, then hard-linked into place:
    the link either appears complete or fails because another writer won, so no
    reader ever sees an empty or half-written key, and every racer ends with the
    winner's.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f"{path.name}.{secrets.token_hex(8)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32))
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink(missing_ok=True)
    return path.read_bytes().strip()


def sign(secret: bytes, body: bytes) -> str:
    """The signature header's value for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def fire_due(
    procs: ProcStore,
    data_dir: Path,
    secret: bytes,
    engine_key: str,
    now: datetime,
    *,
    forge: ForgeConfig | None = None,
) -> list[tuple[str, HookState]]:
    """Fire once every due hook of the runs ``engine_key`` (host and data folder) settles.

    ``forge`` has what posts the result of a run that came from GitHub; without it
    that post fails for want of a token. Returns (run id, final state) for each hook fired.
    """
    fired = []
    for run in procs.due_hooks(engine_key):
        if not procs.claim_hook(run.run_id, now):
            continue  # another engine claimed it first
        errors = _fire(run, result_of(run, data_dir, now), data_dir, secret, forge)
        state = HookState.FAILED if errors else HookState.FIRED
        procs.settle_hook(run.run_id, state, "; ".join(errors) or None, now)
        log.info(
            "Completion hooks of process run %s: %s",
            run.run_id,
            state.value,
            extra={"action": "proc_hook"},
        )
        fired.append((run.run_id, state))
    return fired


def _fire(
    run: ProcRun,
    result: dict[str, Any],
    data_dir: Path,
    secret: bytes,
    forge: ForgeConfig | None,
) -> list[str]:
    body = json.dumps(result, sort_keys=True).encode()
    errors = []
    if run.on_done_cmd:
        errors += _run_command(run, result, body, data_dir)
    if run.on_done_url:
        errors += _post(run.on_done_url, body, secret)
    if run.origin and run.origin.get("platform") == "github":
        from watchkeeper.procs.github_results import GitHubResults  # its HTTP client when needed

        errors += GitHubResults(forge).post_result(run, result)
    return errors


def _run_command(run: ProcRun, result: dict[str, Any], body: bytes, data_dir: Path) -> list[str]:
    assert run.on_done_cmd is not None
    env = {
        **os.environ,
        "WATCHKEEPER_RESULT": body.decode(),
        "WATCHKEEPER_RUN_ID": run.run_id,
        "WATCHKEEPER_RUN_NAME": run.name,
        "WATCHKEEPER_RUN_STATUS": run.status.value,
        "WATCHKEEPER_EXIT_CODE": "" if run.exit_code is None else str(run.exit_code),
        "WATCHKEEPER_DURATION_S": f"{result['duration_s'] or 0:.3f}",
    }
    cwd = run.cwd if Path(run.cwd).is_dir() else None
    hook_log = layout.run_dir(data_dir, run.run_id) / layout.HOOKS_LOG_NAME
    try:
        with hook_log.open("ab") as output:
            done = subprocess.run(
                ["/bin/sh", "-c", run.on_done_cmd],
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                timeout=HOOK_TIMEOUT_S,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return [f"--on-done command did not finish within {HOOK_TIMEOUT_S:g} s"]
    except OSError as exc:
        return [f"--on-done command could not run: {exc.strerror}"]
    return [] if done.returncode == 0 else [f"--on-done command exited with {done.returncode}"]


def _post(url: str, body: bytes, secret: bytes) -> list[str]:
    import httpx

    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body)}
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=10.0)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # InvalidURL is not an HTTPError: a URL no client can send to must fail this hook,
        # not the reaping of every run after it.
        return [f"--on-done-url {url}: {type(exc).__name__}: {exc}"]
    if response.is_success:
        return []
    return [f"--on-done-url {url} answered HTTP {response.status_code}"]
