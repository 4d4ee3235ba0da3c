"""A run that came from a GitHub pull request or issue says there how it ended.

Its origin is ``{"platform": "github", "chat_id": "OWNER/REPO", "thread_id": "N"}``
(``--origin github:OWNER/REPO#N``). When it starts, the issue is labelled
``watchkeeper:waiting`` (best effort: a failure is logged and noted in the run's hook
log, the run starts anyway). When it ends, one comment (status, exit code, duration,
the redacted tail of its output, a link to its record) and one outcome label replace
the waiting label. The end is posted as one of the run's completion hooks, so it
shares their journal: claimed before the call, never posted twice, ``maybe_fired``
(maybe posted) when watchkeeper stopped between the claim and the answer.

The outcome label comes from how the run ended, unless its last line declares one:
``DONE`` (ready, when it succeeded), ``PARKED: reason`` or ``BLOCKED: reason``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from watchkeeper.errors import ConfigError, WatchkeeperError
from watchkeeper.procs import launch, layout
from watchkeeper.procs.errors import LaunchFailed

if TYPE_CHECKING:
    from collections.abc import Callable

    from watchkeeper.config import ForgeConfig
    from watchkeeper.procs.launch import Launched, LaunchRequest
    from watchkeeper.records.procs import ProcRun

log = logging.getLogger(__name__)
TIMEOUT_S = 10.0
PREFIX = "watchkeeper:"
WAITING = PREFIX + "waiting"
OUTCOMES = ("ready", "failed", "parked", "blocked")
_DECLARED = re.compile(r"^(DONE|PARKED|BLOCKED)(?::\s*(.*))?$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")


class NotPosted(WatchkeeperError):
    """GitHub did not take a call; the message says which and why."""


# InvalidURL is not an HTTPError: a base URL no client can send to fails the post, not
# the reaping of every run after it.
_UNPOSTED = (NotPosted, ConfigError, httpx.InvalidURL)


@dataclass(frozen=True, slots=True)
class Target:
    """The pull request or issue a run came from."""

    repository: str
    number: int

    @property
    def path(self) -> str:
        """The issue's path under the API root (a pull request is an issue there too)."""
        return f"/repos/{self.repository}/issues/{self.number}"


def parse(value: str) -> dict[str, str]:
    """``OWNER/REPO#N`` -> a run's origin; :class:`ValueError` saying what is wrong."""
    repository, _, number = value.partition("#")
    if not _REPOSITORY.match(repository) or not number.isdigit() or int(number) < 1:
        raise ValueError(f"github:{value}: write github:OWNER/REPO#N (a pull request or issue)")
    return {"platform": "github", "chat_id": repository, "thread_id": str(int(number))}


def canonical(value: str) -> str:
    """A job's origin as given (``github:OWNER/REPO#N``), as kept; :class:`ValueError` saying
    what is wrong."""
    platform, colon, rest = value.partition(":")
    if platform != "github" or not colon:
        raise ValueError(
            f"{value!r}: a job's origin is the pull request or issue it came from: "
            "write github:OWNER/REPO#N"
        )
    origin = parse(rest)
    return f"github:{origin['chat_id']}#{origin['thread_id']}"


def origin_of(value: str | None) -> dict[str, str] | None:
    """A job's kept origin (``github:OWNER/REPO#N``) as a run's origin, if it names one."""
    if not value or not value.startswith("github:"):
        return None
    try:
        return parse(value.removeprefix("github:"))
    except ValueError:
        return None


def target_of(origin: dict[str, str] | None) -> Target | None:
    """The GitHub issue an origin names, if it names one."""
    if not origin or origin.get("platform") != "github":
        return None
    repository, number = origin.get("chat_id", ""), origin.get("thread_id", "")
    if not _REPOSITORY.match(repository) or not number.isdigit():
        return None
    return Target(repository, int(number))


def outcome(status: str, log_tail: str) -> tuple[str, str | None]:
    """The outcome label's last word and the reason the run declared, if any."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    declared = _DECLARED.match(lines[-1]) if lines else None
    if declared and declared.group(1) in {"PARKED", "BLOCKED"}:
        return declared.group(1).lower(), declared.group(2) or None
    return ("ready" if status == "succeeded" else "failed"), None


def comment(result: dict[str, Any], public_url: str | None) -> str:
    """The comment's Markdown: how the run ended, its output's tail, a link to its record."""
    word, reason = outcome(str(result["status"]), str(result["log_tail"] or ""))
    duration = result["duration_s"]
    exit_code = result["exit_code"]
    if exit_code is not None:
        ended = f"exit code {exit_code}"
    elif result.get("signal") is not None:
        ended = f"signal {result['signal']}"
    else:
        ended = "no exit code"
    lines = [
        f"**watchkeeper** · `{result['name']}` ({result['id']}) **{result['status']}**, "
        f"{ended}, {duration_words(duration)}.",
        f"Label: `{PREFIX}{word}`" + (f": {reason}" if reason else ""),
    ]
    if word == "ready" and declared_done(str(result["log_tail"] or "")):
        lines.append("Done, as the run declared.")
    if result.get("reason"):
        lines.append(f"Reason: {result['reason']}")
    lines += output_block(str(result["log_tail"] or ""))
    if public_url:
        lines += ["", f"Record: {public_url.rstrip('/')}/web/procs/{result['id']}"]
    return "\n".join(lines)


def output_block(tail: str) -> list[str]:
    """The comment's folded block of the output's last lines (none for no output)."""
    if not tail.strip():
        return []
    fenced = tail.replace("```", "`\u200b``")  # a fence in the output must not close ours
    return [
        "",
        "<details><summary>Last lines of output</summary>",
        "",
        "```",
        fenced,
        "```",
        "",
        "</details>",
    ]


def declared_done(log_tail: str) -> bool:
    """Whether the output's last line is ``DONE``."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    return bool(lines) and lines[-1] == "DONE"


def duration_words(seconds: float | None) -> str:
    """``after 1 min 30 s``: how long the work took, as the comment says it."""
    if seconds is None:
        return "before it started"
    if seconds < 60:
        return f"after {seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"after {hours} h {minutes} min" if hours else f"after {minutes} min {rest} s"


class GitHubResults:
    """Posts to one GitHub API with one token: the forge's settings, resolved when used."""

    def __init__(self, forge: ForgeConfig | None) -> None:
        self.forge = forge

    def _client(self) -> httpx.Client:
        from watchkeeper.config import resolve_secret

        if self.forge is None:
            raise NotPosted("this watchkeeper has no [forge] github_token_env to post with")
        token = resolve_secret(
            self.forge.github_token, self.forge.github_token_env, "forge.github_token"
        )
        if not token:
            raise NotPosted("set [forge] github_token_env to a token that may write issues")
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        base = self.forge.github_api_url.rstrip("/")
        return httpx.Client(base_url=base, headers=headers, timeout=TIMEOUT_S)

    def announce(self, origin: dict[str, str] | None) -> str | None:
        """Label the issue ``watchkeeper:waiting``; what went wrong, or ``None``."""
        target = target_of(origin)
        if target is None:
            return None
        try:
            with self._client() as client:
                _call(client, "POST", f"{target.path}/labels", {"labels": [WAITING]})
        except _UNPOSTED as exc:  # best effort: the run starts regardless
            return f"labelling {target.repository}#{target.number} {WAITING}: {_why(exc)}"
        return None

    def start_labelled(
        self, data_dir: Path, request: LaunchRequest, start: Callable[[], Launched]
    ) -> Launched:
        """``start()`` the run of ``request`` with its issue labelled waiting first.

        First, so the label never lands after the run's end replaced it. Refused input
        is refused before GitHub is told anything; a start that fails with no run
        recorded takes the label back, since no run will end to replace it.
        """
        launch.check(request)
        unlabelled = self.announce(request.origin)
        try:
            launched = start()
        except BaseException as exc:
            if not (isinstance(exc, LaunchFailed) and exc.run_id) and unlabelled is None:
                self._withdraw(request.origin)
            raise
        if unlabelled:
            run_id = launched.run.run_id
            log.warning("Process run %s: %s", run_id, unlabelled, extra={"action": "proc_hook"})
            note(data_dir, run_id, unlabelled)
        return launched

    def _withdraw(self, origin: dict[str, str] | None) -> None:
        target = target_of(origin)
        if target is None:
            return
        try:
            with self._client() as client:
                path = f"{target.path}/labels/{quote(WAITING)}"
                _call(client, "DELETE", path, missing_ok=True)
        except _UNPOSTED as exc:
            log.warning("Could not take back %s: %s", WAITING, _why(exc))

    def post_result(self, run: ProcRun, result: dict[str, Any]) -> list[str]:
        """One comment, then the outcome label in place of the others; the errors."""
        target = target_of(run.origin)
        if target is None:
            return []
        word, _ = outcome(run.status.value, str(result["log_tail"] or ""))
        return self.post_end(run.origin, word, comment(result, self.public_url))

    @property
    def public_url(self) -> str | None:
        """Where readers reach this watchkeeper, for links to records."""
        return self.forge.public_url if self.forge else None

    def post_end(self, origin: dict[str, str] | None, word: str, body: str) -> list[str]:
        """Comment ``body``, then label ``watchkeeper:<word>`` in place of the others; the
        errors (none posted when the first call fails; nothing is retried)."""
        target = target_of(origin)
        if target is None:
            return []
        where = f"{target.repository}#{target.number}"
        try:
            with self._client() as client:
                _call(client, "POST", f"{target.path}/comments", {"body": body})
                _call(client, "POST", f"{target.path}/labels", {"labels": [PREFIX + word]})
                for other in (WAITING, *(PREFIX + o for o in OUTCOMES if o != word)):
                    _call(client, "DELETE", f"{target.path}/labels/{quote(other)}", missing_ok=True)
        except _UNPOSTED as exc:  # recorded on the run's hook journal
            return [f"GitHub result on {where}: {_why(exc)}"]
        return []


def _call(
    client: httpx.Client,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    missing_ok: bool = False,
) -> None:
    try:
        response = client.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise NotPosted(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
    if response.is_success or (missing_ok and response.status_code == 404):
        return
    raise NotPosted(f"{method} {path} answered HTTP {response.status_code}: {_message(response)}")


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))[:200]
    except (ValueError, AttributeError):
        return response.text[:200]


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, NotPosted) else f"{type(exc).__name__}: {exc}"


def note(data_dir: Path, run_id: str, message: str) -> None:
    """Keep ``message`` in the run's hook log, where its hooks' output goes."""
    try:
        with (layout.run_dir(data_dir, run_id) / layout.HOOKS_LOG_NAME).open("a") as hook_log:
            hook_log.write(message + "\n")
    except OSError:
        log.warning("Could not note on run %s: %s", run_id, message)
