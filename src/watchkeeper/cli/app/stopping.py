"""Stop signals for ``serve``, from its first line to its last.

uvicorn listens for SIGINT and SIGTERM only while its server runs. Before that (the store
opening, the app being built, the event loop starting) Python's defaults applied: SIGINT
raised ``KeyboardInterrupt`` wherever the main thread stood (exit 130, and once a server
that went on serving, the signal swallowed) and SIGTERM killed the process before the
runtime was closed. :class:`StopSignals` holds both for the whole command instead.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

HANDLED = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """Catches SIGINT and SIGTERM while ``serve`` runs (a context manager).

    Until :meth:`hold` is called a signal ends the command at once with exit 0, unwinding
    through every ``finally`` (nothing is open yet that a stop would have to wait for).
    From then on a signal is only recorded: :attr:`requested` tells the HTTP server, which
    stops as soon as it has started, the way it stops on a signal it caught itself.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        self._holding = False
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop signal has arrived."""
        return bool(self.received)

    def hold(self) -> None:
        """From now on record signals instead of exiting on them."""
        self._holding = True

    def __enter__(self) -> StopSignals:
        # Signal handlers can only be set from the main thread (a test may serve elsewhere).
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in HANDLED}
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if not self._holding:
            raise SystemExit(0)
