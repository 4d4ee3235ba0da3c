/** Process runs, parks and the server's 429 on held requests, against a real server. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Busy, ENDED, WatchkeeperError } from "../src/index.js";
import { type Api, until } from "./server.js";

/** The suites of this part, on the server `api` holds once its `before` ran. */
export function procs(api: Api): void {
  describe("procs", () => {
    it("a command starts, is waited on, read, listed and its log followed", async () => {
      const started = await api.admin.procs.start(["sh", "-c", "echo hello; echo second"], {
        name: "greet",
        timeoutS: 60,
        budgetS: 60,
      });
      assert.equal(started.name, "greet");
      assert.deepEqual(started.argv, ["sh", "-c", "echo hello; echo second"]);
      const done = await api.admin.procs.wait(started.id, { timeoutS: 30 });
      assert.equal(done.status, "succeeded");
      assert.equal(done.exit_code, 0);
      assert.ok(ENDED.has(done.status));
      assert.equal((await api.admin.procs.get(started.id)).status, "succeeded");
      assert.equal(await api.admin.procs.log(started.id), "hello\nsecond\n");
      assert.equal(await api.admin.procs.log(started.id, 7), "second\n");
      const piece = await api.admin.procs.logFrom(started.id, 6, { wholeLines: false });
      assert.equal(piece.text, "second\n");
      assert.equal(piece.next_offset, piece.size);
      assert.ok(piece.ended);
      assert.ok(!(await api.admin.procs.list()).some((run) => run.id === started.id));
      assert.ok((await api.admin.procs.list({ all: true })).some((run) => run.id === started.id));
    });

    it("a long command reports progress and is aborted", async () => {
      const started = await api.admin.procs.start(["sleep", "600"]);
      await until("the process running", async () => (await api.admin.procs.get(started.id)).status === "running");
      assert.equal((await api.reporter.procs.progress(started.id, "half way")).step, "half way");
      const aborted = await api.admin.procs.abort(started.id, { graceS: 0, timeoutS: 30 });
      assert.equal(aborted.outcome, "signaled");
      const ended = await api.admin.procs.wait(started.id, { timeoutS: 30 });
      assert.ok(ENDED.has(ended.status), ended.status);
      const reclaimed = await api.admin.procs.reclaim();
      assert.deepEqual(Object.keys(reclaimed).sort(), ["collected", "reclaimed", "timed_out"]);
    });

    it("a session parks on a run and notes its progress", async () => {
      const started = await api.admin.procs.start(["sleep", "600"]);
      const park = await api.admin.procs.park("node-session", started.id, "waiting for the build", {
        progress: "built half",
        wakeCmd: "true",
      });
      assert.equal(park.session, "node-session");
      assert.equal(park.until, started.id);
      assert.equal(park.state, "waiting");
      assert.ok((await api.admin.procs.parked()).some((found) => found.id === park.id));
      const noted = await api.reporter.procs.sessionProgress("node-session", "still here");
      assert.equal(noted.released, 0);
      await api.admin.procs.abort(started.id, { graceS: 0 });
    });

    it("an unknown run is a 404", async () => {
      await assert.rejects(
        api.admin.procs.get("p-000000000000"),
        (error: unknown) => error instanceof WatchkeeperError && error.status === 404 && error.code === "not_found",
      );
    });

    it("a wait past the token's cap on held requests ends in Busy with Retry-After", async () => {
      const started = await api.admin.procs.start(["sleep", "600"]);
      await until("the process running", async () => (await api.admin.procs.get(started.id)).status === "running");
      // The waiter's one place: held until the run ends.
      const holding = api.waiter.procs.wait(started.id).catch((error: unknown) => error);
      await until("the held wait taking the waiter's place", async () => {
        try {
          await api.waiter.procs.wait(started.id, { timeoutS: 0 });
          return false;
        } catch (error) {
          if (error instanceof Busy) {
            return true;
          }
          throw error;
        }
      });
      // Asks, is told to wait 5 s, waits what is left of its own 0.3 s, asks again and gives up.
      const refused = await api.waiter.procs.wait(started.id, { timeoutS: 0.3 }).catch((error: unknown) => error);
      assert.ok(refused instanceof Busy, String(refused));
      assert.ok(refused instanceof WatchkeeperError);
      assert.equal(refused.status, 429);
      assert.equal(refused.code, "too_many_requests");
      assert.equal(refused.retryAfterS, 5);
      assert.match(refused.message, /long-polls/);
      // Another token is not held back.
      assert.equal((await api.admin.procs.wait(started.id, { timeoutS: 0 })).status, "running");
      await api.admin.procs.abort(started.id, { graceS: 0 });
      const ended = await holding;
      assert.ok(!(ended instanceof Error) && ENDED.has((ended as { status: string }).status), String(ended));
    });
  });
}
