"""Exceptions raised by :mod:`watchkeeper.supervise`.

The whole tree hangs from one root so callers can catch everything this
package raises in one clause; that root hangs from watchkeeper's own, the leaf
:mod:`watchkeeper.errors` (the only part of the app this package imports)::

    WatchkeeperError
    └── SuperviseError
        ├── ConfigurationError      a spec or policy is invalid (your code)
        ├── TreeFixedError          a child was added to a non-dynamic supervisor
        ├── StartError              a child could not be started or never became ready
        ├── RestartIntensityExceeded  a supervisor gave up on its children
        ├── SupervisorStoppedError  the supervisor was already stopped (your code)
        ├── UnknownChild            a supervisor has no child of that name (also a NotFound)
        └── CircuitOpenError        a circuit breaker rejected a call
"""

from __future__ import annotations

from watchkeeper.errors import NotFound, WatchkeeperError


class SuperviseError(WatchkeeperError):
    """Root of every exception raised by :mod:`watchkeeper.supervise`."""


class ConfigurationError(SuperviseError, ValueError):
    """A child spec, policy, breaker or check was configured with invalid values."""


class TreeFixedError(SuperviseError):
    """A child was added to a supervisor that was not built as dynamic."""

    def __init__(self, supervisor: str) -> None:
        super().__init__(
            f"supervisor {supervisor!r} is fixed once built: build it with "
            "SupervisorBuilder(...).dynamic() to add children at run time"
        )
        self.supervisor = supervisor


class StartError(SuperviseError):
    """A child failed to start, or did not signal ready within its start timeout."""

    def __init__(self, path: str, child: str, reason: str) -> None:
        super().__init__(f"child {child!r} of supervisor {path!r} failed to start: {reason}")
        self.path = path
        self.child = child
        self.reason = reason


class RestartIntensityExceeded(SuperviseError):
    """A supervisor restarted its children more often than its policy allows and gave up."""

    def __init__(self, path: str, max_restarts: int, period_s: float) -> None:
        super().__init__(
            f"supervisor {path!r} gave up: more than {max_restarts} restarts within {period_s:g} s"
        )
        self.path = path
        self.max_restarts = max_restarts
        self.period_s = period_s


class SupervisorStoppedError(SuperviseError):
    """An operation needed a running supervisor, but it has stopped."""

    def __init__(self, path: str) -> None:
        super().__init__(f"supervisor {path!r} has stopped; build and start a new one")
        self.path = path


class UnknownChild(SuperviseError, NotFound):
    """A child was named that the supervisor does not have."""

    def __init__(self, path: str, child: str, known: tuple[str, ...]) -> None:
        names = ", ".join(known) or "none"
        super().__init__(f"supervisor {path!r} has no child {child!r}; its children are: {names}")
        self.path = path
        self.child = child


class CircuitOpenError(SuperviseError):
    """A circuit breaker rejected the call without running it.

    ``retry_at`` is the breaker clock's time at which a probe will be allowed,
    ``retry_in_s`` the same as a delay from the moment of the rejection.
    """

    def __init__(self, name: str, state: str, retry_at: float, retry_in_s: float) -> None:
        super().__init__(
            f"circuit breaker {name!r} is {state}: call rejected; "
            f"a probe will be let through in {max(retry_in_s, 0.0):.3f} s"
        )
        self.name = name
        self.state = state
        self.retry_at = retry_at
        self.retry_in_s = retry_in_s
