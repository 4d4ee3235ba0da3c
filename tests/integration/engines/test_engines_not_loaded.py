"""The core install stays light: no engine's client is imported unless a kind reads it."""

from __future__ import annotations

import json
import subprocess
import sys

ENGINES = ("celery", "kombu", "redis", "rq", "arq", "langgraph", "prefect")

PROBE = """
import json, sys
import watchkeeper.server.app
import watchkeeper.cli.app
from watchkeeper import config
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import AdapterContext

kinds = {
    "a": {"engine": "celery", "url": "redis://127.0.0.1:1/0"},
    "b": {"engine": "rq", "url": "redis://127.0.0.1:1/0"},
    "c": {"engine": "arq", "url": "redis://127.0.0.1:1/0"},
    "d": {"engine": "langgraph", "url": "sqlite:////nonexistent/checkpoints.db"},
    "e": {"engine": "prefect", "url": "http://127.0.0.1:1/api"},
}
settings = config.parse({"kinds": kinds}, "probe")
registry.build(settings, AdapterContext(settings, None))
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in %r)))
"""


def test_no_engine_module_is_loaded_by_the_server_the_cli_or_configured_kinds() -> None:
    probe = PROBE % (ENGINES,)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
