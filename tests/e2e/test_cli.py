"""The ``watchkeeper`` command, run as a real subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import patient_http

from ..support.cli import wk
from ..support.serving import served_then_stopped


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text('data_dir = "data"\ncheck_interval_s = 1\n')
    return file


def test_db_upgrade_and_current(config_file: Path) -> None:
    upgraded = wk("--config", str(config_file), "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    from watchkeeper.store.migrate import head_revision

    head = head_revision()
    assert f"schema at {head} (was empty)" in upgraded.stdout
    current = wk("--config", str(config_file), "db", "current")
    assert f"database: {head}; code: {head}" in current.stdout


def test_tokens_and_local_runs(config_file: Path) -> None:
    # Only `serve` and `db` make a store; the token commands then write into it when asked.
    assert wk("--config", str(config_file), "db", "upgrade").returncode == 0
    store = str(config_file.parent / "data")
    created = wk(
        "--config",
        str(config_file),
        "token",
        "create",
        "--role",
        "reporter",
        "--name",
        "ci",
        "--store",
        store,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip().splitlines()[-1].startswith("wk_")
    listed = wk("--config", str(config_file), "token", "list", "--store", store)
    assert "ci" in listed.stdout and "reporter" in listed.stdout
    bad = wk("--config", str(config_file), "token", "create", "--role", "root", "--store", store)
    assert bad.returncode == 1
    assert "unknown role 'root': use one of admin, reporter, viewer" in bad.stderr
    assert "Traceback" not in bad.stderr
    unknown = wk("--config", str(config_file), "token", "revoke", "999", "--store", store)
    assert unknown.returncode == 1 and "no token 999" in unknown.stderr
    listing = wk("--config", str(config_file), "runs", "--json", "--store", store)
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout)["running"] == []


@pytest.fixture
def served(config_file: Path) -> Iterator[tuple[str, str]]:
    with served_then_stopped(config_file) as found:
        yield found


def test_serve_report_and_runs_end_to_end(served: tuple[str, str], config_file: Path) -> None:
    url, token = served
    env = {"WATCHKEEPER_URL": url, "WATCHKEEPER_TOKEN": token}
    started = wk(
        "report", "start", "crawl", "crawl example.org", "--origin", "slack:C9/171.5", env=env
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    moved = wk(
        "report", "progress", "crawl", "--step", "page 3", env={**env, "WATCHKEEPER_RUN_ID": run_id}
    )
    assert moved.returncode == 0, moved.stderr
    table = wk("runs", env=env)
    assert "crawl example.org" in table.stdout
    as_json = json.loads(wk("runs", "--json", env=env).stdout)
    assert as_json["running"][0]["run_id"] == run_id
    assert as_json["running"][0]["step"] == "page 3"
    failed = wk("report", "fail", "crawl", run_id, "--reason", "quota exceeded", env=env)
    assert failed.returncode == 0, failed.stderr
    bad = wk("report", "progress", "crawl", run_id, env=env)
    assert bad.returncode == 1
    assert "has already ended (failed)" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_second_start_prints_no_new_token(served: tuple[str, str], config_file: Path) -> None:
    url, token = served
    response = patient_http.get(url + "/api/v1/runs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    listed = wk("--config", str(config_file), "token", "list", "--server", url, "--token", token)
    assert listed.stdout.count("first admin") == 1


def test_unreachable_server_is_one_clear_line() -> None:
    result = wk(
        "report",
        "start",
        "crawl",
        "x",
        env={"WATCHKEEPER_URL": "http://127.0.0.1:9", "WATCHKEEPER_TOKEN": "t"},
    )
    assert result.returncode == 1
    assert "cannot reach watchkeeper at http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr
