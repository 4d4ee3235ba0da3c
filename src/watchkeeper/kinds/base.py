"""The shape every kind adapter shares.

An adapter implements :meth:`Adapter.read` (and, later, its kind's actions);
the base owns what every adapter needs the same way: its judging spec, a time
limit on each read, and containment, so a slow or broken kind is reported as
unreadable with its error and never delays or breaks the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from watchkeeper.clock import Now, utcnow
from watchkeeper.contract import Action, KindRead, KindSpec, RunView
from watchkeeper.errors import ConfigError, WatchkeeperError
from watchkeeper.kinds.actions import ActionFailed, ActionRequest, perform

if TYPE_CHECKING:
    from watchkeeper.config import KindConfig, Settings
    from watchkeeper.store import Store
    from watchkeeper.store.runs import PushRun

log = logging.getLogger(__name__)
OptionsT = TypeVar("OptionsT", bound=BaseModel)
#: Ended runs stay visible (and their incidents reconcilable) this long.
FINISHED_WINDOW = timedelta(days=1)
#: Threads that read kinds, apart from the event loop's default ones: a kind's read must not
#: wait behind the app's other thread work (long-polls, process looks), and a hung kind holds
#: at most one of them (see ``Adapter._hung``), so a few dozen kinds cannot starve the rest.
#: The pool starts its threads only as reads need them.
READERS = ThreadPoolExecutor(32, thread_name_prefix="kind-read")


@dataclass(frozen=True, slots=True)
class AdapterContext:
    """What an adapter may use besides its own options."""

    settings: Settings
    store: Store | None
    #: The time actions are dated with: the runtime's clock.
    clock: Now = utcnow


class Adapter(ABC):
    """Reads one kind of work. Subclasses implement :meth:`read` only."""

    #: The adapter's name in ``[kinds.NAME] adapter = "..."``.
    adapter_name = "abstract"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        self.name = name
        self.config = config
        self.context = context
        self.spec = KindSpec(
            name, context.settings.budget_for(name), config.expected_s, config.loop_after
        )
        # Reads that outlived their time limit and still hold a worker thread.
        self._hung: set[asyncio.Future[Any]] = set()

    @abstractmethod
    def read(self, now: datetime) -> Sequence[RunView]:
        """Every active run of this kind, and those that ended within the last day.

        Runs in a worker thread; raise any exception to report the kind unreadable.
        """

    def own_store(self) -> Store:
        """Watchkeeper's own store, for the kinds that keep their runs there."""
        store = self.context.store
        if store is None:
            raise RuntimeError(f"the {self.adapter_name} adapter needs watchkeeper's store")
        return store

    def stored_run(self, run_id: str) -> PushRun | None:
        """The run as watchkeeper's store keeps it, for the kinds whose runs it keeps;
        ``None`` when there is no store, no such run, or it cannot be read."""
        store = self.context.store
        if store is None:
            return None
        try:
            return store.runs.get(self.name, run_id)
        except WatchkeeperError:
            return None

    def read_for_sweep(self, now: datetime, watched: Set[str]) -> KindRead:
        """What a sweep needs: every run that may have a verdict, plus the ``watched`` ones.

        The default reads everything. An adapter whose store can find
        candidates cheaply returns only those, with ``total`` and ``deadline``
        covering the rest; ``judge`` still decides every verdict.
        """
        return KindRead(self.name, tuple(self.read(now)))

    def close(self) -> None:  # noqa: B027 - optional hook, most adapters hold nothing
        """Release what the adapter holds."""

    def read_one(self, run_id: str, now: datetime) -> RunView | None:
        """One run as it is now, or ``None``; adapters with an index may do better."""
        return next((run for run in self.read(now) if run.run_id == run_id), None)

    def capabilities(self) -> frozenset[Action]:
        """The kind's own actions it can perform (cancel, retry, close the turn)."""
        return frozenset(Action(name) for name in self.config.actions)

    def perform(self, request: ActionRequest) -> str:
        """Perform a kind action as configured; returns the owning system's answer."""
        name = "retry" if request.action is Action.RETRY_CHECKED else request.action.value
        config = self.config.actions.get(name)  # type: ignore[call-overload]
        if config is None:
            raise ActionFailed(f"kind {self.name} has no {name} action configured")
        return perform(config, request)

    def evidence(self, run_id: str) -> dict[str, str]:
        """Read-only facts for a diagnosis beyond the RunView (exit status, log tail)."""
        return {}

    def options(self, model: type[OptionsT]) -> OptionsT:
        """Validate this kind's adapter options, naming the key on error."""
        try:
            return model.model_validate(self.config.options)
        except ValidationError as exc:
            problems = []
            for problem in exc.errors():
                key = ".".join(str(part) for part in problem["loc"])
                message = str(problem["msg"]).removeprefix("Value error, ")
                value = problem.get("input")
                if problem["type"] == "missing":
                    problems.append(
                        f"kinds.{self.name}.{key} is required by adapter {self.adapter_name!r}"
                    )
                elif problem["type"] == "extra_forbidden":
                    problems.append(
                        f"kinds.{self.name}.{key}: unknown option for adapter {self.adapter_name!r}"
                    )
                else:
                    problems.append(f"kinds.{self.name}.{key} = {value!r}: {message}")
            raise ConfigError("\n".join(problems)) from None

    def _read_all(self, now: datetime) -> KindRead:
        return KindRead(self.name, tuple(self.read(now)))

    async def read_contained(self, now: datetime, watched: Set[str] | None = None) -> KindRead:
        """Read within the kind's time limit; any failure becomes an unreadable result.

        With ``watched`` (run ids that have live incidents) this is a sweep read.
        """
        if watched is None:
            return await self._contained(self._read_all, now)
        return await self._contained(self.read_for_sweep, now, watched)

    async def read_one_contained(self, run_id: str, now: datetime) -> KindRead:
        """One run (none when it does not exist), within the kind's time limit, as a read
        of the kind holding only that run; any failure becomes an unreadable result."""
        return await self._contained(self._read_one, run_id, now)

    def _read_one(self, run_id: str, now: datetime) -> KindRead:
        run = self.read_one(run_id, now)
        return KindRead(self.name, () if run is None else (run,))

    async def _contained(self, read_in_thread: Callable[..., KindRead], *args: Any) -> KindRead:
        self._hung = {future for future in self._hung if not future.done()}
        if self._hung:
            # A hung store must not collect one stuck thread per sweep; concurrent reads
            # (a sweep and a page, say) that finish in time are fine.
            return KindRead(self.name, error="an earlier read is still hanging past its time limit")
        loop = asyncio.get_running_loop()
        # When the read starts, and on which thread (for the log, should it hang).
        began: asyncio.Future[tuple[float, int]] = loop.create_future()

        def read_once_begun() -> KindRead:
            with contextlib.suppress(RuntimeError):  # the loop closed while this waited
                loop.call_soon_threadsafe(
                    _settle, began, (time.perf_counter(), threading.get_ident())
                )
            return read_in_thread(*args)

        limit = self.config.timeout_s
        in_flight = loop.run_in_executor(READERS, read_once_begun)
        # The time limit is the kind's own: it counts from when its read starts, so a busy
        # machine's queue for a thread is not taken for a slow store.
        try:
            started, reader = await asyncio.wait_for(began, limit)
        except TimeoutError:
            self._hung.add(in_flight)
            return KindRead(self.name, error=f"no thread was free to read it within {limit:g} s")
        try:
            read: KindRead = await asyncio.wait_for(asyncio.shield(in_flight), limit)
        except TimeoutError:
            self._hung.add(in_flight)
            log.warning(
                "Reading kind %s passed its time limit of %g s; where the read is:\n%s",
                self.name,
                limit,
                where_thread_is(reader),
                extra={"action": "read_kind"},
            )
            return KindRead(self.name, error=f"read timed out after {limit:g} s")
        except WatchkeeperError as exc:
            return self._unreadable(exc, started)
        except Exception as exc:
            log.warning(
                "Unexpected failure reading kind %s",
                self.name,
                exc_info=True,
                extra={"action": "read_kind"},
            )
            return self._unreadable(exc, started)
        return dataclasses.replace(read, duration_s=time.perf_counter() - started)

    def _unreadable(self, exc: BaseException, started: float) -> KindRead:
        message = str(exc).strip() or type(exc).__name__
        return KindRead(self.name, error=message, duration_s=time.perf_counter() - started)


def where_thread_is(ident: int) -> str:
    """The stack of the thread ``ident`` as it is now (code lines only, never values), so
    a log can say what a hung read waits for."""
    frame = sys._current_frames().get(ident)
    if frame is None:
        return "(the thread has ended)"
    return "".join(traceback.format_stack(frame)).rstrip()


def _settle(began: asyncio.Future[tuple[float, int]], at: tuple[float, int]) -> None:
    if not began.done():  # not given up on meanwhile
        began.set_result(at)
