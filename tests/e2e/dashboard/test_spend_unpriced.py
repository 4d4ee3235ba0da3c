"""The spend page: unpriced is said, never drawn as $0, and one model is one bar."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline.service import TimelineService

from .conftest import Dashboard


def _call(model: str, provider: str) -> NewEvent:
    return NewEvent(
        "implementer",
        role="implementer",
        model=model,
        provider=provider,
        usage=Usage(input_tokens=1_000_000, output_tokens=100_000),
    )


def test_unpriced_spend_says_so_and_spellings_of_one_model_are_one_bar(
    dashboard: Dashboard, pages: Any
) -> None:
    runtime = dashboard.runtime
    timeline = TimelineService(runtime.store, runtime.settings, clock=runtime.clock)
    timeline.ingest([_call("Mystery", "elsewhere")], "runner-a")
    timeline.ingest([_call("mystery", "elsewhere")], "runner-b")
    page = dashboard.login(pages(), "ana")
    page.goto(f"{dashboard.url}/web/spend")
    main = page.locator("main")
    expect(main).to_contain_text("No call was priced: 2 calls, all unpriced.")
    expect(main).not_to_contain_text("$0.0")
    models = page.locator('svg.bars[data-by="model"]')
    expect(models.locator("text.bar-key")).to_have_text(["mystery"])
    expect(models.locator("text.bar-value")).to_have_text(["unpriced"])

    timeline.ingest([_call("Coder-1", "acme-ai")], "runner-a")
    timeline.ingest([_call("coder-1", "acme-ai")], "runner-b")
    page.reload()
    # Two calls of 1M in and 100k out at $3 and $15 per million: $9.00.
    expect(main).to_contain_text("$9.00 over 4 calls, and 2 unpriced calls")
    expect(models.locator("text.bar-key")).to_have_text(["coder-1", "mystery"])
    expect(models.locator("text.bar-value")).to_have_text(["$9.0000", "unpriced"])
