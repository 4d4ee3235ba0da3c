"""Find adapters by name through the ``watchkeeper.kinds`` entry-point group."""

from __future__ import annotations

from importlib.metadata import entry_points

from watchkeeper.config import Settings
from watchkeeper.errors import ConfigError
from watchkeeper.kinds.base import Adapter, AdapterContext

ENTRY_POINT_GROUP = "watchkeeper.kinds"


def _builtin() -> dict[str, type[Adapter]]:
    # The engines' modules import their engine's client only when a kind reads it.
    from watchkeeper.kinds.engines.arq import ArqAdapter
    from watchkeeper.kinds.engines.celery import CeleryAdapter
    from watchkeeper.kinds.engines.langgraph import LangGraphAdapter
    from watchkeeper.kinds.engines.prefect import PrefectAdapter
    from watchkeeper.kinds.engines.rq import RqAdapter
    from watchkeeper.kinds.process import ProcessAdapter
    from watchkeeper.kinds.program import ProgramAdapter
    from watchkeeper.kinds.push import PushAdapter
    from watchkeeper.kinds.sql import SqlAdapter
    from watchkeeper.kinds.tasks import TasksAdapter

    return {
        "push": PushAdapter,
        "sql": SqlAdapter,
        "process": ProcessAdapter,
        "program": ProgramAdapter,
        "tasks": TasksAdapter,
        "celery": CeleryAdapter,
        "rq": RqAdapter,
        "arq": ArqAdapter,
        "langgraph": LangGraphAdapter,
        "prefect": PrefectAdapter,
    }


def available() -> dict[str, type[Adapter]]:
    """Every adapter class by name: built-ins, then installed plugins."""
    found = _builtin()
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in found:
            continue
        loaded = entry.load()
        if isinstance(loaded, type) and issubclass(loaded, Adapter):
            found[entry.name] = loaded
    return found


def build(settings: Settings, context: AdapterContext) -> dict[str, Adapter]:
    """One adapter per configured kind, or a :class:`ConfigError` naming the bad one."""
    classes = available()
    adapters: dict[str, Adapter] = {}
    for name, kind in settings.kind_configs().items():
        cls = classes.get(kind.adapter)
        if cls is None:
            names = ", ".join(sorted(classes))
            raise ConfigError(
                f"kinds.{name}.adapter = {kind.adapter!r}: no such adapter; installed: {names}"
            )
        adapters[name] = cls(name, kind, context)
    return adapters


def push_kinds(settings: Settings) -> set[str]:
    """The kinds that accept reports over the API."""
    return {name for name, kind in settings.kind_configs().items() if kind.adapter == "push"}
