"""From ``[programs.*]`` and ``[groups.*]`` to supervision trees: one supervisor per group.

A program in no group is a group of its own, named after it, with the program's
own intensity and backoff: a crash loop stops only it, as supervisord's
``startretries`` does. Programs start in the order the file lists them.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.config import BackoffConfig, GroupConfig, IntensityConfig, ProgramConfig, Settings
from watchkeeper.procs.containment import DESCENDANT_GRACE_S
from watchkeeper.supervise import Backoff, ChildSpec, Restart, Strategy, SupervisorBuilder
from watchkeeper.supervise import process_child as library_process_child

#: The keeper's own margin on top of the stop timeout: ending what the program left, exiting.
KEEPER_MARGIN_S = DESCENDANT_GRACE_S + 2.0
#: How long past ``start_s`` a start may take before it is a failed start anyway.
START_MARGIN_S = 5.0


@dataclass(frozen=True, slots=True)
class ProgramPlan:
    """One program as this host runs it."""

    name: str
    config: ProgramConfig
    group: str
    #: Whether the program has a ``[groups.NAME]`` of its own, or is alone.
    grouped: bool

    def title(self, host: str) -> str:
        """What its run is called: its name, where it runs, and what it does."""
        what = f": {self.config.description}" if self.config.description else ""
        return f"{self.name} on {host}{what}"


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One group (or a program alone) and how its supervisor restarts it."""

    name: str
    strategy: Strategy
    intensity: IntensityConfig
    backoff: BackoffConfig
    programs: tuple[ProgramPlan, ...]
    #: A ``[groups.NAME]`` table, or a program alone under its own name.
    declared: bool
    #: Where its programs' notices go unless a program says otherwise (``None``: ops).
    notify: str | None = None

    def member(self, name: str) -> ProgramPlan | None:
        """The program called ``name`` in this group, if it is one."""
        return next((p for p in self.programs if p.name == name), None)


def plans(settings: Settings, host: str) -> list[GroupPlan]:
    """Every group this host runs, in the order the file lists their first programs."""
    mine = {name: p for name, p in settings.programs.items() if p.host in (None, host)}
    found: dict[str, GroupPlan] = {}
    for name, program in mine.items():
        if program.group is None:
            found[name] = _alone(name, program)
            continue
        group = settings.groups[program.group]
        members = tuple(
            ProgramPlan(member, config, program.group, True)
            for member, config in mine.items()
            if config.group == program.group
        )
        found.setdefault(program.group, _group(program.group, group, members))
    return list(found.values())


def elsewhere(settings: Settings, host: str) -> dict[str, str]:
    """Programs of the file that another host runs: name to host."""
    return {
        name: p.host
        for name, p in settings.programs.items()
        if p.host is not None and p.host != host
    }


def _alone(name: str, program: ProgramConfig) -> GroupPlan:
    return GroupPlan(
        name=name,
        strategy=Strategy.ONE_FOR_ONE,
        intensity=program.intensity or IntensityConfig(),
        backoff=program.backoff or BackoffConfig(),
        programs=(ProgramPlan(name, program, name, False),),
        declared=False,
    )


def _group(name: str, group: GroupConfig, members: tuple[ProgramPlan, ...]) -> GroupPlan:
    return GroupPlan(
        name=name,
        strategy=Strategy(group.strategy),
        intensity=group.intensity,
        backoff=group.backoff,
        programs=members,
        declared=True,
        notify=group.notify,
    )


def builder(plan: GroupPlan) -> SupervisorBuilder:
    """The group's supervisor without its children: strategy, intensity, backoff."""
    backoff = plan.backoff
    return (
        SupervisorBuilder(plan.name)
        .strategy(plan.strategy)
        .intensity(plan.intensity.restarts, plan.intensity.within_s)
        .backoff(
            Backoff(
                initial=backoff.initial_s,
                factor=backoff.factor,
                cap=backoff.max_s,
                jitter=backoff.jitter,
            ),
            stable_s=backoff.reset_after_s,
        )
        .start_in_background()
    )


def child(
    plan: ProgramPlan,
    output: Callable[[], int],
    hold: Callable[[], str | None],
) -> ChildSpec:
    """The program as a child of its group's supervisor, under its keeper unless
    ``contain = "group"``."""
    config = plan.config
    argv = list(config.command)
    stop_signal: int = config.stop_signum
    stop_timeout = config.stop_timeout_s
    if config.contain == "tree":
        argv = keeper_argv(config) + argv
        stop_signal, stop_timeout = signal.SIGTERM, stop_timeout + KEEPER_MARGIN_S
    return library_process_child(
        plan.name,
        argv,
        env=dict(config.environment),
        cwd=str(config.directory) if config.directory is not None else None,
        stop_signal=stop_signal,
        ready_after_s=config.start_s,
        normal_exit_codes=frozenset(config.exit_codes),
        output=output,
        restart=Restart(config.restart),
        wait_ready=True,
        start_timeout_s=config.start_s + START_MARGIN_S,
        shutdown_timeout_s=stop_timeout,
        title=config.description,
        hold=hold,
    )


def keeper_argv(config: ProgramConfig) -> list[str]:
    """The keeper's command line, before the program's own (see :mod:`.keeper`)."""
    return [
        sys.executable,
        "-m",
        "watchkeeper.programs.keeper",
        str(os.getpid()),
        config.stop_signal,
        f"{config.stop_timeout_s:g}",
        "--",
    ]


def log_folder(data_dir: Path, name: str) -> Path:
    """Where program ``name``'s logs are kept."""
    return data_dir / "programs" / name
