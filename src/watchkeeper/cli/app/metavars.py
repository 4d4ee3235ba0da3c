"""What ``--help`` calls each value: what to type (``FILE``, ``URL``, ``DURATION``, ``CMD``).

Typer names a value without a metavar by its Python type (``<str>``, ``<list[str]>``,
``<float range>``), which tells a reader nothing about what to type. :func:`fill` gives
every option and argument of an app that has none a metavar, from one table here, before
Typer builds the command: help, usage lines and errors then all say ``RUN_ID`` or ``URL``.
:func:`install` keeps Typer from adding the type tag after an argument's own name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.models import ArgumentInfo, OptionInfo

#: Values that are a length of time: seconds when the option is a number, else a duration
#: such as ``90s`` or ``2h30m``.
_TIMES = frozenset(
    {"budget", "expected", "grace", "timeout", "lease", "heartbeat", "interval", "poll", "renew"}
)
#: What to type, by the parameter's name; ``command:name`` first, for a name one command
#: uses in its own sense.
_NAMES: dict[str, str] = {
    "park:until": "RUN_ID",
    "spend:since": "WHEN",
    "spend:until": "WHEN",
    "action": "ACTION",
    "api": "PLATFORM=URL",
    "by": "GROUP",
    "capacity": "N",
    "chat": "PLATFORM:CHAT",
    "comment": "TEXT",
    "config": "FILE",
    "cwd": "DIR",
    "data_dir": "DIR",
    "done": "N",
    "duration": "DURATION",
    "effects": "EFFECTS",
    "file": "FILE",
    "fingerprint": "TEXT",
    "host": "HOST",
    "max_attempts": "N",
    "on_done": "CMD",
    "on_done_url": "URL",
    "out": "FILE",
    "pass_env": "NAME",
    "path": "FILE",
    "port": "PORT",
    "progress": "TEXT",
    "public_key": "KEY",
    "reason": "TEXT",
    "run": "KIND/RUN",
    "server": "URL",
    "servers": "URL",
    "since": "WHEN",
    "state_token": "TOKEN",
    "step": "TEXT",
    "switch": "on|off",
    "total": "N",
    "wake": "CMD",
}


def metavar(command: str, name: str, annotation: object) -> str:
    """What ``--help`` calls parameter ``name`` of ``command`` (annotated ``annotation``)."""
    found = _NAMES.get(f"{command}:{name}") or _NAMES.get(name)
    if found:
        return found
    if name in _TIMES or name == "limit":
        numeric = any(word in str(annotation) for word in ("float", "int"))
        if name == "limit" and "int" in str(annotation):
            return "N"
        return "SECONDS" if numeric else "DURATION"
    return name.upper()


def fill(app: typer.Typer) -> None:
    """Give every option and argument of ``app`` (its groups' too) that has no metavar one."""
    if app.registered_callback is not None and app.registered_callback.callback is not None:
        _fill_callback(app.registered_callback.callback, app.info.name or "")
    for command in app.registered_commands:
        if command.callback is not None:
            _fill_callback(command.callback, command.name or command.callback.__name__)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            fill(group.typer_instance)


def _fill_callback(callback: Callable[..., Any], command: str) -> None:
    for parameter in inspect.signature(callback).parameters.values():
        info = parameter.default
        if not isinstance(info, OptionInfo | ArgumentInfo) or info.metavar is not None:
            continue
        if isinstance(info, OptionInfo) and (info.count or "bool" in str(parameter.annotation)):
            continue  # a flag or a counter takes no value
        info.metavar = metavar(command, parameter.name, parameter.annotation)


_installed = False


def install() -> None:
    """Show an argument by its metavar alone, without Typer's type tag after it (idempotent).

    A Typer release without this method is left alone: its help shows the tag.
    """
    global _installed
    if _installed:
        return
    from typer.core import TyperArgument

    shown = getattr(TyperArgument, "display_type_rich", None)
    if shown is None:  # pragma: no cover - another Typer release
        return

    def display_type_rich(self: TyperArgument, ctx: Any) -> str | None:
        if self.metavar is not None:
            return None
        result: str | None = shown(self, ctx)
        return result

    # Set on the class, as Typer's own commands build their arguments from it.
    setattr(TyperArgument, "display_type_rich", display_type_rich)  # noqa: B010
    _installed = True
