"""The single pane: models and their prices, integrations, settings, and onboarding."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support import patient_http
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.records.procs import HookState
from watchkeeper.records.queue import NewRunner
from watchkeeper.server.app import create_app
from watchkeeper.store.tokens import Role

from ...support.json_server import JsonHandler, JsonServer, answering
from ...support.waiting import wait_for
from .conftest import Dashboard, open_runtime, serve

MILLION = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}


def _serious(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the page, one line per node."""
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page).response["violations"]
    return [
        f"{page.url}: {v['id']} ({v['impact']}): {node['target']}"
        for v in found
        if v["impact"] in ("serious", "critical")
        for node in v["nodes"]
    ]


def _report(dashboard: Dashboard, provider: str, model: str) -> dict[str, Any]:
    event = {"phase": "implementer", "provider": provider, "model": model, **MILLION}
    secret = dashboard.token("runner", Role.REPORTER)
    answer = patient_http.post(
        f"{dashboard.url}/api/v1/events/batch",
        json={"events": [event]},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _start_run(dashboard: Dashboard, run_id: str, budget_s: float) -> None:
    secret = dashboard.token("runner", Role.REPORTER)
    answer = patient_http.post(
        f"{dashboard.url}/api/v1/runs",
        json={"kind": "crawl", "run_id": run_id, "title": f"crawl {run_id}", "budget_s": budget_s},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=10,
    )
    assert answer.status_code in (200, 201), answer.text


def test_models_are_grouped_by_provider_with_prices_and_an_admin_sets_an_override(
    dashboard: Dashboard, pages: Any
) -> None:
    _report(dashboard, "acme-ai", "coder-1")
    assert _report(dashboard, "inhouse", "Tuned-7b")["unpriced"] == 1
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/models")
    expect(page.locator("main h1")).to_have_text("Models")
    acme = page.locator("section[data-provider='acme-ai']")
    expect(acme.locator("h2")).to_have_text("acme-ai")
    coder = acme.locator("tr[data-model='coder-1']")
    expect(coder).to_contain_text("$3.00")
    expect(coder).to_contain_text("$15.00")
    expect(coder).to_contain_text("set in the configuration file")
    expect(coder.locator("form")).to_have_count(0)
    tuned = page.locator("section[data-provider='inhouse'] tr[data-model='tuned-7b']")
    expect(tuned).to_contain_text("unpriced")

    form = tuned.locator("form")
    form.get_by_label("Input $/M").fill("-1")
    form.get_by_label("Output $/M").fill("6")
    form.get_by_role("button", name="Set price").click()
    expect(page.locator("p.notice").first).to_contain_text("cannot be negative")
    form = page.locator("tr[data-model='tuned-7b'] form")
    form.get_by_label("Input $/M").fill("cheap")
    form.get_by_label("Output $/M").fill("6")
    form.get_by_role("button", name="Set price").click()
    expect(page.locator("p.notice").first).to_contain_text("must be a number")
    form = page.locator("tr[data-model='tuned-7b'] form")
    form.get_by_label("Input $/M").fill("2")
    form.get_by_label("Output $/M").fill("6")
    form.get_by_role("button", name="Set price").click()
    tuned = page.locator("tr[data-model='tuned-7b']")
    expect(tuned).to_contain_text("override")
    expect(tuned).to_contain_text("$2.00")
    expect(tuned).to_contain_text("@ana")
    # New calls are priced by it: 1M in at $2 and 1M out at $6.
    assert _report(dashboard, "inhouse", "tuned-7b")["cost"] == pytest.approx(8.0)

    assert _serious(page) == []
    # On a phone the override form fits, with buttons a thumb can press.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    button = page.locator("tr[data-model='tuned-7b']").get_by_role("button", name="Set price")
    expect(button).to_be_visible()
    box = button.bounding_box()
    assert box is not None and box["height"] >= 44 and box["x"] + box["width"] <= 390
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.emulate_media(color_scheme="dark")
    assert _serious(page) == []

    viewer = dashboard.login(pages(), "vic", Role.VIEWER)
    viewer.goto(f"{dashboard.url}/web/models")
    expect(viewer.locator("tr[data-model='tuned-7b']")).to_contain_text("override")
    expect(viewer.locator("main form")).to_have_count(0)


class _Hook(JsonHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_json(200, {"ok": True})


@pytest.fixture
def wired(tmp_path: Path, sqlite_template: Path) -> Iterator[Dashboard]:
    """A server whose ops notices go to a working webhook and to a Slack with no token."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(sqlite_template, data / "watchkeeper.db")
    with answering(JsonServer(("127.0.0.1", 0), _Hook)) as hook:
        runtime = open_runtime(
            data,
            ops={
                "webhook_url": f"{hook.url}/hooks/T0KEN-IN-PATH",
                "channels": ["webhook", "slack:C0123"],
            },
            forge={"github_secret": "gh-s3cret-value", "sentry_secret": "sn-s3cret-value"},
        )
        app = create_app(runtime, run_sweeper=True)
        try:
            with serve(app) as url:
                yield Dashboard(url, runtime, app)
        finally:
            runtime.close()


def _sentry_issue(dashboard: Dashboard) -> None:
    """A signed Sentry delivery: a new issue, as Sentry's integration platform sends it."""
    issue = {"id": "4506789", "shortId": "APP-1", "title": "KeyError: 'amount'"}
    body = json.dumps({"action": "created", "data": {"issue": issue}}).encode()
    headers = {
        "Content-Type": "application/json",
        "Sentry-Hook-Resource": "issue",
        "Sentry-Hook-Timestamp": str(int(time.time())),
        "Sentry-Hook-Signature": hmac.new(b"sn-s3cret-value", body, hashlib.sha256).hexdigest(),
    }
    answer = patient_http.post(f"{dashboard.url}/webhooks/sentry", content=body, headers=headers)
    assert answer.status_code == 200, answer.text


def _github_run(dashboard: Dashboard, folder: Path) -> str:
    """A process run from a GitHub issue; with no GitHub token its result cannot be posted."""
    engine = dashboard.runtime.procs
    origin = {"platform": "github", "chat_id": "acme/app", "thread_id": "7"}
    request = LaunchRequest(("true",), cwd=str(folder), name="fix #7", origin=origin, detach=True)
    run_id = engine.start(request).run.run_id

    def refused() -> bool:
        # Settled now, as `watchkeeper reclaim` does, rather than at the next sweep (30 s).
        engine.reap()
        return engine.get(run_id).hook_state is HookState.FAILED

    wait_for(refused, what="the GitHub result post refused", timeout=60)
    return run_id


def _first_job(dashboard: Dashboard) -> None:
    """A runner takes a job up and finishes it."""
    runtime = dashboard.runtime
    queue = QueueService(runtime.store, runtime.settings, clock=runtime.clock, launchers={})
    runner = queue.register(NewRunner("cpu", 1, "cpu-host-1", 4242, None, "cpu-1"))
    queue.submit("hello", org="acme", fleet="cpu", payload={"argv": ["true"]}, submitted_by="ci")
    leased = queue.lease(runner.id)[0]
    queue.complete(leased.task.id, leased.token)


def test_integrations_say_what_is_configured_how_deliveries_went_and_never_a_secret(
    wired: Dashboard, pages: Any, tmp_path: Path
) -> None:
    _sentry_issue(wired)
    _github_run(wired, tmp_path)
    _start_run(wired, "crawl-1", 1.0)
    wait_for(
        lambda: (
            {i.name for i in wired.runtime.install.integrations() if i.channel and i.channel.failed}
            == {"slack"}
        ),
        what="a failed delivery to Slack",
        timeout=60,
    )
    page = wired.login(pages(), "ana")
    page.goto(f"{wired.url}/web/integrations")
    expect(page.locator("main h1")).to_have_text("Integrations")
    webhook = page.locator("[data-integration='webhook']")
    expect(webhook).to_contain_text("configured")
    expect(webhook).to_contain_text("posts to 127.0.0.1")
    expect(webhook).to_contain_text(re.compile(r"last delivery .* sent"))
    slack = page.locator("[data-integration='slack']")
    expect(slack).to_contain_text("not configured")
    expect(slack).to_contain_text(re.compile(r"1 failed"))
    expect(slack).to_contain_text("channel slack is not configured")
    expect(slack).to_contain_text("watchkeeper init --platform slack")
    assert _serious(page) == []
    github = page.locator("[data-integration='github']")
    expect(github).to_contain_text("webhook secret set in the file")
    # Results posted on GitHub issues and pull requests: how many, and why the last failed.
    posts = github.locator(".result-posts")
    expect(posts).to_contain_text("1 result post")
    expect(posts).to_contain_text("1 failed")
    expect(posts).to_contain_text("acme/app#7")
    expect(posts).to_contain_text("github_token_env")
    sentry = page.locator("[data-integration='sentry']")
    expect(sentry).to_contain_text("configured")
    expect(sentry).not_to_contain_text("not configured")
    expect(sentry).to_contain_text("client secret set in the file")
    expect(sentry).to_contain_text(re.compile(r"last webhook .*; 1 received"))
    expect(page.locator("[data-integration='linear']")).to_contain_text("not configured")
    content = page.content()
    assert "gh-s3cret-value" not in content and "T0KEN-IN-PATH" not in content
    assert "sn-s3cret-value" not in content

    # The card reached the webhook and a runner ran a job: nothing left to do.
    _first_job(wired)
    page.goto(f"{wired.url}/web/onboarding")
    expect(page.locator("ol.steps > li[data-done='true']")).to_have_count(6)
    expect(page.locator(".next-step")).to_contain_text("All done")


def test_settings_list_tokens_budgets_and_admins_and_an_admin_makes_and_revokes_a_token(
    dashboard: Dashboard, pages: Any
) -> None:
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/settings")
    expect(page.locator("main h1")).to_have_text("Settings")
    tokens = page.locator("#tokens")
    expect(tokens.locator("tr[data-token-name='ana']")).to_contain_text("admin")
    assert dashboard.tokens["ana"] not in page.content()
    budgets = page.locator("#budgets")
    expect(budgets.locator("tr[data-kind='crawl']")).to_contain_text("set in")
    expect(budgets.locator("tr[data-kind='task']")).to_contain_text("10 min")
    expect(page.locator("#admins")).to_contain_text("Slack")
    expect(page.get_by_role("link", name="Silences")).to_have_count(2)  # the nav's and the page's

    made = page.locator("#new-token")
    made.get_by_label("Name").fill("ci bot")
    made.get_by_label("Role").select_option("reporter")
    made.get_by_role("button", name="Make token").click()
    secret = page.locator("#made-secret")
    expect(secret).to_be_visible()
    value = secret.inner_text().strip()
    assert value.startswith("wk_") and _serious(page) == []
    bearer = {"Authorization": f"Bearer {value}"}
    assert patient_http.get(f"{dashboard.url}/api/v1/runs", headers=bearer).status_code != 401
    row = page.locator("tr[data-token-name='ci bot']")
    expect(row).to_contain_text("reporter")
    page.goto(f"{dashboard.url}/web/settings")
    expect(page.locator("#made-secret")).to_have_count(0)  # shown once
    page.locator("tr[data-token-name='ci bot']").get_by_role("button", name="Revoke").click()
    expect(page.locator("tr[data-token-name='ci bot']")).to_contain_text("revoked")
    bearer = {"Authorization": f"Bearer {value}"}
    assert patient_http.get(f"{dashboard.url}/api/v1/runs", headers=bearer).status_code == 401

    viewer = dashboard.login(pages(), "vic", Role.VIEWER)
    viewer.goto(f"{dashboard.url}/web/settings")
    expect(viewer.locator("#new-token")).to_have_count(0)
    expect(viewer.get_by_role("button", name="Revoke")).to_have_count(0)


def test_onboarding_ticks_each_step_the_install_has_done_and_gives_the_next_command(
    dashboard: Dashboard, pages: Any
) -> None:
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/onboarding")
    expect(page.locator("main h1")).to_have_text("Getting started")
    steps = page.locator("ol.steps > li")
    expect(steps).to_have_count(6)
    job = page.locator("li[data-step='job']")
    expect(job).to_have_attribute("data-done", "false")
    expect(job).to_contain_text("watchkeeper runner --fleet")
    expect(job).to_contain_text("watchkeeper submit --fleet")
    expect(page.locator("li[data-step='token']")).to_have_attribute("data-done", "true")
    chat = page.locator("li[data-step='chat']")
    expect(chat).to_have_attribute("data-done", "false")
    expect(chat).to_contain_text("watchkeeper init --platform")
    expect(page.locator("li[data-step='run']")).to_have_attribute("data-done", "false")
    expect(page.locator("li[data-step='run']")).to_contain_text("watchkeeper run")
    expect(page.locator(".next-step")).to_contain_text("Connect a chat")

    _start_run(dashboard, "crawl-9", 1.0)
    wait_for(lambda: dashboard.runtime.incidents.list("open"), what="an incident", timeout=60)
    page.reload()
    expect(page.locator("li[data-step='run']")).to_have_attribute("data-done", "true")
    expect(page.locator("li[data-step='incident']")).to_have_attribute("data-done", "true")
    expect(page.locator("li[data-step='card']")).to_have_attribute("data-done", "false")
    expect(job).to_have_attribute("data-done", "false")

    _first_job(dashboard)
    page.reload()
    expect(job).to_have_attribute("data-done", "true")
    expect(job).to_contain_text("1 runner(s) registered, 1 task(s) run to the end")
