"""The lease rule and the blocked reasons: one function decides, the explanation asks it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from watchkeeper.queue.rules import (
    OrgPolicy,
    Policy,
    Reason,
    ago,
    explain,
    leasable_by,
    lease_block,
)
from watchkeeper.records.queue import OrgLoad, Provision, QueuedTask, Runner, Snapshot

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
FLEETS = ("cpu", "gpu", "arm")
ORGS = ("acme", "beta", "gamma")


def make_runner(
    fleet: str = "cpu",
    *,
    capacity: int = 2,
    running: int = 0,
    age_s: float = 1.0,
    org: str | None = None,
    stopped: bool = False,
) -> Runner:
    beat = NOW - timedelta(seconds=age_s)
    return Runner(
        f"r-{fleet}",
        fleet,
        capacity,
        "host",
        1,
        org,
        None,
        beat,
        beat,
        beat if stopped else None,
        running,
    )


TASK = QueuedTask("t-1", "j-1", "acme", "cpu", job_running=False)
POLICY = Policy(30.0, 300.0, {"acme": OrgPolicy(2, 100.0)})


def test_the_rule_checks_in_its_fixed_order() -> None:
    busy_load = OrgLoad("acme", running_jobs=2, used_minutes=500)
    assert lease_block(TASK, make_runner("gpu", age_s=999), busy_load, POLICY, NOW) is (
        Reason.NO_RUNNER
    )
    assert lease_block(TASK, make_runner(age_s=31, running=2), busy_load, POLICY, NOW) is (
        Reason.RUNNER_OFFLINE
    )
    assert lease_block(TASK, make_runner(running=2), busy_load, POLICY, NOW) is Reason.RUNNERS_BUSY
    assert lease_block(TASK, make_runner(), busy_load, POLICY, NOW) is Reason.CONCURRENCY_CAP
    continuation = QueuedTask("t-2", "j-1", "acme", "cpu", job_running=True)
    assert lease_block(continuation, make_runner(), busy_load, POLICY, NOW) is Reason.COMPUTE_CAP
    assert lease_block(TASK, make_runner(), OrgLoad("acme"), POLICY, NOW) is None


def test_a_stopped_runner_is_offline_and_polling_is_not_a_heartbeat() -> None:
    assert lease_block(TASK, make_runner(stopped=True), OrgLoad("acme"), POLICY, NOW) is (
        Reason.RUNNER_OFFLINE
    )


def test_provisioning_explains_a_missing_runner_only() -> None:
    provision = Provision("acme", "cpu", "provisioning", None, NOW - timedelta(seconds=5), NOW)
    snapshot = Snapshot(NOW, (), provisions={("acme", "cpu"): provision})
    assert explain(TASK, snapshot, POLICY).code is Reason.PROVISIONING
    live = Snapshot(NOW, (make_runner(),), provisions={("acme", "cpu"): provision})
    assert explain(TASK, live, POLICY).code is Reason.AWAITING_RUNNER
    late = Snapshot(NOW + timedelta(seconds=301), (), provisions={("acme", "cpu"): provision})
    assert explain(TASK, late, POLICY).code is Reason.PROVISION_FAILED


def test_ago_is_short() -> None:
    assert [ago(timedelta(seconds=s)) for s in (5, 420, 7300, 200_000)] == [
        "5 s",
        "7 min",
        "2 h",
        "2 d",
    ]


runners = st.builds(
    make_runner,
    st.sampled_from(FLEETS),
    capacity=st.integers(1, 3),
    running=st.integers(0, 3),
    age_s=st.floats(0, 120),
    org=st.one_of(st.none(), st.sampled_from(ORGS)),
    stopped=st.booleans(),
)
tasks = st.builds(
    QueuedTask,
    st.just("t"),
    st.just("j"),
    st.sampled_from(ORGS),
    st.sampled_from(FLEETS),
    st.booleans(),
)
caps = st.builds(
    OrgPolicy,
    st.one_of(st.none(), st.integers(1, 3)),
    st.one_of(st.none(), st.floats(1, 100)),
)
loads = st.builds(OrgLoad, st.sampled_from(ORGS), st.integers(0, 4), st.floats(0, 150))
provisions = st.builds(
    Provision,
    st.sampled_from(ORGS),
    st.sampled_from(FLEETS),
    st.sampled_from(["provisioning", "failed"]),
    st.one_of(st.none(), st.text(max_size=10)),
    st.just(NOW - timedelta(seconds=100)),
    st.just(NOW - timedelta(seconds=50)),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(runners, max_size=6),
    st.dictionaries(st.sampled_from(ORGS), caps),
    st.lists(loads, max_size=3),
    st.lists(provisions, max_size=3),
    st.lists(tasks, min_size=1, max_size=5),
)
def test_the_explanation_and_the_lease_decision_never_disagree(
    runner_list: list[Runner],
    org_caps: dict[str, OrgPolicy],
    load_list: list[OrgLoad],
    provision_list: list[Provision],
    task_list: list[QueuedTask],
) -> None:
    policy = Policy(30.0, 300.0, org_caps)
    snapshot = Snapshot(
        NOW,
        tuple(runner_list),
        {load.org: load for load in load_list},
        {(p.org, p.fleet): p for p in provision_list},
    )
    for task in task_list:
        code = explain(task, snapshot, policy).code
        leasable = [r for r in runner_list if leasable_by(task, r, snapshot, policy)]
        if code is Reason.AWAITING_RUNNER:
            assert leasable, "awaiting_runner, yet no live runner may lease it"
        else:
            assert not leasable, f"{code} but leasable by {leasable[0]}"
            assert code is not Reason.UNKNOWN
