"""Who approved a pull request, from GitHub's REST API (``GET .../pulls/{n}/reviews``).

A reviewer's approval counts when their last deciding review approved: a later
"changes requested" or a dismissal takes it back, a comment does not. Approvers are
given in the order of their approving review. Pages are followed through ``Link``.
"""

from __future__ import annotations

from typing import Any

import httpx

from watchkeeper.errors import WatchkeeperError

#: Reviews that change where a reviewer stands; comments and pending reviews do not.
_DECIDING = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})
#: More reviews than any pull request has: a bound, not a limit anyone meets.
_MAX_PAGES = 10
TIMEOUT_S = 10.0


class ReviewsUnread(WatchkeeperError):
    """The reviews could not be read; the message says why."""


def approvers(
    api_url: str, token: str, repository: str, number: int, *, timeout: float = TIMEOUT_S
) -> list[str]:
    """The logins whose last deciding review of ``repository``'s pull request approved it."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
    }
    url: str | None = f"{api_url.rstrip('/')}/repos/{repository}/pulls/{number}/reviews"
    params: dict[str, Any] | None = {"per_page": 100}
    reviews: list[Any] = []
    with httpx.Client(headers=headers, timeout=timeout) as client:
        for _ in range(_MAX_PAGES):
            if url is None:
                break
            page, response = _page(client, url, params)
            reviews.extend(page)
            url, params = _next_page(response), None
    return _approved(reviews)


def _page(
    client: httpx.Client, url: str, params: dict[str, Any] | None
) -> tuple[list[Any], httpx.Response]:
    try:
        response = client.get(url, params=params)
    except httpx.HTTPError as exc:
        raise ReviewsUnread(f"cannot reach {url}: {exc}") from exc
    if response.status_code != 200:
        raise ReviewsUnread(f"{url} answered {response.status_code}: {_message(response)}")
    try:
        found = response.json()
    except ValueError as exc:
        raise ReviewsUnread(f"{url} answered something other than JSON") from exc
    if not isinstance(found, list):
        raise ReviewsUnread(f"{url} answered something other than a list of reviews")
    return found, response


def _next_page(response: httpx.Response) -> str | None:
    following = response.links.get("next", {}).get("url")
    return str(following) if following else None


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))[:200]
    except (ValueError, AttributeError):
        return response.text[:200]


def _approved(reviews: list[Any]) -> list[str]:
    standing: dict[str, str] = {}
    approved_at: dict[str, int] = {}
    for position, review in enumerate(reviews):
        if not isinstance(review, dict) or review.get("state") not in _DECIDING:
            continue
        login = (review.get("user") or {}).get("login")
        if not isinstance(login, str):
            continue
        standing[login] = review["state"]
        if review["state"] == "APPROVED":
            approved_at[login] = position
    approving = [login for login, state in standing.items() if state == "APPROVED"]
    return sorted(approving, key=approved_at.__getitem__)
