"""A run that came from a GitHub pull request or issue says how it ended there, once.

GitHub is a local server here that speaks the few REST calls used (comments, labels),
behind a bearer token, and keeps every call it was asked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from watchkeeper.cli.app.report import _parse_origin
from watchkeeper.clock import ManualClock, utcnow
from watchkeeper.config import ForgeConfig
from watchkeeper.errors import InvalidInput
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.procs import identity, layout
from watchkeeper.procs.engine import FIRING_STALE_S, ProcEngine
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import HookState, NewProc, ProcStatus
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.cli import wk
from ...support.json_server import JsonHandler, JsonServer, answering
from .conftest import kill_leftovers, start_detached, wait_witness

TOKEN = "ghp-results-token"
ISSUE = "/repos/acme/app/issues/42"
ORIGIN = {"platform": "github", "chat_id": "acme/app", "thread_id": "42"}
PUBLIC = "https://wk.example.test"


class FakeGitHub(JsonServer):
    """Comments and labels of issues, behind a bearer token; every call kept."""

    calls: list[tuple[str, str]]
    comments: list[str]
    labels: set[str]


class _Issues(JsonHandler):
    server: FakeGitHub

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if not self._allowed("POST"):
            return
        if self.path == f"{ISSUE}/comments":
            self.server.comments.append(body["body"])
            self.send_json(201, {"id": len(self.server.comments)})
        elif self.path == f"{ISSUE}/labels":
            self.server.labels.update(body["labels"])
            self.send_json(200, [{"name": name} for name in sorted(self.server.labels)])
        else:
            self.send_json(404, {"message": "Not Found"})

    def do_DELETE(self) -> None:
        if not self._allowed("DELETE"):
            return
        prefix = f"{ISSUE}/labels/"
        name = unquote(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
        if name is None or name not in self.server.labels:
            self.send_json(404, {"message": "Label does not exist"})
            return
        self.server.labels.discard(name)
        self.send_json(200, [{"name": label} for label in sorted(self.server.labels)])

    def _allowed(self, method: str) -> bool:
        self.server.calls.append((method, unquote(self.path)))
        if self.headers.get("Authorization") == f"Bearer {TOKEN}":
            return True
        self.send_json(401, {"message": "Bad credentials"})
        return False


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(("127.0.0.1", 0), _Issues)
    fake.calls, fake.comments, fake.labels = [], [], {"bug"}
    with answering(fake):
        yield fake


def _forge(github: FakeGitHub, token: str = TOKEN) -> dict[str, Any]:
    return {"github_token": token, "github_api_url": github.url, "public_url": PUBLIC}


@pytest.fixture
def engine(store: Store, data_dir: Path, github: FakeGitHub) -> Iterator[ProcEngine]:
    """An engine that may post to the fake GitHub."""
    forge = ForgeConfig(**_forge(github))
    opened = ProcEngine(store, data_dir, clock=utcnow, grace_s=2.0, forge=forge)
    yield opened
    kill_leftovers(opened)


@contextmanager
def watchkeeper_process(
    tmp_path: Path, store: Store, github: FakeGitHub, clock: object = utcnow
) -> Iterator[Runtime]:
    """One life of watchkeeper: open the runtime (start-up reconciliation), then stop."""
    settings = make_settings(tmp_path, store.url, forge=_forge(github))
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


def _ended(engine: ProcEngine, script: str) -> tuple[str, HookState]:
    run = start_detached(engine, "sh", "-c", script, name="suite", origin=ORIGIN)
    wait_witness(engine, run)
    engine.reap()
    done = engine.get(run.run_id)
    return done.run_id, done.hook_state


def test_a_run_that_exits_0_comments_once_and_is_labelled_ready(
    engine: ProcEngine, github: FakeGitHub
) -> None:
    script = "echo step one; echo api_key=sk-abcdefghijklmnopqrstuv; exit 0"
    run_id, state = _ended(engine, script)
    engine.reap()
    assert state is HookState.FIRED
    assert len(github.comments) == 1
    comment = github.comments[0]
    assert "succeeded" in comment and "exit code 0" in comment
    assert "step one" in comment and "[redacted]" in comment
    assert "sk-abcdefghijklmnopqrstuv" not in comment
    assert f"{PUBLIC}/web/procs/{run_id}" in comment
    assert github.labels == {"bug", "watchkeeper:ready"}
    # Labelled waiting when it started, the waiting label taken off when it ended.
    assert github.calls[0] == ("POST", f"{ISSUE}/labels")
    assert ("DELETE", f"{ISSUE}/labels/watchkeeper:waiting") in github.calls


def test_a_run_that_exits_1_is_labelled_failed(engine: ProcEngine, github: FakeGitHub) -> None:
    _, state = _ended(engine, "echo broke; exit 1")
    assert state is HookState.FIRED
    assert len(github.comments) == 1
    assert "failed" in github.comments[0] and "exit code 1" in github.comments[0]
    assert github.labels == {"bug", "watchkeeper:failed"}


@pytest.mark.parametrize(
    ("last_line", "label", "said"),
    [
        ("BLOCKED: waiting for review", "watchkeeper:blocked", "waiting for review"),
        ("PARKED: back after the freeze", "watchkeeper:parked", "back after the freeze"),
        ("DONE", "watchkeeper:ready", "Done"),
    ],
)
def test_the_last_line_declares_the_label(
    engine: ProcEngine, github: FakeGitHub, last_line: str, label: str, said: str
) -> None:
    _ended(engine, f"echo working; echo '{last_line}'")
    assert github.labels == {"bug", label}
    assert len(github.comments) == 1 and said in github.comments[0]


def test_a_restart_in_the_middle_posts_nothing_twice(
    tmp_path: Path, store: Store, engine: ProcEngine, github: FakeGitHub
) -> None:
    run = start_detached(engine, "sh", "-c", "echo hi; exit 0", origin=ORIGIN)
    wait_witness(engine, run)
    assert engine.get(run.run_id).hook_state is HookState.WAITING
    with watchkeeper_process(tmp_path, store, github) as first:
        asyncio.run(first.sweeper.sweep())
        asyncio.run(first.sweeper.sweep())
    with watchkeeper_process(tmp_path, store, github) as second:
        asyncio.run(second.sweeper.sweep())
    assert len(github.comments) == 1
    assert engine.get(run.run_id).hook_state is HookState.FIRED


def test_a_post_caught_between_claim_and_call_is_maybe_posted_never_posted_again(
    tmp_path: Path, store: Store, engine: ProcEngine, github: FakeGitHub
) -> None:
    now = utcnow()
    new = NewProc(
        "p-crashedgh001",
        "crashed",
        ("true",),
        str(tmp_path),
        identity.host(),
        "me",
        identity.boot_id(),
        detach=True,
        origin=ORIGIN,
    )
    engine.procs.register(new, now)
    engine.procs.finish(new.run_id, ProcStatus.SUCCEEDED, now, exit_code=0)
    assert engine.procs.claim_hook(new.run_id, now)  # then the engine stopped
    clock = ManualClock(now)
    clock.advance(FIRING_STALE_S + 1)
    with watchkeeper_process(tmp_path, store, github, clock) as restarted:
        asyncio.run(restarted.sweeper.sweep())
    assert github.comments == []
    assert engine.get(new.run_id).hook_state is HookState.MAYBE_FIRED


def test_a_refused_token_is_recorded_as_failed_with_the_reason(
    store: Store, data_dir: Path, github: FakeGitHub
) -> None:
    forge = ForgeConfig(**_forge(github, token="ghp-wrong"))
    refused = ProcEngine(store, data_dir, clock=utcnow, grace_s=2.0, forge=forge)
    try:
        run_id, state = _ended(refused, "exit 0")
        refused.reap()
    finally:
        kill_leftovers(refused)
    assert state is HookState.FAILED
    error = refused.get(run_id).hook_error
    assert error is not None and "401" in error and "Bad credentials" in error
    # The waiting label could not be set either: the run started anyway and says why.
    noted = (layout.run_dir(data_dir, run_id) / layout.HOOKS_LOG_NAME).read_text()
    assert "watchkeeper:waiting" in noted and "401" in noted
    assert github.comments == []
    # Only the comment was tried after the start's label: nothing is retried.
    assert [method for method, _ in github.calls] == ["POST", "POST"]


def test_without_a_token_the_run_ends_and_says_why_nothing_was_posted(
    store: Store, data_dir: Path, github: FakeGitHub
) -> None:
    bare = ProcEngine(store, data_dir, clock=utcnow, grace_s=2.0)
    try:
        run_id, state = _ended(bare, "exit 0")
    finally:
        kill_leftovers(bare)
    assert state is HookState.FAILED
    assert "github_token" in (bare.get(run_id).hook_error or "")
    assert github.calls == []


def test_the_command_line_posts_a_foreground_run_from_its_configuration(
    tmp_path: Path, engine: ProcEngine, github: FakeGitHub
) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(
        f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n'
        f'[forge]\ngithub_token = "{TOKEN}"\ngithub_api_url = "{github.url}"\n'
    )
    script = "echo half way; echo 'BLOCKED: needs a deploy key'"
    ran = wk(
        "--config", str(config), "run", "--origin", "github:acme/app#42", "--", "sh", "-c", script
    )
    assert ran.returncode == 0, ran.stderr
    assert github.labels == {"bug", "watchkeeper:blocked"}
    assert len(github.comments) == 1 and "needs a deploy key" in github.comments[0]
    assert "/web/procs/" not in github.comments[0]  # no public_url: no link to nowhere
    refused = wk("--config", str(config), "run", "--origin", "github:acme#42", "--", "true")
    assert refused.returncode != 0 and "github:OWNER/REPO#N" in refused.stderr


def test_a_command_refused_before_it_is_recorded_leaves_no_label_behind(
    tmp_path: Path, engine: ProcEngine, github: FakeGitHub
) -> None:
    with pytest.raises(InvalidInput):
        engine.start(LaunchRequest(("no-such-command-here",), detach=True, origin=ORIGIN))
    assert github.calls == []  # refused before GitHub was told anything
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    broken = ProcEngine(engine.store, blocker / "data", forge=engine.forge)
    with pytest.raises(LaunchFailed):
        broken.start(LaunchRequest(("true",), detach=True, origin=ORIGIN))
    # Labelled waiting, then the label taken back: no run will ever end to replace it.
    assert github.labels == {"bug"}
    assert github.comments == []


def test_a_github_origin_names_a_repository_and_a_number() -> None:
    assert _parse_origin("github:acme/app#42") == ORIGIN
    for wrong in ("github:acme/app", "github:acme#42", "github:acme/app#x", "github:/app#1"):
        with pytest.raises(InvalidInput):
            _parse_origin(wrong)
