/** Jobs, runners, the timeline, spend and records, against a real server. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { MAX_BATCH, WatchkeeperError } from "../src/index.js";
import type { Api } from "./server.js";

/** The suites of this part, on the server `api` holds once its `before` ran. */
export function queue(api: Api): void {
  describe("jobs and runners", () => {
    it("a job from a GitHub pull request or issue carries its origin; a malformed one is refused", async () => {
      const job = await api.admin.jobs.submit("fix the flake", {
        org: "acme",
        fleet: "cpu",
        argv: ["true"],
        origin: "github:acme/app#42",
      });
      assert.equal(job.origin, "github:acme/app#42");
      assert.equal((await api.viewer.jobs.get(job.id)).origin, "github:acme/app#42");
      await assert.rejects(
        api.admin.jobs.submit("x", { org: "acme", fleet: "cpu", argv: ["true"], origin: "acme/app#42" }),
        (error: unknown) =>
          error instanceof WatchkeeperError &&
          error.status === 422 &&
          error.field === "origin" &&
          error.message.includes("github:OWNER/REPO#N"),
      );
      await api.admin.jobs.delete(job.id);
    });

    it("a job is submitted, leased, shipped, completed, recorded and resumed", async () => {
      const job = await api.admin.jobs.submit("nightly build", {
        org: "acme",
        fleet: "cpu",
        argv: ["make", "all"],
        payload: { env: "ci" },
        maxAttempts: 2,
        leaseS: 60,
      });
      assert.equal(job.status, "queued");
      assert.deepEqual(job.payload, { env: "ci", argv: ["make", "all"] });
      const queued = job.tasks[0];
      assert.ok(queued);
      assert.equal((queued.blocked as { code: string }).code, "no_runner");
      assert.ok((await api.viewer.jobs.list({ org: "acme", status: "queued" })).some((found) => found.id === job.id));
      assert.deepEqual(await api.viewer.jobs.list({ org: "nobody" }), []);

      const runner = await api.reporter.runners.register("cpu", {
        capacity: 2,
        host: "build-1",
        pid: 4242,
        org: "acme",
        name: "node",
      });
      assert.equal(runner.fleet, "cpu");
      assert.ok((await api.viewer.runners.list()).some((found) => found.id === runner.id));
      assert.equal((await api.reporter.runners.heartbeat(runner.id)).id, runner.id);
      const [task] = await api.reporter.runners.lease(runner.id, 1);
      assert.ok(task?.lease_token);
      assert.equal(task.id, queued.id);
      assert.equal(
        (await api.reporter.runners.renew(task.id, task.lease_token, { progressed: true, step: "compiling" })).id,
        task.id,
      );
      const topology = await api.viewer.runners.topology();
      assert.ok(JSON.stringify(topology).includes(task.id));

      const shipped = await api.reporter.runners.shipOutput(task.id, task.lease_token, {
        offset: 0,
        end: 6,
        output: "built\n",
        final: true,
      });
      assert.equal(shipped.next_offset, 6);
      const whole = await api.viewer.jobs.output(task.id, { all: true });
      assert.match(String(whole.output), /built/);
      await api.reporter.runners.output(task.id, task.lease_token, "built\nall done\n");

      const completed = await api.reporter.runners.complete(task.id, task.lease_token, 0);
      assert.equal(completed.status, "succeeded");
      assert.match(String((await api.viewer.jobs.output(task.id)).output), /all done/);
      assert.equal((await api.viewer.jobs.task(task.id)).status, "succeeded");
      assert.equal((await api.viewer.jobs.get(job.id)).status, "succeeded");

      const record = await api.viewer.timeline.record(job.id);
      assert.ok(JSON.stringify(record).includes(job.id));

      const continued = await api.admin.jobs.resume(job.id, { argv: ["make", "check"] });
      assert.equal(continued.job_id, job.id);
      assert.deepEqual(continued.payload, { argv: ["make", "check"] });
      const [next] = await api.reporter.runners.lease(runner.id, 1);
      assert.equal(next?.id, continued.id);
      await api.reporter.runners.complete(next.id, String(next.lease_token));
      // A task's id resumes its job with that task's payload.
      const again = await api.admin.jobs.resume(task.id);
      assert.equal(again.job_id, job.id);
      assert.deepEqual(again.payload, task.payload);

      const stopped = await api.reporter.runners.stop(runner.id);
      assert.equal(stopped.id, runner.id);
    });

    it("failures, batch outcomes, a lost lease, retry, cancel and delete", async () => {
      const runner = await api.reporter.runners.register("gpu", { capacity: 3, host: "build-2", pid: 7 });
      const jobs = await Promise.all(
        ["a", "b", "c"].map((title) =>
          api.admin.jobs.submit(title, { org: "acme", fleet: "gpu", argv: ["true"], rerunnable: false }),
        ),
      );
      const leased = await api.reporter.runners.lease(runner.id, 3);
      assert.equal(leased.length, 3);
      const [first, second, third] = leased;
      assert.ok(first?.lease_token && second?.lease_token && third?.lease_token);

      const failed = await api.reporter.runners.fail(first.id, first.lease_token, "exit 2", {
        fingerprint: "fp",
        exitCode: 2,
      });
      assert.equal(failed.status, "failed");
      await assert.rejects(
        api.reporter.runners.renew(first.id, first.lease_token),
        (error: unknown) => error instanceof WatchkeeperError && error.code === "lease_lost",
      );

      const outcomes = await api.reporter.runners.report([
        { task_id: second.id, lease_token: second.lease_token, exit_code: 0 },
        { task_id: third.id, lease_token: "not-the-lease", exit_code: 1, reason: "exit 1" },
      ]);
      assert.equal(outcomes[0]?.status, "succeeded");
      assert.equal(outcomes[1]?.id, third.id);
      assert.equal(outcomes[1]?.code, "lease_lost");

      // The outcomes of a pass and the next lease, in one request.
      const more = await api.admin.jobs.submit("d", { org: "acme", fleet: "gpu", argv: ["true"] });
      const [fourth] = await api.reporter.runners.lease(runner.id, 1);
      assert.equal(fourth?.job_id, more.id);
      const pass = await api.reporter.runners.reportAndLease(
        runner.id,
        [{ task_id: fourth.id, lease_token: String(fourth.lease_token), exit_code: 0 }],
        2,
      );
      assert.equal(pass.outcomes[0]?.status, "succeeded");
      assert.deepEqual(pass.tasks, []);
      await assert.rejects(api.reporter.runners.reportAndLease("r-0123456789ab", [], 1), { status: 404 });

      const failedJob = first.job_id;
      const retried = await api.admin.jobs.retry(failedJob);
      assert.equal(retried.affected, 1);
      const cancelled = await api.admin.jobs.cancel(failedJob);
      assert.equal(cancelled.affected, 1);
      assert.equal((await api.viewer.jobs.get(failedJob)).status, "cancelled");
      const deleted = await api.admin.jobs.delete(failedJob);
      assert.equal(deleted.affected, 1);
      await assert.rejects(api.viewer.jobs.get(failedJob), { status: 404 });
      assert.equal(jobs.length, 3);
    });
  });

  describe("timeline", () => {
    it("events are emitted, read back, priced and summed", async () => {
      const at = new Date(Date.now() - 60_000);
      const emitted = await api.admin.timeline.emitBatch([
        {
          phase: "implementer",
          job_id: "j-node",
          task_id: "t-node",
          round: 1,
          role: "implementer",
          model: "claude-haiku-4-5",
          provider: "anthropic",
          input_tokens: 12_000,
          cache_read_tokens: 9_000,
          output_tokens: 800,
          duration_s: 41.5,
          outcome: "ok",
          at,
        },
        {
          phase: "verify",
          job_id: "j-node",
          task_id: "t-node",
          round: 1,
          outcome: "failed",
          fingerprint: "abc",
          detail: null,
        },
      ]);
      assert.equal(emitted.accepted, 2);
      assert.equal(emitted.unpriced, 0);
      assert.ok(emitted.cost > 0);
      assert.equal((await api.admin.timeline.emit({ phase: "verify", job_id: "j-node", outcome: "ok" })).accepted, 1);
      assert.deepEqual(await api.admin.timeline.emitBatch([]), { accepted: 0, cost: 0, unpriced: 0 });

      const events = await api.viewer.timeline.events({ jobId: "j-node" });
      assert.deepEqual(
        events.map((event) => event.phase),
        ["implementer", "verify", "verify"],
      );
      assert.equal(Date.parse(events[0]?.at ?? ""), at.getTime());
      assert.equal((await api.viewer.timeline.events({ taskId: "t-node" })).length, 2);
      assert.equal(typeof (await api.viewer.timeline.lastProgressAt("t-node")), "string");
      assert.equal(await api.viewer.timeline.lastProgressAt("t-none"), null);

      const spend = await api.viewer.timeline.spend("model", {
        jobId: "j-node",
        since: new Date(Date.now() - 3_600_000),
      });
      assert.equal(spend.by, "model");
      assert.equal(spend.groups[0]?.key, "claude-haiku-4-5");
      assert.equal(spend.totals.calls, 1);
      const none = await api.viewer.timeline.spend("role", { until: new Date(Date.now() - 3_600_000) });
      assert.equal(none.totals.calls, 0);
      // A date is that whole UTC day, both ends included.
      const day = at.toISOString().slice(0, 10);
      const dayAfter = new Date(at.getTime() + 86_400_000).toISOString().slice(0, 10);
      const thatDay = await api.viewer.timeline.spend("day", { jobId: "j-node", since: day, until: day });
      assert.equal(thatDay.totals.calls, 1);
      assert.equal(thatDay.groups[0]?.key, day);
      const later = await api.viewer.timeline.spend("day", { jobId: "j-node", since: dayAfter });
      assert.equal(later.totals.calls, 0);
      await assert.rejects(api.viewer.timeline.spend("day", { since: "someday" }), /since 'someday' is not a date or a time/);
    });

    it("a bad event is refused with its index and field; too many are refused before sending", async () => {
      await assert.rejects(
        api.admin.timeline.emitBatch([{ phase: "ok" }, { phase: "bad", input_tokens: -1 }]),
        (error: unknown) =>
          error instanceof WatchkeeperError &&
          error.status === 422 &&
          /1/.test(error.message) &&
          /input_tokens/.test(error.message),
      );
      const many = Array.from({ length: MAX_BATCH + 1 }, () => ({ phase: "x" }));
      await assert.rejects(api.admin.timeline.emitBatch(many), { status: 0, code: "too_many" });
    });
  });
}
