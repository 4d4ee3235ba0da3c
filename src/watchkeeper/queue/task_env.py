"""The environment a queued task runs with: scrubbed, never the runner's own.

A task runs whatever command was submitted, while the runner's environment
holds its reporter token (enough to register as a runner of any fleet and
lease that fleet's work) and whatever else its host put there. So a task
starts from nothing and gets only:

- the names in :data:`ALLOWED` and every ``LC_*``, from the runner's environment;
- the names the runner's operator passes explicitly (``--pass-env NAME``);
- :data:`TASK_VARS`: the server's URL, the task's own token (it may only report
  timeline events about this task, and dies with the lease), the task's and
  job's ids, its org and fleet.

Nor can a task read the runner's token where the runner got it: the runner
takes ``WATCHKEEPER_TOKEN`` out of its own environment, even out of
``/proc/<pid>/environ``, once read (:mod:`watchkeeper.queue.runner_env`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from watchkeeper.errors import InvalidInput

#: What a program reasonably expects of any login environment.
ALLOWED = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM")
#: Set by the runner for each task; an operator cannot pass the runner's own values.
TASK_VARS = (
    "WATCHKEEPER_URL",
    "WATCHKEEPER_TOKEN",
    "WATCHKEEPER_TASK_ID",
    "WATCHKEEPER_JOB_ID",
    "WATCHKEEPER_ORG",
    "WATCHKEEPER_FLEET",
)
#: Set by the process shim itself (``procs/launch.py``).
_SHIM_VARS = ("WATCHKEEPER_RUN_ID",)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_pass_env(names: Iterable[str]) -> tuple[str, ...]:
    """The names an operator asked to pass, or :class:`InvalidInput` saying what is wrong."""
    checked: list[str] = []
    for name in names:
        if not _NAME.match(name):
            raise InvalidInput(
                f"--pass-env {name!r} is not an environment variable name "
                "(letters, digits and _, not starting with a digit)",
                "pass_env",
            )
        if name in TASK_VARS or name in _SHIM_VARS:
            raise InvalidInput(
                f"--pass-env {name} is refused, as the runner sets {name} for each task itself "
                "(a task gets its own token, never the runner's); drop this option",
                "pass_env",
            )
        if name not in checked:
            checked.append(name)
    return tuple(checked)


def task_env(
    source: Mapping[str, str], passed: Iterable[str], *, url: str, task: Mapping[str, Any]
) -> dict[str, str]:
    """The environment of ``task`` (a leased task as the API answers it).

    ``source`` is the runner's environment; ``passed`` the checked names of
    :func:`check_pass_env`. Without a ``task_token`` in the lease (an older
    server), the task gets no token at all.
    """
    env = {
        name: value
        for name, value in source.items()
        if name in ALLOWED or name.startswith("LC_") or name in passed
    }
    for name in TASK_VARS + _SHIM_VARS:
        env.pop(name, None)
    own = {
        "WATCHKEEPER_URL": url,
        "WATCHKEEPER_TOKEN": task.get("task_token"),
        "WATCHKEEPER_TASK_ID": task.get("id"),
        "WATCHKEEPER_JOB_ID": task.get("job_id"),
        "WATCHKEEPER_ORG": task.get("org"),
        "WATCHKEEPER_FLEET": task.get("fleet"),
    }
    env.update({name: str(value) for name, value in own.items() if value is not None})
    return env
