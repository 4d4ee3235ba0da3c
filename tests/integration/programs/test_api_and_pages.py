"""The programs over real HTTP: the API (viewers read, admins act), the supervision picture the
canvas draws, and the dashboard's programs pages with their buttons."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper import config
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from ..test_web_silences import act, logged_in
from .conftest import script

TALKER = """
n = 0
while True:
    print(f"{sys.argv[1]} says {n}", flush=True)
    n += 1
    time.sleep(0.2)
"""


@pytest.fixture
def served(tmp_path: Path, sqlite_store: Store) -> Iterator[LiveServer]:
    command = script(tmp_path, "talker", TALKER)
    settings = config.parse(
        {
            "data_dir": str(tmp_path / "data"),
            "database_url": sqlite_store.url,
            "programs": {
                "web": {"command": [*command, "web"], "start_s": 0, "group": "site"},
                "worker": {
                    "command": [*command, "worker"],
                    "start_s": 0,
                    "group": "site",
                    "description": "does the work",
                },
            },
            "groups": {"site": {"strategy": "one_for_all"}},
        },
        "test settings",
    )
    runtime = Runtime.open(settings, store=sqlite_store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as server:
        yield server
    runtime.sweeper.close()


def running(server: LiveServer) -> bool:
    with server.client("viewer") as api:
        listed = api.get("/api/v1/programs").json()["programs"]
    return all(p["state"] == "running" for p in listed)


def test_the_api_lists_programs_acts_on_them_as_admin_and_reads_their_log(
    served: LiveServer,
) -> None:
    wait_for(lambda: running(served), what="both programs running")
    with served.client("viewer") as viewer, served.client("admin") as admin:
        listed = viewer.get("/api/v1/programs").json()
        refused = viewer.post("/api/v1/programs/web/restart")
        restarted = admin.post("/api/v1/programs/web/restart").json()
        unknown = admin.post("/api/v1/programs/nosuch/stop")
        wait_for(lambda: "web says 1" in viewer.get("/api/v1/programs/web/log").json()["text"])
        piece = viewer.get("/api/v1/programs/web/log").json()
        after = viewer.get("/api/v1/programs/web/log", params={"offset": piece["next_offset"]})
        one = viewer.get("/api/v1/programs/worker").json()
        group = viewer.get("/api/v1/programs/site")
        picture = viewer.get("/api/v1/supervision").json()
    assert listed["host"] and [p["name"] for p in listed["programs"]] == ["web", "worker"]
    site = listed["groups"][0]
    assert (site["name"], site["strategy"], site["programs"]) == (
        "site",
        "one_for_all",
        ["web", "worker"],
    )
    assert refused.status_code == 403
    assert restarted["ok"] is True and restarted["message"] == "web restarted"
    assert restarted["program"]["restarts"] == 1
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == (
        "no program or group 'nosuch' on " + listed["host"] + "; there are: site, web, worker"
    )
    assert piece["text"].startswith("web says") or "[watchkeeper]" in piece["text"]
    assert after.json()["next_offset"] >= piece["next_offset"]
    assert one["description"] == "does the work" and one["history"][0]["event"] == "started"
    assert group.status_code == 404
    tree = next(t for t in picture["trees"] if t["id"] == "programs")
    (node,) = tree["children"]
    assert (node["id"], node["kind"], node["strategy"]) == (
        "programs/site",
        "supervisor",
        "one_for_all",
    )
    assert [c["id"] for c in node["children"]] == ["programs/site/web", "programs/site/worker"]
    assert node["children"][0]["href"] == "/web/programs/web"


def test_the_dashboard_shows_the_programs_and_a_page_per_program_with_its_buttons(
    served: LiveServer,
) -> None:
    wait_for(lambda: running(served), what="both programs running")
    with logged_in(served) as (web, csrf):
        listing = web.get("/web/programs").text
        stopped = act(web, csrf, "/web/programs/worker/stop")
        page = web.get("/web/programs/worker").text
        fragment = web.get("/web/fragments/programs").text
        missing = web.get("/web/programs/nosuch")
        with logged_in(served, "viewer") as (viewer, viewer_csrf):
            refused = act(viewer, viewer_csrf, "/web/programs/worker/start")
            seen = viewer.get("/web/programs").text
    assert 'href="/web/programs/web"' in listing and 'data-state="running"' in listing
    assert ">Restart</button>" in listing and "one-for-all" in listing
    assert stopped["ok"] is True and str(stopped["message"]).startswith("worker stopped")
    assert 'id="program-state" data-state="stopped"' in page
    assert 'data-follow="/web/programs/worker/log?offset=' in page
    assert re.search(r'data-event="stopped"', page)
    assert 'data-src="/web/fragments/programs" data-on="supervision"' in fragment
    assert missing.status_code == 404
    assert refused["ok"] is False and "only admins act on programs" in str(refused["message"])
    assert ">Restart</button>" not in seen


def test_the_topology_page_draws_the_programs_tree_beside_the_servers(
    served: LiveServer,
) -> None:
    wait_for(lambda: running(served), what="both programs running")
    with logged_in(served, "viewer") as (web, _csrf):
        page = web.get("/web/topology")
    # The programs' root has no intensity of its own: each group gives up by its own.
    assert page.status_code == 200, page.text[-2000:]
    assert 'data-tree="programs"' in page.text and 'data-tree="server"' in page.text
    assert "each group gives up by its own intensity" in page.text
