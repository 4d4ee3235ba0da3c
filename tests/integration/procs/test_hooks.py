"""Completion hooks: fired by the engine, exactly once, even across a restart."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from watchkeeper.clock import ManualClock, utcnow
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import hooks, identity
from watchkeeper.procs.engine import FIRING_STALE_S, ProcEngine
from watchkeeper.records.procs import HookState, NewProc, ProcStatus
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ..recorder import recording_server
from .conftest import start_detached, wait_witness


@contextmanager
def watchkeeper_process(tmp_path: Path, store: Store, clock: object = utcnow) -> Iterator[Runtime]:
    """One life of watchkeeper: open the runtime (start-up reconciliation), then stop."""
    settings = make_settings(tmp_path, store.url, ops={"webhook_secret": "hook-key"})
    runtime = Runtime.open(
        settings,
        store=store,
        clock=clock,
        notifier=OpsNotifier(settings.ops),  # type: ignore[arg-type]
    )
    try:
        yield runtime
    finally:
        runtime.sweeper.close()


def sweep(runtime: Runtime) -> None:
    asyncio.run(runtime.sweeper.sweep())


def test_hooks_fire_exactly_once_across_a_restart(
    tmp_path: Path, store: Store, engine: ProcEngine
) -> None:
    fired_file = tmp_path / "fired.txt"
    with recording_server() as recorder:
        # Started by one watchkeeper process, which then goes away before the command exits.
        run = start_detached(
            engine,
            "sh",
            "-c",
            "echo step one; echo api_key=sk-abcdefghijklmnopqrstuv; exit 2",
            name="suite",
            on_done_cmd=f'echo "$WATCHKEEPER_RUN_ID $WATCHKEEPER_EXIT_CODE" >> {fired_file}',
            on_done_url=f"{recorder.url}/done",
        )
        wait_witness(engine, run)
        assert engine.get(run.run_id).hook_state is HookState.WAITING
        with watchkeeper_process(tmp_path, store) as first:
            sweep(first)
            sweep(first)
        with watchkeeper_process(tmp_path, store) as second:
            sweep(second)
        assert fired_file.read_text().splitlines() == [f"{run.run_id} 2"]
        assert len(recorder.requests) == 1
        request = recorder.requests[0]
    done = engine.get(run.run_id)
    assert (done.status, done.hook_state) == (ProcStatus.FAILED, HookState.FIRED)
    signature = hmac.new(b"hook-key", request.body, hashlib.sha256).hexdigest()
    assert request.headers[hooks.SIGNATURE_HEADER] == f"sha256={signature}"
    result = request.json()
    assert (result["id"], result["name"], result["exit_code"]) == (run.run_id, "suite", 2)
    assert result["duration_s"] >= 0
    assert "step one" in result["log_tail"]
    assert "sk-abcdefghijklmnopqrstuv" not in result["log_tail"]
    assert "[redacted]" in result["log_tail"]


def test_a_hook_caught_firing_becomes_maybe_fired_and_is_never_refired(
    tmp_path: Path, store: Store, engine: ProcEngine
) -> None:
    fired_file = tmp_path / "fired.txt"
    now = utcnow()
    new = NewProc(
        "p-crashed00001",
        "crashed",
        ("true",),
        str(tmp_path),
        identity.host(),
        "me",
        identity.boot_id(),
        detach=True,
        on_done_cmd=f"echo fired >> {fired_file}",
    )
    engine.procs.register(new, now)
    engine.procs.finish(new.run_id, ProcStatus.SUCCEEDED, now, exit_code=0)
    # The engine committed firing, then stopped before it could say fired.
    assert engine.procs.claim_hook(new.run_id, now)
    clock = ManualClock(now)
    clock.advance(FIRING_STALE_S + 1)
    with watchkeeper_process(tmp_path, store, clock) as restarted:
        assert engine.get(new.run_id).hook_state is HookState.MAYBE_FIRED
        sweep(restarted)
    assert not fired_file.exists()
    shown = engine.describe(engine.get(new.run_id))
    assert shown["hook_state"] == "maybe_fired"
    assert "may or may not" in shown["hook_error"]


def test_a_failing_hook_is_recorded_once(tmp_path: Path, store: Store, engine: ProcEngine) -> None:
    with recording_server(status=500) as recorder:
        run = start_detached(engine, "true", on_done_url=recorder.url)
        wait_witness(engine, run)
        engine.reap()
        engine.reap()
        assert len(recorder.requests) == 1
    done = engine.get(run.run_id)
    assert done.hook_state is HookState.FAILED
    assert done.hook_error == f"--on-done-url {recorder.url} answered HTTP 500"
    assert json.loads(recorder.requests[0].body)["status"] == "succeeded"


def test_a_hook_url_that_cannot_be_sent_to_is_recorded_failed_and_reaping_goes_on(
    tmp_path: Path, store: Store, engine: ProcEngine
) -> None:
    # It starts like a URL, so it passed the API's first check, but no client can send to it.
    run = start_detached(engine, "true", on_done_url="http://\\ª/done")
    wait_witness(engine, run)
    engine.reap()  # used to raise InvalidURL: the reclaim endpoint answered 500
    done = engine.get(run.run_id)
    assert done.status is ProcStatus.SUCCEEDED
    assert done.hook_state is HookState.FAILED
    assert done.hook_error is not None and "InvalidURL" in done.hook_error
