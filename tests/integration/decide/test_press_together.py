"""Presses judged together: when the losses cannot be written, the winner's claim still stands."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine

from watchkeeper.contract import Action
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.crowd import Ask, Later
from watchkeeper.decide.decider import Outcome
from watchkeeper.errors import WatchkeeperError
from watchkeeper.runtime import Runtime

from ..helpers import reports_for, start, sweep


@contextmanager
def losses_refused(url: str) -> Iterator[None]:
    """The database refuses every "already decided" press row until the block ends."""
    engine = create_engine(url)
    sqlite = engine.dialect.name == "sqlite"
    try:
        with engine.begin() as conn:
            if sqlite:
                conn.exec_driver_sql(
                    "CREATE TRIGGER refuse_losses BEFORE INSERT ON presses "
                    "WHEN NEW.outcome = 'already_decided' "
                    "BEGIN SELECT RAISE(ABORT, 'losses refused'); END"
                )
            else:
                conn.exec_driver_sql(
                    "CREATE FUNCTION refuse_losses() RETURNS trigger AS $$ BEGIN "
                    "IF NEW.outcome = 'already_decided' THEN RAISE EXCEPTION 'losses refused'; "
                    "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
                )
                conn.exec_driver_sql(
                    "CREATE TRIGGER refuse_losses BEFORE INSERT ON presses "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_losses()"
                )
        yield
    finally:
        with engine.begin() as conn:
            if sqlite:
                conn.exec_driver_sql("DROP TRIGGER IF EXISTS refuse_losses")
            else:
                conn.exec_driver_sql("DROP TRIGGER IF EXISTS refuse_losses ON presses")
                conn.exec_driver_sql("DROP FUNCTION IF EXISTS refuse_losses()")
        engine.dispose()


def test_unwritable_losses_fail_alone_and_the_winner_is_carried_out(runtime: Runtime) -> None:
    start(runtime, "t1", "swarm_task", effects="none")
    reports_for(runtime).fail("swarm_task", "t1", "worker died", None, None)
    incident_id = sweep(runtime).applied.opened[0]
    token = runtime.store.incidents.get(incident_id).state_token
    asks = [Ask(Action.DISMISS, token, Actor(f"@p{i}", "api", True)) for i in range(3)]

    with losses_refused(runtime.store.url):
        verdicts = runtime.decider.press_together(incident_id, asks)

    won, *lost = verdicts
    assert isinstance(won, Later)
    assert all(isinstance(v, WatchkeeperError) for v in lost), lost
    assert won.work().outcome is Outcome.DISMISSED
    assert runtime.store.incidents.get(incident_id).decision is not None
    recorded = runtime.store.decisions.presses_for(incident_id)
    assert [(p.actor, p.outcome) for p in recorded] == [("@p0", "won")]
