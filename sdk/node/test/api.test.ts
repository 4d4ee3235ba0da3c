/**
 * The SDK against one real server: every part of the API, and its errors.
 *
 * One `watchkeeper serve` for all the suites, since starting one is most of the run's time.
 */

import { after, before } from "node:test";

import { Client } from "../src/index.js";
import { procs } from "./procs.js";
import { queue } from "./queue.js";
import { runs } from "./runs.js";
import { type Api, serve } from "./server.js";

const api = {} as Api;

before(async () => {
  // One held request per token: a second wait of the waiter's token is answered 429 at once.
  api.server = await serve("[server]\nlong_waits_per_token = 1\n");
  const [reporter, viewer, waiter] = await Promise.all([
    api.server.token("reporter", "node-reporter"),
    api.server.token("viewer", "node-viewer"),
    api.server.token("viewer", "node-waiter"),
  ]);
  api.admin = new Client(api.server.url, api.server.admin);
  api.reporter = new Client(api.server.url, reporter);
  api.viewer = new Client(api.server.url, viewer);
  api.waiter = new Client(api.server.url, waiter);
});

after(async () => {
  await api.server?.stop();
});

runs(api);
queue(api);
procs(api);
