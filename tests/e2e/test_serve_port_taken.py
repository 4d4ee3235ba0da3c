"""``serve`` takes its port before anything else: with the port taken it says which port and
what to do, and stops before it opens the store, writes to it or takes the leader lease."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.support import patient_http

from ..support.cli import wk
from ..support.serving import serving


def _refused_port(result: subprocess.CompletedProcess[str], port: int) -> None:
    """The answer of a ``serve`` whose port 127.0.0.1:``port`` is taken."""
    said = result.stdout + result.stderr
    assert result.returncode == 2, said
    assert "serving on" not in said
    assert "Traceback" not in said
    assert f"cannot serve on 127.0.0.1:{port}: port {port} is taken by another process" in (
        result.stderr
    )
    assert "Stop that process" in result.stderr
    assert "--port" in result.stderr


def test_a_taken_port_stops_serve_before_it_makes_its_data_folder(tmp_path: Path) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = wk("--config", str(config), "serve", "--port", str(port), timeout=60)
    _refused_port(result, port)
    assert not (tmp_path / "data").exists(), "nothing is written before the port is held"


def test_a_second_serve_on_a_taken_port_leaves_the_leader_its_lease(tmp_path: Path) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\ncheck_interval_s = 1\n')
    with serving(config) as (_process, url, token):
        port = int(url.rsplit(":", 1)[1])
        before = patient_http.get(url + "/healthz").json()["cluster"]
        assert before["leader"] is True, before
        # The same store and the port the first server holds: a second replica started by
        # mistake, say, which on this embedded store would take the lease at once.
        result = wk("--config", str(config), "serve", "--port", str(port), timeout=60)
        _refused_port(result, port)
        after = patient_http.get(url + "/healthz").json()["cluster"]
        assert (after["leader"], after["epoch"], after["replica"]) == (
            True,
            before["epoch"],
            before["replica"],
        ), (before, after)
        replicas = patient_http.get(
            url + "/api/v1/replicas", headers={"Authorization": f"Bearer {token}"}, timeout=10
        ).json()["replicas"]
        assert [r["name"] for r in replicas] == [before["replica"]]
