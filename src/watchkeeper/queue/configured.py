"""The queue's parts as the configuration sets them: the rules' policy, the launchers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchkeeper.queue import launcher, rules

if TYPE_CHECKING:
    from watchkeeper.config import Settings


def policy_of(settings: Settings) -> rules.Policy:
    """The rules' knobs from the configuration."""
    orgs = {
        name: rules.OrgPolicy(org.max_concurrent_jobs, org.monthly_agent_minutes)
        for name, org in settings.orgs.items()
    }
    return rules.Policy(
        offline_after_s=settings.queue.runner_offline_after_s,
        provision_timeout_s=settings.queue.provision_timeout_s,
        orgs=orgs,
    )


def configured_launchers(settings: Settings) -> dict[str, launcher.Launcher]:
    """A launcher per org that names one: how a cold start begins a runner."""
    timeout = settings.queue.launcher_timeout_s
    return {
        name: launcher.CommandLauncher(org.launcher, timeout)
        for name, org in settings.orgs.items()
        if org.launcher
    }
