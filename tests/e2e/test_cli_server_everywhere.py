"""``token list``/``revoke``, ``verify-record``, ``db current`` and ``test-card`` ask the server.

Each runs as a real subprocess against a real ``watchkeeper serve``, from an
empty folder that must stay empty: a local store is read only with ``--store``.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.notify.testcard import TEXT

from ..integration.fakes.telegram import fake_telegram
from ..support.cli import wk as run_wk
from ..support.live_server import free_port
from ..support.serving import served_then_stopped, serving


def wk(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """The CLI with no ``WATCHKEEPER_*`` variable of this environment, wide enough for tables."""
    bare = {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}
    return run_wk(*args, env={**bare, **(env or {})}, columns=1000, **kwargs)


def said(result: Any) -> str:
    return " ".join(result.stderr.split())


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text('data_dir = "data"\ncheck_interval_s = 1\n')
    return file


@pytest.fixture
def empty(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    yield folder
    assert list(folder.iterdir()) == [], "a command made files in the working folder"


@pytest.fixture
def served(config_file: Path) -> Iterator[tuple[str, str]]:
    with served_then_stopped(config_file) as found:
        yield found


def test_token_list_and_revoke_over_the_server(served: tuple[str, str], empty: Path) -> None:
    url, admin = served
    made = wk(
        "token",
        "create",
        "--role",
        "viewer",
        "--name",
        "looker",
        "--server",
        url,
        "--token",
        admin,
        cwd=empty,
    )
    assert made.returncode == 0, made.stderr
    viewer = made.stdout.strip().splitlines()[-1]
    viewer_id = made.stdout.split()[1]
    env = {"WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": admin}
    listed = wk("token", "list", env=env, cwd=empty)
    assert listed.returncode == 0, listed.stderr
    assert "looker" in listed.stdout and "first admin" in listed.stdout
    assert viewer not in listed.stdout and admin not in listed.stdout
    refused = wk("token", "list", "--server", url, "--token", viewer, cwd=empty)
    assert refused.returncode == 1
    assert "this needs the admin role" in said(refused) and "Traceback" not in refused.stderr
    revoked = wk("token", "revoke", viewer_id, env=env, cwd=empty)
    assert revoked.returncode == 0, revoked.stderr
    assert f"token {viewer_id} revoked" in revoked.stdout
    again = wk("token", "revoke", viewer_id, env=env, cwd=empty)
    assert again.returncode == 0 and f"token {viewer_id} was already revoked" in again.stdout
    unknown = wk("token", "revoke", "999", env=env, cwd=empty)
    assert unknown.returncode == 1 and "no token 999" in said(unknown)
    shut_out = wk("token", "list", "--server", url, "--token", viewer, cwd=empty)
    assert shut_out.returncode == 1 and "401" in said(shut_out) + shut_out.stdout


def test_verify_record_asks_the_server_and_names_what_changed(
    served: tuple[str, str], empty: Path, tmp_path: Path, config_file: Path
) -> None:
    url, admin = served
    # A record signed with the server's key, as `record --out` writes it.
    from watchkeeper import config
    from watchkeeper.timeline import record

    settings = config.load(str(config_file))
    key = record.load_keys(settings.model_copy(update={"data_dir": tmp_path / "data"}))
    body = {"format": record.FORMAT, "job": {"id": "j-7", "status": "done"}, "rounds": []}
    out = tmp_path / "record.json"
    out.write_text(json.dumps(record.sign(body, key), indent=2) + "\n")
    env = {"WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": admin}
    valid = wk("verify-record", str(out), env=env, cwd=empty)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("valid: job j-7")
    out.write_text(out.read_text().replace('"done"', '"failed"'))
    invalid = wk("verify-record", str(out), env=env, cwd=empty)
    assert invalid.returncode == 1
    assert "invalid: the signature does not match: the record was changed" in said(invalid)
    local = wk("verify-record", str(out), "--store", str(tmp_path / "data"), cwd=empty)
    assert local.returncode == 1 and "the signature does not match" in said(local)


def test_db_current_asks_the_server_named(served: tuple[str, str], empty: Path) -> None:
    from watchkeeper.store.migrate import head_revision

    url, admin = served
    asked = wk("db", "current", "--server", url, "--token", admin, cwd=empty)
    assert asked.returncode == 0, asked.stderr
    assert f"database: {head_revision()}; code: {head_revision()}" in asked.stdout
    assert url in asked.stdout


def test_db_takes_a_store(tmp_path: Path, empty: Path) -> None:
    from watchkeeper.store.migrate import head_revision

    store = tmp_path / "made-here"
    made = wk("db", "upgrade", "--store", str(store), cwd=empty)
    assert made.returncode == 0, made.stderr
    assert (store / "watchkeeper.db").is_file()
    current = wk("db", "current", "--store", str(store), cwd=empty)
    assert f"database: {head_revision()}; code: {head_revision()}" in current.stdout


def test_test_card_goes_out_through_the_servers_platforms(
    tmp_path: Path, empty: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ExitStack() as stack:
        telegram = stack.enter_context(fake_telegram())
        # serve reads the bot token's variable at start; the CLI below never sees it.
        monkeypatch.setenv("WK_TEST_TELEGRAM", telegram.token)
        path = tmp_path / "watchkeeper.toml"
        path.write_text(
            'data_dir = "data"\n[ops]\nchannels = ["telegram:-1001234567890"]\n'
            f'[telegram]\nbot_token_env = "WK_TEST_TELEGRAM"\nbase_url = "{telegram.url}"\n'
        )
        with serving(path) as (process, url, admin):
            env = {"WK_TEST_TELEGRAM": ""}
            sent = wk("test-card", "--server", url, "--token", admin, env=env, cwd=empty)
            unknown = wk(
                "test-card",
                "--server",
                url,
                "--token",
                admin,
                "--chat",
                "discord:1",
                env=env,
                cwd=empty,
            )
            bad = wk(
                "test-card",
                "--server",
                url,
                "--token",
                admin,
                "--chat",
                "irc:x",
                env=env,
                cwd=empty,
            )
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert [m.text for m in telegram.messages(-1001234567890)] == [TEXT]
        assert "card to telegram:-1001234567890" in sent.stdout and "posted" in sent.stdout
    assert unknown.returncode == 1 and "[discord] has no bot token" in unknown.stdout
    assert bad.returncode == 1 and "PLATFORM:CHAT" in said(bad)


NO_SERVER = [
    ("token", "list"),
    ("token", "revoke", "1"),
    ("verify-record", "RECORD"),
    ("db", "current"),
    ("test-card",),
]


@pytest.mark.parametrize("args", NO_SERVER, ids=lambda a: " ".join(a))
def test_no_server_is_said_plainly_and_nothing_is_made(
    args: tuple[str, ...], empty: Path, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    record.write_text('{"signature": {}}\n')
    url = f"http://127.0.0.1:{free_port()}"
    argv = [str(record) if a == "RECORD" else a for a in args]
    result = wk(*argv, "--server", url, "--token", "wk_x", cwd=empty)
    assert result.returncode == 1, result.stdout
    assert "Traceback" not in result.stderr
    assert f"cannot reach watchkeeper at {url} (from --server)" in said(result)
    from_env = wk(*argv, env={"WATCHKEEPER_URL": url}, cwd=empty)
    if args[0] != "test-card":  # without --server, test-card posts from this host, as before
        assert f"cannot reach watchkeeper at {url} (from WATCHKEEPER_URL)" in said(from_env)


def test_token_commands_read_the_store_named_wherever_they_run(tmp_path: Path, empty: Path) -> None:
    # No configuration names a store here: --store alone says where the tokens are.
    store = tmp_path / "kept-elsewhere"
    assert wk("db", "upgrade", "--store", str(store), cwd=empty).returncode == 0
    made = wk(
        "token", "create", "--role", "viewer", "--name", "ci", "--store", str(store), cwd=empty
    )
    assert made.returncode == 0, made.stderr
    listed = wk("token", "list", "--store", str(store), cwd=empty)
    assert listed.returncode == 0, listed.stderr
    assert "ci" in listed.stdout and "viewer" in listed.stdout
    revoked = wk("token", "revoke", "1", "--store", str(store), cwd=empty)
    assert revoked.returncode == 0, revoked.stderr
