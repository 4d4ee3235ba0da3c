"""The container and systemd files in deploy/ hold together, checked without running them.

No container engine runs here, so the Dockerfile and the compose files are checked
for what can go wrong without one: paths they copy or mount exist, the commands
they run are real commands of this CLI, ports and the database URL agree with the
configuration and with PostgreSQL's settings. The systemd units go through
``systemd-analyze verify`` with their program pointed at this environment's CLI.
"""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from watchkeeper import config

from ..support.cli import wk

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
INSTALLED_CLI = "/opt/watchkeeper/venv/bin/watchkeeper"
HERE_CLI = Path(sys.executable).parent / "watchkeeper"


def _dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            instruction, _, rest = stripped.partition(" ")
            found.append((instruction.upper(), rest.strip()))
    return found


def _yaml(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text())
    return loaded


def test_what_the_dockerfile_copies_exists_and_reaches_the_build() -> None:
    copies = [args.split()[:-1] for instruction, args in _dockerfile() if instruction == "COPY"]
    sources = [source for sources in copies for source in sources]
    assert "src" in sources
    kept = [
        line[1:].rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for source in sources:
        assert (ROOT / source).exists(), f"the Dockerfile copies {source}, which is not there"
        assert source.rstrip("/") in kept, f"{source} is left out of the build context"


def test_the_image_installs_the_versions_the_lock_pins(tmp_path: Path) -> None:
    run = next(args for instruction, args in _dockerfile() if "constraints.txt" in args)
    assert "-c /tmp/constraints.txt ." in run
    # The Dockerfile's own command, run here on the real lock.
    derive = run.split("&&")[0].replace("/tmp/constraints.txt", str(tmp_path / "c.txt"))
    subprocess.run(["sh", "-c", derive], cwd=ROOT, check=True)
    pins = [
        Requirement(line)
        for line in (tmp_path / "c.txt").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    lock = (ROOT / "requirements-dev.lock").read_text()
    assert len(pins) == len(re.findall(r"^\S+==\S+", lock, flags=re.MULTILINE))
    assert all([spec.operator for spec in pin.specifier] == ["=="] for pin in pins)
    assert "fastapi" in {pin.name for pin in pins}


def test_the_image_serves_its_baked_configuration_on_the_port_it_checks() -> None:
    steps = dict(_dockerfile())
    assert steps["CMD"] == '["watchkeeper", "serve"]'
    baked = next(
        args.split()
        for instruction, args in _dockerfile()
        if instruction == "COPY" and args.split()[-1].startswith("/etc/watchkeeper/")
    )
    environment = " ".join(args for instruction, args in _dockerfile() if instruction == "ENV")
    assert f"WATCHKEEPER_CONFIG={baked[-1]}" in environment.split()
    settings = config.load(ROOT / baked[0])
    assert settings.server.host == "0.0.0.0"
    assert str(settings.data_dir) == "/var/lib/watchkeeper"
    assert f"EXPOSE {settings.server.port}" in {f"{i} {a}" for i, a in _dockerfile()}
    assert f"127.0.0.1:{settings.server.port}/healthz" in steps["HEALTHCHECK"]


def test_the_single_server_compose_file_runs_one_server_on_its_postgres() -> None:
    compose = _yaml("compose.single.yaml")
    services = compose["services"]
    assert set(services) == {"postgres", "watchkeeper"}
    server, postgres = services["watchkeeper"], services["postgres"]
    assert (DEPLOY / server["build"]["context"] / server["build"]["dockerfile"]).is_file()
    assert server["command"] == ["watchkeeper", "serve"]
    env = postgres["environment"]
    user, password, database = env["POSTGRES_USER"], env["POSTGRES_PASSWORD"], env["POSTGRES_DB"]
    assert server["environment"]["WATCHKEEPER_DATABASE_URL"] == (
        f"postgresql+psycopg://{user}:{password}@postgres:5432/{database}"
    )
    assert server["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in postgres["healthcheck"]["test"]
    mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in server["volumes"]}
    config_file = DEPLOY / mounted["/etc/watchkeeper/watchkeeper.toml"]
    settings = config.load(config_file)
    assert mounted[str(settings.data_dir)] in compose["volumes"]
    assert server["ports"] == [f"127.0.0.1:{settings.server.port}:{settings.server.port}"]
    assert f"127.0.0.1:{settings.server.port}/healthz" in " ".join(server["healthcheck"]["test"])


@pytest.mark.parametrize("name", ["compose.yaml", "compose.single.yaml"])
def test_every_compose_file_builds_from_the_dockerfile_here(name: str) -> None:
    for service in _yaml(name)["services"].values():
        build = service.get("build") or {}
        if build:
            assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == (
                DEPLOY / "Dockerfile"
            )
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), f"{name} mounts {source}, not there"


def _unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


def test_there_is_a_unit_for_the_server_and_one_for_a_runner() -> None:
    commands = {unit.name: shlex.split(_unit(unit)["Service"]["ExecStart"]) for unit in UNITS}
    assert commands["watchkeeper.service"][:2] == [INSTALLED_CLI, "serve"]
    assert commands["watchkeeper-runner.service"][:2] == [INSTALLED_CLI, "runner"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_each_unit_runs_a_command_this_cli_accepts(unit: Path) -> None:
    argv = shlex.split(_unit(unit)["Service"]["ExecStart"])
    # --help after the unit's own options: an option the command lacks is refused first.
    accepted = wk(*argv[1:], "--help")
    assert accepted.returncode == 0, accepted.stderr
    service = _unit(unit)["Service"]
    assert service["User"] == "watchkeeper"
    assert service["KillSignal"] == "SIGTERM"
    state = Path("/var/lib") / service["StateDirectory"]
    assert service["WorkingDirectory"] == str(state)


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_systemd_accepts_each_unit(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is missing: apt-get install -y systemd"
    # The unit names where a real install keeps the CLI; here it is this environment's.
    local = tmp_path / unit.name
    local.write_text(unit.read_text().replace(INSTALLED_CLI, str(HERE_CLI)))
    verified = subprocess.run(
        [analyze, "verify", str(local)], capture_output=True, text=True, check=False
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == "", verified.stderr
