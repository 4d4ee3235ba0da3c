"""What a report or a job describes is stored redacted; a task's argv is stored as given and
shown redacted.

A push run's title, step, failure reason, fingerprint and detail, the incident opened from
it (its title, reason and events) and a job's title are descriptive: redacted once, where
they enter the store, so every reader (API, CSV, pages, cards, CLI) gets them clean. A job's
argv is what its runner runs: kept as given, and redacted in every answer.
"""

from __future__ import annotations

from watchkeeper.clock import ManualClock
from watchkeeper.queue.views import job_json, task_json
from watchkeeper.runtime import Runtime
from watchkeeper.store.runs import NewRun

from .helpers import reports_for, sweep

GITLAB = "glpat-" + "Zq3xW9vT8sR7pQ6oN5mL"
NPM = "npm_" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9"
EMAIL = "alice.smith@example.com"
SECRETS = (GITLAB, NPM, "Tr0ub4dor&3x", EMAIL)
TEXT = f"push with {GITLAB}, publish with {NPM}, mysql --password Tr0ub4dor&3x, ask {EMAIL}"


def _raw(*texts: str | None) -> list[str]:
    return [secret for secret in SECRETS if any(secret in (text or "") for text in texts)]


def test_a_push_runs_texts_and_its_incident_are_stored_redacted(
    runtime: Runtime, clock: ManualClock
) -> None:
    reports = reports_for(runtime)
    reports.start(NewRun("crawl", "r1", TEXT, None, "none", None, None, 90))
    reports.progress("crawl", "r1", TEXT, None)
    reports.fail("crawl", "r1", TEXT, None, TEXT)
    run = runtime.store.runs.get("crawl", "r1")
    assert _raw(run.title, run.step, run.failure_reason, run.detail) == []
    assert "[redacted]" in run.title and "[email]" in run.title
    sweep(runtime)
    (listed,) = runtime.store.incidents.list()
    incident = runtime.store.incidents.get(listed.id)
    assert _raw(incident.title, incident.reason, *(e.detail for e in incident.events)) == []


def test_the_same_failure_with_another_secret_is_the_same_failure(runtime: Runtime) -> None:
    reports = reports_for(runtime)
    for run_id, token in (("a", GITLAB), ("b", "glpat-" + "Yt7Uw2Vx4Rs6Pn8Mk0Lj")):
        reports.start(NewRun("crawl", run_id, "t", None, "none", None, None, 90))
        reports.fail("crawl", run_id, f"push refused for {token}", None, None)
    first, second = (runtime.store.runs.get("crawl", r) for r in ("a", "b"))
    assert first.failure_fingerprint == second.failure_fingerprint
    assert first.failure_reason == "push refused for [redacted]"


def test_a_jobs_title_is_stored_redacted_and_its_argv_as_given_but_shown_redacted(
    runtime: Runtime,
) -> None:
    argv = ["deploy", "--token", NPM, f"--notify={EMAIL}"]
    job = runtime.queue.submit(
        TEXT, org="acme", fleet="f", payload={"argv": argv}, submitted_by="admin"
    )
    stored = runtime.queue.job(job.id)
    assert _raw(stored.title) == [] and "[redacted]" in stored.title
    assert stored.payload["argv"] == argv  # the runner runs what was submitted
    shown = job_json(stored, {}, {})
    assert shown["payload"]["argv"][:2] == ["deploy", "--token"]
    assert _raw(*shown["payload"]["argv"], *shown["tasks"][0]["payload"]["argv"]) == []
    (task,) = stored.tasks
    assert _raw(*task_json(task, {}, {})["payload"]["argv"]) == []
