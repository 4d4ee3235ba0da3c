"""How a runner daemon serves: what ``watchkeeper runner`` reads from its options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    """How a runner serves: its fleet, capacity and intervals."""

    fleet: str
    capacity: int = 1
    org: str | None = None
    name: str | None = None
    data_dir: Path = Path(".watchkeeper") / "runner"
    heartbeat_s: float = 5.0
    poll_s: float = 1.0
    renew_s: float | None = None
    grace_s: float = 5.0
    #: Names of the runner's environment a task gets beyond the allow-list (checked by
    #: :func:`watchkeeper.queue.task_env.check_pass_env`).
    pass_env: tuple[str, ...] = ()
