"""``watchkeeper doctor``: check a running installation, end to end, in one table."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from watchkeeper.cli.app.checks import (
    Check,
    configured_platforms,
    failed,
    print_checks,
    token_check,
)
from watchkeeper.cli.app.common import settings as load_settings
from watchkeeper.cli.app.options import SERVER, TOKEN, server_url
from watchkeeper.client.wire import TOKEN_ENV, URL_ENV

if TYPE_CHECKING:
    import httpx

    from watchkeeper.config import Settings

#: Sweeps missed in a row before the sweeper counts as stale.
STALE_SWEEPS = 3
_START = "start it with `watchkeeper serve`, or point at it with --server or WATCHKEEPER_URL"


def doctor(
    ctx: typer.Context,
    server: str | None = SERVER,
    token: str | None = TOKEN,
) -> None:
    """Check a running install: server, store, sweeper, token, runners and chats."""
    from watchkeeper.errors import ConfigError

    checks: list[Check] = []
    found: Settings | None
    try:
        found = load_settings(ctx)
        checks.append(_config_check(ctx))
    except ConfigError as exc:
        found = None
        checks.append(Check("configuration", "fail", str(exc), "fix the file, then run again"))
    if found is None and not (server or os.environ.get(URL_ENV)):
        # The server's address would come from the file that just failed.
        print_checks("watchkeeper", checks)
        raise typer.Exit(1)
    url, source = server_url(server)
    checks.extend(check_server(url, source, token or os.environ.get(TOKEN_ENV), found))
    if found is not None:
        checks.extend(_chats(found))
    print_checks(f"watchkeeper at {url}", checks)
    if failed(checks):
        raise typer.Exit(1)


def _config_check(ctx: typer.Context) -> Check:
    from watchkeeper.cli.app.common import chosen_config, state
    from watchkeeper.paths import CONFIG_ENV, LOCAL_CONFIG

    chosen = chosen_config(state(ctx))
    if chosen:
        return Check("configuration", "ok", f"read {chosen}")
    if os.path.isfile(LOCAL_CONFIG):
        return Check(
            "configuration",
            "warn",
            f"no file: the defaults; ./{LOCAL_CONFIG} here is not read",
            f"watchkeeper --config ./{LOCAL_CONFIG} doctor, or export {CONFIG_ENV}",
        )
    return Check("configuration", "ok", "no file: the defaults")


def check_server(url: str, source: str, token: str | None, found: Settings | None) -> list[Check]:
    """The server's answer, its store and sweeper, the token, and the runners."""
    import httpx

    try:
        with httpx.Client(base_url=url, timeout=10) as http:
            health = http.get("/healthz")
            checks = [Check("server", "ok", f"answers at {url}")]
            checks.extend(_health(health, found))
            checks.extend(_with_token(http, token))
    except httpx.HTTPError as exc:
        detail = f"no server answers at {url} (from {source}): {type(exc).__name__}"
        return [Check("server", "fail", detail, _START)]
    return checks


#: How to fix what each ``/healthz`` cause names (docs/supervision.md lists the causes).
_CAUSE_HINTS = {
    "sweep": "read the server's log for why sweeps stopped; restart `watchkeeper serve`",
    "loops": "restart the loop named, or `watchkeeper serve`; its log says why it ended",
    "store": "free disk space, or make the database writable; health recovers by itself "
    "once writes go through",
    "paging": "check the platform and its token (`watchkeeper test-card`); messages go out "
    "once a probe gets through",
    "cluster": "read the server's log; `watchkeeper replicas` shows who leads",
}


def _health(response: httpx.Response, found: Settings | None) -> list[Check]:
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        return [Check("/healthz", "fail", f"HTTP {response.status_code}, not JSON", _START)]
    causes = [c for c in body.get("causes") or [] if isinstance(c, dict)]
    status = str(body.get("status") or "unknown")
    if response.status_code == 200 and not causes:
        checks = [Check("/healthz", "ok", "healthy")]
    else:
        checks = [
            Check(
                "/healthz",
                "fail",
                f"HTTP {response.status_code}, {status}: "
                + (f"{len(causes)} cause(s), below" if causes else body.get("error", "unhealthy")),
                "failing: an orchestrator should restart it; degraded: someone must look",
            )
        ]
    # Each cause is a row of its own (the store's is the store row): degraded is a
    # failure here too, since nothing restarts a degraded server and someone must look.
    for cause in causes:
        check = str(cause.get("check") or "health")
        if check != "store":
            checks.append(
                Check(
                    f"health: {check}",
                    "fail",
                    f"{cause.get('status')}: {cause.get('detail')}",
                    _CAUSE_HINTS.get(check, "read the server's log"),
                )
            )
    checks.append(_store(causes, str(body.get("error") or "")))
    checks.append(_sweeper(body.get("supervision") or {}, found))
    return checks


def _store(causes: list[dict[str, Any]], error: str) -> Check:
    refused = next((c for c in causes if c.get("check") == "store"), None)
    if refused is not None:
        return Check("store", "fail", str(refused.get("detail")), _CAUSE_HINTS["store"])
    if not causes and "database" in error:  # a server from before health named its causes
        return Check("store", "fail", error, "check database_url and that the database runs")
    return Check("store", "ok", "the server reads its database; no write was refused")


def _sweeper(supervision: dict[str, Any], found: Settings | None) -> Check:
    interval = found.check_interval_s if found is not None else 30.0
    if supervision.get("failing_since"):
        return Check(
            "sweeper",
            "fail",
            f"sweeps failing since {supervision['failing_since']}: {supervision.get('error')}",
            "read the server's log for the failing sweep",
        )
    last = supervision.get("last_ok_at")
    if not last:
        return Check("sweeper", "warn", "no sweep has finished yet", "wait one check_interval_s")
    age = (
        datetime.now(UTC) - datetime.fromisoformat(str(last).replace("Z", "+00:00"))
    ).total_seconds()
    if age > STALE_SWEEPS * interval:
        return Check(
            "sweeper",
            "warn",
            f"last sweep {age:.0f}s ago, check_interval_s is {interval:.0f}",
            "the sweeper may be stuck: read the server's log, restart `watchkeeper serve`",
        )
    return Check("sweeper", "ok", f"last sweep {age:.0f}s ago")


def _with_token(http: httpx.Client, token: str | None) -> list[Check]:
    if not token:
        return [
            Check(
                "token",
                "fail",
                "no token: runners and the API were not checked",
                "pass --token or set WATCHKEEPER_TOKEN (`watchkeeper token create --role viewer`)",
            )
        ]
    response = http.get("/api/v1/runners", headers={"Authorization": f"Bearer {token}"})
    if response.status_code in {401, 403}:
        return [
            Check(
                "token",
                "fail",
                f"the server refused it (HTTP {response.status_code})",
                "create one with `watchkeeper token create --role viewer` on the server's host",
            )
        ]
    if not response.is_success:
        return [Check("token", "fail", f"HTTP {response.status_code} listing runners", "")]
    runners = response.json().get("runners", [])
    live = [r for r in runners if r.get("alive")]
    lost = [r for r in runners if not r.get("alive") and not r.get("stopped_at")]
    checks = [Check("token", "ok", "accepted")]
    if lost:
        names = ", ".join(str(r.get("name") or r.get("id")) for r in lost[:5])
        checks.append(
            Check(
                "runners",
                "warn",
                f"{len(live)} alive, {len(lost)} silent: {names}",
                "restart `watchkeeper runner` on their hosts; their tasks are reclaimed",
            )
        )
    else:
        checks.append(Check("runners", "ok", f"{len(live)} alive"))
    return checks


def _chats(found: Settings) -> list[Check]:
    platforms = configured_platforms(found)
    if not platforms:
        return [
            Check(
                "chats",
                "warn",
                "no chat platform configured: notices go to the log only",
                "run `watchkeeper init --platform telegram` (or discord, slack)",
            )
        ]
    return [token_check(found, name) for name in platforms]
