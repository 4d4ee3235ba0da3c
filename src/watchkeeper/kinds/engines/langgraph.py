"""The ``langgraph`` engine kind: LangGraph threads, read from their checkpointer's tables.

Options (in ``[kinds.NAME]``)::

    engine = "langgraph"
    url = "sqlite:////srv/agent/checkpoints.db"   # or postgresql://reader@db/agent
    max_age_s = 604800                            # threads quiet longer than this are not read

What is read: each thread's latest root checkpoint (``checkpoints``, newest id per thread)
and its pending writes (``writes`` / ``checkpoint_writes``), through LangGraph's own
checkpointer on a read-only connection (SQLite ``mode=ro``; PostgreSQL read-only sessions).

- nodes triggered and not yet run (the checkpoint's updated ``branch:to:NODE`` channels):
  running; it moves with each new checkpoint and each new pending write;
- an ``__interrupt__`` write (``interrupt()``, a person's turn): waiting, never stalled;
- an ``__error__`` write: failed, with the node's exception;
- nothing left to run: succeeded, at the last checkpoint.

Checkpoints say nothing of the process that runs a graph, so no thread is ever stuck: a
graph whose process died stops writing checkpoints and is stalled within its budget. The
buttons are Dismiss and Ask to diagnose; a resume is a configured ``retry`` action
(``[kinds.NAME.actions.retry]``: an HTTP call or a function of the app that resumes a thread).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from watchkeeper.config import KindConfig
from watchkeeper.contract import Failure, RunStatus, RunView, fingerprint
from watchkeeper.errors import ConfigError, KindUnreadable
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter, AdapterContext
from watchkeeper.kinds.engines._common import EngineOptions, Moves, digest, epoch, short, shown_url

_INTERRUPT = "__interrupt__"
_ERROR = "__error__"
_TRIGGER = "branch:to:"
#: Channels whose update means work is left to run: a node's trigger, the input, a Send.
_PENDING = ("__start__", "__pregel_tasks")
_REPR = re.compile(
    r"^(?P<name>[A-Za-z_][\w.]*)\((?P<quote>['\"])(?P<message>.*)(?P=quote)\)$", re.S
)


class LangGraphOptions(EngineOptions):
    """The ``langgraph`` kind's options."""

    max_age_s: float = Field(default=7 * 86400, gt=0)


class LangGraphAdapter(Adapter):
    """Reads LangGraph threads from a SQLite or PostgreSQL checkpointer, read-only."""

    adapter_name = "langgraph"

    def __init__(self, name: str, config: KindConfig, context: AdapterContext) -> None:
        super().__init__(name, config, context)
        self.settings = self.options(LangGraphOptions)
        url = self.settings.url
        if url.startswith("sqlite:///"):
            self.kind_of_store = "sqlite"
        elif url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            self.kind_of_store = "postgres"
        else:
            raise ConfigError(
                f"kinds.{name}.url = {shown_url(url)!r}: a LangGraph checkpointer is read from "
                "sqlite:////path/checkpoints.db or postgresql://user@host/db"
            )
        self._moves = Moves()
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------------

    def read(self, now: datetime) -> Sequence[RunView]:
        """Each recent thread's state, from its latest checkpoint and pending writes."""
        with self._lock:  # one read at a time per connection
            if self.kind_of_store == "sqlite":
                tuples = self._read_sqlite()
            else:
                tuples = self._read_postgres()
        cutoff = now - timedelta(seconds=self.settings.max_age_s)
        views = []
        for thread_id, found in tuples:
            view = self._view(thread_id, found, now)
            if view is None:
                continue
            last = view.finished_at or view.progress_at
            if last is not None and last < (now - FINISHED_WINDOW if view.status.ended else cutoff):
                continue
            views.append(view)
        self._moves.keep_only(v.run_id for v in views if not v.status.ended)
        return views

    def _read_sqlite(self) -> list[tuple[str, Any]]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = self.settings.url.removeprefix("sqlite:///")
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise KindUnreadable(f"cannot open the checkpoints at {path}: {exc}") from None
        try:
            threads = conn.execute(_LATEST).fetchall()
            saver = SqliteSaver(conn)
            return [(t, saver.get_tuple(_config(t, c))) for t, c in threads]
        except sqlite3.Error as exc:
            raise KindUnreadable(f"cannot read LangGraph's checkpoints at {path}: {exc}") from None
        finally:
            conn.close()

    def _read_postgres(self) -> list[tuple[str, Any]]:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        url = self.settings.url.replace("postgresql+psycopg://", "postgresql://", 1)
        try:
            # Keep the URL's own options (a search_path, say) beside the read-only switch.
            own = psycopg.conninfo.conninfo_to_dict(url).get("options") or ""
            with psycopg.connect(
                url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=5,
                options=f"{own} -c default_transaction_read_only=on".strip(),
            ) as conn:
                rows = conn.execute(_LATEST).fetchall()
                saver = PostgresSaver(conn)
                threads = [(r["thread_id"], r["checkpoint_id"]) for r in rows]
                return [(t, saver.get_tuple(_config(t, c))) for t, c in threads]
        except psycopg.Error as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise KindUnreadable(
                f"cannot read LangGraph's checkpoints at {shown_url(url)}: {message}"
            ) from None

    def _view(self, thread_id: str, found: Any, now: datetime) -> RunView | None:
        if found is None:
            return None
        checkpoint = found.checkpoint
        writes = list(found.pending_writes or ())
        written_at = epoch(checkpoint.get("ts"))
        channels = [channel for _, channel, _ in writes]
        look = digest([checkpoint.get("id"), [(task, channel) for task, channel, _ in writes]])
        pending = _pending_nodes(checkpoint)
        failure = None
        finished = None
        step = None
        if _ERROR in channels:
            status = RunStatus.FAILED
            reason = _error_reason(next(v for _, c, v in writes if c == _ERROR))
            failure = Failure(reason, fingerprint(reason))
            finished = written_at
        elif _INTERRUPT in channels:
            status = RunStatus.WAITING
            step = short(
                f"waiting: {_interrupt_text(next(v for _, c, v in writes if c == _INTERRUPT))}"
            )
        elif pending:
            status = RunStatus.RUNNING
            step = short(f"next: {', '.join(pending)}")
        else:
            status = RunStatus.SUCCEEDED
            finished = written_at
        progressed = written_at
        if status is RunStatus.RUNNING and writes:
            # A write between checkpoints (one branch of a step done) is progress too.
            seen = self._moves.seen(thread_id, look, now, written_at)
            progressed = max(filter(None, (written_at, seen)), default=None)
        metadata = found.metadata or {}
        return RunView(
            kind=self.name,
            run_id=thread_id,
            title=f"thread {thread_id}",
            status=status,
            state_token=look,
            progress_at=progressed,
            finished_at=finished,
            effects=self.settings.effects_value,
            failure=failure,
            step=step or (f"step {metadata['step']}" if "step" in metadata else None),
        )

    def evidence(self, run_id: str) -> dict[str, str]:
        """The thread's last checkpoint: its step, what runs next, its pending writes."""
        found = dict(
            self._read_sqlite() if self.kind_of_store == "sqlite" else self._read_postgres()
        ).get(run_id)
        if found is None:
            return {}
        writes = list(found.pending_writes or ())
        return {
            "checkpoint": str(found.checkpoint.get("id")),
            "written_at": str(found.checkpoint.get("ts")),
            "next": ", ".join(_pending_nodes(found.checkpoint)) or "nothing",
            "pending_writes": short([channel for _, channel, _ in writes]),
        }


#: The newest root checkpoint of each thread; LangGraph's ids sort by time.
_LATEST = (
    "SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id"
)


def _config(thread_id: str, checkpoint_id: str) -> Any:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _pending_nodes(checkpoint: Any) -> list[str]:
    """The nodes the last step triggered and that have not run yet."""
    updated = checkpoint.get("updated_channels")
    if updated is None:
        # Checkpoints older than updated_channels: a trigger still holding a value is pending.
        updated = list(checkpoint.get("channel_values") or ())
    nodes = [c.removeprefix(_TRIGGER) for c in updated if c.startswith(_TRIGGER)]
    nodes += [c for c in updated if c in _PENDING]
    return sorted(set(nodes))


def _error_reason(value: Any) -> str:
    text = (
        str(value) if not isinstance(value, BaseException) else f"{type(value).__name__}: {value}"
    )
    matched = _REPR.match(text.strip())
    if matched:
        return short(f"{matched['name']}: {matched['message']}")
    return short(text)


def _interrupt_text(value: Any) -> str:
    items = value if isinstance(value, list | tuple) else [value]
    shown = [str(getattr(item, "value", item)) for item in items]
    return ", ".join(shown)
