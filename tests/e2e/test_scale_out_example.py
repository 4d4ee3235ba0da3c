"""The scale-out example in deploy/ holds together: its YAML, its services, its commands.

No container runs here (no images can be pulled), so this checks what can be
checked without them: the compose file parses and names every part the docs
describe, the configuration it mounts is valid, nginx balances over exactly
the replicas, and the token job's shell command, run for real against a
SQLite store, leaves a working reporter token where the runners read it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from watchkeeper import config
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ..support.cli import cli_env

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLICAS = ["replica-1", "replica-2", "replica-3"]
RUNNERS = ["runner-1", "runner-2"]
TOKEN_DIR = "/run/watchkeeper-tokens"


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def _shell(service: dict[str, Any]) -> str:
    command = service["command"]
    assert command[:2] == ["sh", "-c"]
    return str(command[2]).replace("$$", "$")  # compose's escape for a literal dollar


def test_the_compose_file_has_every_part_the_docs_describe() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "lb", "runner-token", *REPLICAS, *RUNNERS}
    database = "postgresql+psycopg://watchkeeper:watchkeeper@postgres:5432/watchkeeper"
    for name in REPLICAS:
        replica = services[name]
        assert replica["command"] == ["watchkeeper", "serve"]
        assert replica["environment"]["WATCHKEEPER_DATABASE_URL"] == database
        assert "/healthz" in " ".join(replica["healthcheck"]["test"])
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in RUNNERS:
        runner = _shell(services[name])
        assert "watchkeeper runner --fleet default" in runner
        assert "--server http://lb:8750" in runner
        assert services[name]["depends_on"]["runner-token"]["condition"] == (
            "service_completed_successfully"
        )
    assert set(services["lb"]["depends_on"]) == set(REPLICAS)
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert len(published) == len(set(published)) == 4


def test_each_shell_command_is_valid_sh() -> None:
    services = _compose()["services"]
    for name in ["runner-token", *RUNNERS]:
        checked = subprocess.run(["sh", "-n", "-c", _shell(services[name])], check=False)
        assert checked.returncode == 0, f"{name}: sh cannot parse its command"


def test_the_mounted_configuration_is_valid_and_listens_for_the_balancer() -> None:
    settings = config.load(DEPLOY / "watchkeeper.toml")
    assert settings.server.host == "0.0.0.0"
    assert settings.server.port == 8750
    assert settings.check_interval_s == 10  # docs/scale-out.md works its timings out from it


def test_nginx_balances_over_exactly_the_replicas() -> None:
    text = (DEPLOY / "nginx.conf").read_text()
    assert re.findall(r"^\s*server (replica-\d):8750", text, re.MULTILINE) == REPLICAS
    assert "proxy_buffering off" in text  # event streams and long-polls pass as they come


def test_the_token_job_leaves_a_reporter_token_for_the_runners(tmp_path: Path) -> None:
    (tmp_path / "tokens").mkdir()
    file = tmp_path / "watchkeeper.toml"
    file.write_text('data_dir = "data"\n')
    command = (
        _shell(_compose()["services"]["runner-token"])
        .replace(TOKEN_DIR, str(tmp_path / "tokens"))
        .replace("/tmp/created", str(tmp_path / "created"))
    )
    # The container has `watchkeeper` on its PATH; here it is next to this interpreter.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    database = f"sqlite:///{tmp_path / 'data' / 'watchkeeper.db'}"
    env = cli_env(
        {"WATCHKEEPER_CONFIG": str(file), "PATH": path, "WATCHKEEPER_DATABASE_URL": database}
    )
    # In the example a healthy replica has made the database; here `db upgrade` makes it.
    made = subprocess.run(["watchkeeper", "db", "upgrade"], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    for _ in range(2):  # the second run keeps the first token
        done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    secret = (tmp_path / "tokens" / "runner").read_text().strip()
    store = Store(f"sqlite:///{tmp_path / 'data' / 'watchkeeper.db'}")
    try:
        checked = store.tokens.authenticate(secret)
        assert len(store.tokens.list()) == 1
    finally:
        store.close()
    assert checked is not None and checked.role is Role.REPORTER


def test_the_docs_explain_the_example_and_are_linked() -> None:
    guide = (ROOT / "docs" / "scale-out.md").read_text()
    assert "deploy/compose.yaml" in guide
    assert "docker compose -f deploy/compose.yaml up" in guide
    assert "(docs/scale-out.md)" in (ROOT / "README.md").read_text()
