"""Provisioning: cold-start a runner for an org whose queued work no live runner serves.

A launcher is anything with ``launch(org, fleet)`` that raises
:class:`LaunchRefused` with a reason when it cannot; the configured one runs
``[orgs.NAME] launcher = "command ..."`` (``{org}`` and ``{fleet}`` are
replaced; ``WATCHKEEPER_ORG`` and ``WATCHKEEPER_FLEET`` are set). The command
should start the runner and return; the cold start counts as ``provisioning``
until a runner of that fleet registers, and as failed after
``provision_timeout_s``. The state is committed before the command runs, so
a crash mid-launch is seen as a cold start in flight, never launched twice at once.
Replicas sweeping together may each decide a fleet needs a runner; the
provision row is written conditionally on what the sweep read, and only the
replica whose write wins runs the launcher.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from watchkeeper.errors import WatchkeeperError
from watchkeeper.queue import rules
from watchkeeper.records.queue import Provision, QueuedTask, Snapshot
from watchkeeper.store.queue import QueueStore

log = logging.getLogger(__name__)
_OUTPUT_TAIL = 500


class LaunchRefused(WatchkeeperError):
    """The launcher could not start a runner; the message is the reason shown to people."""


class Launcher(Protocol):
    """Cold-starts a runner for ``org`` in ``fleet``; raises :class:`LaunchRefused` if it cannot."""

    def launch(self, org: str, fleet: str) -> None:
        """Start the runner (or ask for one) and return."""


@dataclass(frozen=True, slots=True)
class CommandLauncher:
    """Runs a configured command; a non-zero exit is a failure with the command's own words."""

    command: str
    timeout_s: float = 60.0

    def launch(self, org: str, fleet: str) -> None:
        """Run the command with ``{org}`` and ``{fleet}`` filled in."""
        argv = [
            part.replace("{org}", org).replace("{fleet}", fleet)
            for part in shlex.split(self.command)
        ]
        env = {**os.environ, "WATCHKEEPER_ORG": org, "WATCHKEEPER_FLEET": fleet}
        try:
            done = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise LaunchRefused(f"launcher command {argv[0]!r} not found") from None
        except subprocess.TimeoutExpired:
            raise LaunchRefused(
                f"launcher command did not return within {self.timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise LaunchRefused(f"launcher command could not start: {exc.strerror}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip()[-_OUTPUT_TAIL:]
            raise LaunchRefused(
                f"launcher exited with status {done.returncode}" + (f": {said}" if said else "")
            )


def wanted(
    queued: Sequence[QueuedTask],
    snapshot: Snapshot,
    policy: rules.Policy,
    launchers: Mapping[str, Launcher],
    retry_s: float,
) -> list[tuple[str, str]]:
    """The (org, fleet) pairs to cold-start now, by the blocked reasons of their queued tasks."""
    pairs: dict[tuple[str, str], QueuedTask] = {}
    for task in queued:
        if task.org in launchers:
            pairs.setdefault((task.org, task.fleet), task)
    result = []
    for key, task in pairs.items():
        blocked = rules.explain(task, snapshot, policy)
        if blocked.code in (rules.Reason.NO_RUNNER, rules.Reason.RUNNER_OFFLINE):
            result.append(key)
        elif blocked.code is rules.Reason.PROVISION_FAILED:
            provision = snapshot.provisions[key]
            if snapshot.at >= provision.updated_at + timedelta(seconds=retry_s):
                result.append(key)
    return result


def provision(
    store: QueueStore,
    launcher: Launcher,
    org: str,
    fleet: str,
    now: datetime,
    seen: Provision | None = None,
) -> tuple[str, str, str | None] | None:
    """Claim the cold start, run the launcher, record its failure.

    ``seen`` is the provision row the decision was made on (``None``: there
    was none). Returns ``(org, fleet, reason)`` (``reason`` ``None`` when the
    launch began), or ``None`` when another replica claimed the cold start
    first and launches it instead.
    """
    if not store.claim_provision(org, fleet, seen, now):
        log.info(
            "Cold start of a runner for org %s in fleet %s is another replica's",
            org,
            fleet,
            extra={"action": "queue_provision"},
        )
        return None
    try:
        launcher.launch(org, fleet)
    except LaunchRefused as exc:
        reason = str(exc)
        store.record_provision(org, fleet, rules.PROVISION_FAILED, reason, now)
        log.warning(
            "Cold start of a runner for org %s in fleet %s failed: %s",
            org,
            fleet,
            reason,
            extra={"action": "queue_provision"},
        )
        return org, fleet, reason
    log.info(
        "Cold start of a runner for org %s in fleet %s began",
        org,
        fleet,
        extra={"action": "queue_provision"},
    )
    return org, fleet, None
