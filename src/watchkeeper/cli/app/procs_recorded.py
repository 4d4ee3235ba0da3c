"""``run`` with a server in reach: the command runs here, the run is recorded on the server.

The run is recorded on the server before its command starts (a server that does not
take it starts nothing), and this host's engine for that server
(:mod:`watchkeeper.procs.reported`) runs and settles it, its files in this user's state
folder, never in the folder the command was typed in. A relay reports its output and
its end to the server, where ``ps``, ``status``, ``logs`` and ``wait`` find it and the
sweep judges it; a foreground run reports its own end before ``run`` exits.
"""

from __future__ import annotations

from contextlib import closing, suppress
from typing import TYPE_CHECKING

from watchkeeper.cli.console import console
from watchkeeper.client.locate import note
from watchkeeper.errors import ClientError
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.procs.settle import exit_status

if TYPE_CHECKING:
    from watchkeeper.cli.app.procs_where import Place
    from watchkeeper.procs.launch import LaunchRequest


def run_recorded(where: Place, request: LaunchRequest) -> int | None:
    """Start ``request`` here, recorded on the server of ``where``; the run's exit status,
    or ``None`` for a detached run (its id is printed)."""
    from watchkeeper.procs import reported

    with (
        closing(reported.open_engine(reported.reporting_dir(where.url))) as engine,
        where.client() as client,
    ):
        reporter = reported.Reporter(client, engine)
        try:
            launched = engine.start(request, tee=not request.detach, announce=reporter.announce)
        except LaunchFailed as exc:
            if exc.run_id is not None:  # recorded there, then failed here: say how it ended
                with suppress(ClientError):
                    reporter.sync(engine.get(exc.run_id))
            raise
        reported.start_relay(engine.data_dir, where.url, where.token)
        note(f"recorded on {where.url}")
        try:
            reporter.sync(engine.get(launched.run.run_id))  # the server shows it running now
        except ClientError as exc:
            note(f"{launched.run.run_id} runs; its start did not reach {where.url} yet: {exc}")
        if request.detach:
            console.print(launched.run.run_id, highlight=False)
            return None
        ended = engine.finish_foreground(launched)
        try:
            reporter.report_end(ended.run_id)
        except ClientError as exc:
            note(
                f"the end of {ended.run_id} did not reach {where.url} ({exc.message}): "
                "`watchkeeper reclaim` reports it once the server answers"
            )
    return exit_status(ended.exit_code, ended.signal, ended.status.value)


def reclaim_here(where: Place) -> dict[str, list[str]]:
    """Settle this host's runs recorded on the server of ``where`` and report each with news;
    what was settled (nothing when this host recorded none there)."""
    from watchkeeper.procs import reported

    data_dir = reported.reporting_dir(where.url)
    if not data_dir.is_dir():
        return {"collected": [], "reclaimed": [], "timed_out": []}
    with closing(reported.open_engine(data_dir)) as engine, where.client() as client:
        left = reported.Reporter(client, engine).pass_over()
    if left.error is not None:
        raise left.error
    done = left.reaped
    return {"collected": done.collected, "reclaimed": done.reclaimed, "timed_out": done.timed_out}
