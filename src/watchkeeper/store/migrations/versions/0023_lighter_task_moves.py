"""queue: a task's moves write less

* On PostgreSQL the status, runner and finish indexes of ``queue_tasks`` become
  partial (unfinished tasks; running tasks; finished tasks), so a claim and an
  end each leave three index entries unwritten. SQLite keeps them whole.
* ``queue_events.job_id`` loses its foreign key: checking it locked the job's
  row for every timeline entry. Deleting a job deletes its entries itself.
* Task tokens are derived from the lease (``store/tokens.py``) instead of stored:
  the rows of tasks no longer running go; those of running tasks stay valid
  until their lease ends. A downgrade stores the derived token of each running
  task, so the older server, which looks tokens up by their stored hash, takes
  the token that task's process already holds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import sqlalchemy as sa
from alembic import op

from watchkeeper.store.migrations import columns as c

revision = "0023"
down_revision = "0022"

_PARTIAL = {
    ("status", "fleet", "queued_at", "id"): "status IN ('queued', 'running', 'stuck')",
    ("runner_id",): "status = 'running'",
    ("finished_at",): "finished_at IS NOT NULL",
}
_EVENTS_JOB = "fk_queue_events_job_id_queue_jobs"


def _name(columns: tuple[str, ...]) -> str:
    return op.f(f"ix_queue_tasks_{'_'.join(columns)}")


def upgrade() -> None:
    for columns, predicate in _PARTIAL.items():
        op.drop_index(_name(columns), table_name="queue_tasks")
        op.create_index(
            _name(columns), "queue_tasks", list(columns), postgresql_where=sa.text(predicate)
        )
    with op.batch_alter_table("queue_events") as batch:
        batch.drop_constraint(_EVENTS_JOB, type_="foreignkey")
    op.execute(
        "DELETE FROM api_tokens WHERE role = 'task' AND NOT EXISTS (SELECT 1 FROM queue_tasks t"
        " WHERE t.id = api_tokens.task_id AND t.status = 'running')"
    )


def _derived_token(task_id: str, lease_token: str) -> str:
    """A task's token as this revision derives it; spelled here, as a migration stays
    what it was when it shipped."""
    mac = hmac.new(lease_token.encode(), f"task-token:{task_id}".encode(), hashlib.sha256)
    return "wk_" + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=") + task_id


def _store_running_task_tokens() -> None:
    bind = op.get_bind()
    running = bind.execute(
        sa.text(
            "SELECT id, job_id, lease_token, leased_at FROM queue_tasks"
            " WHERE status = 'running' AND lease_token IS NOT NULL"
        )
    ).all()
    stored = bind.execute(sa.text("SELECT token_hash FROM api_tokens WHERE role = 'task'"))
    stored_hashes = {row.token_hash for row in stored}
    names = ("name", "role", "token_hash", "created_at", "task_id", "job_id")
    tokens = sa.table("api_tokens", *(sa.column(name) for name in names))
    rows = []
    for task in running:
        secret = _derived_token(task.id, task.lease_token)
        digest = hashlib.sha256(secret.encode("utf-8")).hexdigest()
        if digest not in stored_hashes:
            rows.append(
                {
                    "name": f"task {task.id}"[:100],
                    "role": "task",
                    "token_hash": digest,
                    "created_at": task.leased_at,
                    "task_id": task.id,
                    "job_id": task.job_id,
                }
            )
    if rows:
        op.bulk_insert(tokens, rows)


def downgrade() -> None:
    _store_running_task_tokens()
    with op.batch_alter_table("queue_events") as batch:
        batch.create_foreign_key(_EVENTS_JOB, "queue_jobs", ["job_id"], ["id"], ondelete="CASCADE")
    for columns in _PARTIAL:
        op.drop_index(_name(columns), table_name="queue_tasks")
        c.create_indexes("queue_tasks", list(columns))
