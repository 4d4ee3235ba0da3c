/** Reports, runs, incidents, runbooks, silences and errors, against a real server. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Busy, Client, WatchkeeperError } from "../src/index.js";
import { type Api, freePort, until } from "./server.js";

/** The suites of this part, on the server `api` holds once its `before` ran. */
export function runs(api: Api): void {
  describe("reports", () => {
    it("start, progress, heartbeat, waiting and finish move a run", async () => {
      const started = await api.reporter.start("crawl", "crawl example.org", {
        runId: "node-1",
        expectedS: 60,
        leaseS: 120,
        effects: "none",
      });
      assert.equal(started.run_id, "node-1");
      assert.equal(started.status, "running");
      assert.equal(started.lease_s, 120);
      assert.equal((await api.reporter.progress("crawl", "node-1", "page 1")).step, "page 1");
      assert.equal((await api.reporter.heartbeat("crawl", "node-1")).run_id, "node-1");
      assert.equal((await api.reporter.waiting("crawl", "node-1", "a person must log in")).status, "waiting");
      await api.reporter.progress("crawl", "node-1");
      const finished = await api.reporter.finish("crawl", "node-1", "done");
      assert.equal(finished.status, "succeeded");
      const read = await api.admin.getRun("crawl", "node-1");
      assert.equal(read.status, "succeeded");
      assert.equal(read.verdict, null);
      const overview = await api.admin.runs({ all: true });
      assert.ok(overview.finished.some((run) => run.run_id === "node-1"));
      const now = await api.admin.runs();
      assert.deepEqual(now.finished, []);
    });

    it("fail records the reason and fingerprint, and opens an incident", async () => {
      const started = await api.reporter.start("crawl", "crawl broken.org");
      const failed = await api.reporter.fail("crawl", started.run_id, "boom", { fingerprint: "fp-1", detail: "trace" });
      assert.equal(failed.status, "failed");
      assert.deepEqual(failed.failure, { reason: "boom", fingerprint: "fp-1" });
      // The judge opens the incident just after the report is answered.
      const incident = await until("the failure's incident", async () =>
        (await api.admin.incidents.list({ status: "open" })).find((found) => found.run_id === started.run_id),
      );
      const detail = await api.admin.incidents.get(incident.id);
      assert.equal(detail.condition, "failed");
      const acked = await api.admin.incidents.ack(incident.id);
      assert.equal((acked.acknowledged as { via: string }).via, "api");
      const diagnosed = await api.admin.incidents.diagnose(incident.id);
      assert.equal(diagnosed.action, "diagnose");
      assert.equal(typeof diagnosed.diagnosis, "string");
      const decided = await api.admin.incidents.decide(incident.id, "dismiss", { via: "cli" });
      assert.equal(decided.action, "dismiss");
      const stale = await api.admin.incidents
        .decide(incident.id, "dismiss", { stateToken: detail.state_token })
        .catch((error: unknown) => error);
      assert.ok(stale instanceof WatchkeeperError && stale.status === 409, String(stale));
    });

    it("run() finishes the run when the work returns, and passes its result on", async () => {
      const result = await api.reporter.run(
        "crawl",
        "helped",
        async (run) => {
          await run.progress("one");
          await run.heartbeat();
          await run.waiting("a look");
          await run.progress("two");
          return run.runId;
        },
        { runId: "node-helped" },
      );
      assert.equal(result, "node-helped");
      const read = await api.admin.getRun("crawl", "node-helped");
      assert.equal(read.status, "succeeded");
      assert.equal(read.step, "two");
    });

    it("the same report five times is looping; a higher count moves it on", async () => {
      await api.reporter.start("crawl", "crawl loops.org", { runId: "node-loop", budgetS: 600 });
      for (let i = 0; i < 5; i += 1) {
        await api.reporter.progress("crawl", "node-loop", "calling web.search", { done: 3, total: 40 });
      }
      const looping = await api.admin.getRun("crawl", "node-loop");
      assert.equal(looping.repeats, 5);
      assert.equal(looping.verdict?.condition, "looping");
      assert.match(looping.verdict?.reason ?? "", /^repeating 'calling web\.search' at 3 of 40 5 times/);
      const moved = await api.reporter.progress("crawl", "node-loop", "calling web.search", { done: 4 });
      assert.equal(moved.repeats, 1);
      assert.equal((await api.admin.getRun("crawl", "node-loop")).verdict, null);
    });

    it("a step's budget and expected time hold until the next report", async () => {
      await api.reporter.run(
        "crawl",
        "stepped",
        async (run) => {
          await run.progress("running the test suite", { budgetS: 1800, expectedS: 600 });
          const read = await api.admin.getRun("crawl", "node-stepped");
          assert.equal(read.step_budget_s, 1800);
          assert.equal(read.step_expected_s, 600);
          await run.progress("writing the summary");
          assert.equal((await api.admin.getRun("crawl", "node-stepped")).step_budget_s, null);
        },
        { runId: "node-stepped" },
      );
    });

    it("run() fails the run with what the work threw, and throws it again", async () => {
      const thrown = new RangeError("page 7 is out of range");
      await assert.rejects(
        api.reporter.run(
          "crawl",
          "doomed",
          () => {
            throw thrown;
          },
          { runId: "node-doomed" },
        ),
        (error: unknown) => error === thrown,
      );
      const read = await api.admin.getRun("crawl", "node-doomed");
      assert.equal(read.status, "failed");
      assert.equal(read.failure?.reason, "RangeError: page 7 is out of range");
    });
  });

  describe("reading", () => {
    it("replicas name the leader", async () => {
      const replicas = await api.admin.replicas();
      assert.equal(replicas.replicas.length, 1);
      assert.equal(replicas.leader, (replicas.replicas[0] as { name: string }).name);
    });

    it("runbooks list and switch", async () => {
      const runbooks = await api.admin.runbooks.list();
      const first = runbooks[0];
      assert.ok(first);
      const switched = await api.admin.runbooks.switch(first.name, !first.enabled);
      assert.equal(switched.enabled, !first.enabled);
      const again = await api.admin.runbooks.list();
      assert.equal(again.find((runbook) => runbook.name === first.name)?.enabled, !first.enabled);
    });

    it("silences are added, listed, read and expired", async () => {
      const silence = await api.admin.silences.add({
        kind: "crawl",
        title: "nightly *",
        duration: "2h",
        comment: "reindexing",
      });
      assert.equal(silence.state, "active");
      assert.equal(silence.matchers.title, "nightly *");
      assert.ok((await api.admin.silences.list()).some((found) => found.id === silence.id));
      assert.equal((await api.admin.silences.get(silence.id)).comment, "reindexing");
      assert.equal((await api.admin.silences.expire(silence.id)).state, "expired");
      assert.ok(!(await api.admin.silences.list()).some((found) => found.id === silence.id));
      assert.ok((await api.admin.silences.list({ all: true })).some((found) => found.id === silence.id));
    });
  });

  describe("errors", () => {
    it("an unknown run is a 404 with the server's code and message", async () => {
      await assert.rejects(api.admin.getRun("crawl", "nope"), (error: unknown) => {
        assert.ok(error instanceof WatchkeeperError);
        assert.ok(!(error instanceof Busy));
        assert.equal(error.status, 404);
        assert.equal(error.code, "not_found");
        assert.equal(error.message, "no crawl run 'nope'");
        return true;
      });
    });

    it("a bad token is a 401", async () => {
      const stranger = new Client(api.server.url, "wk_not-a-token");
      await assert.rejects(stranger.runs(), { name: "WatchkeeperError", status: 401, code: "unauthorized" });
    });

    it("a reporter may not do an admin's work (403)", async () => {
      await assert.rejects(api.reporter.jobs.submit("x", { org: "acme", fleet: "cpu", argv: ["true"] }), {
        status: 403,
      });
    });

    it("an invalid body names the field", async () => {
      await assert.rejects(
        api.reporter.start("crawl", ""),
        (error: unknown) => error instanceof WatchkeeperError && error.status === 422 && error.field === "title",
      );
    });

    it("a press names no channel but the API or the command line", async () => {
      const press = api.admin.incidents.decide(1, "dismiss", { stateToken: "a1v1", via: "slack" as "api" });
      await assert.rejects(
        press,
        (error: unknown) => error instanceof TypeError && /via must be 'api' or 'cli'/.test(error.message),
      );
    });

    it("no server is a clear unreachable error", async () => {
      const port = await freePort();
      const nobody = new Client(`http://127.0.0.1:${port}`, "wk_x", { timeoutS: 5 });
      await assert.rejects(nobody.runs(), (error: unknown) => {
        assert.ok(error instanceof WatchkeeperError);
        assert.equal(error.status, 0);
        assert.equal(error.code, "unreachable");
        assert.match(
          error.message,
          new RegExp(`^cannot reach watchkeeper at http://127\\.0\\.0\\.1:${port}: .*ECONNREFUSED`),
        );
        return true;
      });
    });

    it("the token comes from WATCHKEEPER_TOKEN when none is given", async () => {
      const saved = process.env.WATCHKEEPER_TOKEN;
      try {
        process.env.WATCHKEEPER_TOKEN = api.server.admin;
        assert.ok(Array.isArray((await new Client(api.server.url).runs()).running));
      } finally {
        if (saved === undefined) {
          delete process.env.WATCHKEEPER_TOKEN;
        } else {
          process.env.WATCHKEEPER_TOKEN = saved;
        }
      }
    });
  });
}
