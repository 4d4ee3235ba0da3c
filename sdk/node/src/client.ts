/**
 * The Node SDK over watchkeeper's HTTP API.
 *
 * ```ts
 * import { Client } from "watchkeeper";
 *
 * const client = new Client("http://127.0.0.1:8750", "wk_...");
 * await client.run("crawl", "crawl example.org", async (run) => {
 *   for (const page of pages) {
 *     await fetchPage(page);
 *     await run.progress(`page ${page}`);
 *   }
 * });
 * ```
 *
 * The run finishes when the function returns, or fails with what it threw.
 * `WATCHKEEPER_URL` and `WATCHKEEPER_TOKEN` are used when arguments are omitted.
 */

import { Busy, type WatchkeeperError } from "./errors.js";
import { ApiPart, type Caller, type RequestOptions, pause } from "./part.js";
import { Procs } from "./procs.js";
import { Jobs, Runners } from "./queue.js";
import { Silences } from "./silences.js";
import { Timeline } from "./timeline.js";
import type { Incident, JsonObject, Origin, Overview, Replicas, Run, RunDetail, Runbook } from "./types.js";
import {
  DEFAULT_URL,
  RUNS_PATH,
  TIMEOUT_S,
  TOKEN_ENV,
  URL_ENV,
  answerOf,
  movePath,
  present,
  unreachable,
  withQuery,
} from "./wire.js";

/** Tells the server a press came from the command line (it can name nothing else). */
export const CLIENT_HEADER = "X-Watchkeeper-Client";

export interface ClientOptions {
  /** Seconds each call may take (default 10); calls that wait on the server add their wait. */
  timeoutS?: number;
}

/** What a run is started with, besides its kind and title. */
export interface StartOptions {
  runId?: string;
  origin?: Origin;
  /** `none`, `idempotent`, `external` or `unknown` (the default). */
  effects?: string;
  budgetS?: number;
  expectedS?: number;
  leaseS?: number;
}

/**
 * What a progress report says besides its step: counters (`done` of `total`: pages, tests,
 * tokens), and the seconds the step it starts may go without another report (`budgetS`)
 * and is expected to take (`expectedS`), in force until the next report.
 */
export interface ProgressOptions {
  done?: number;
  total?: number;
  budgetS?: number;
  expectedS?: number;
}

export interface FailOptions {
  fingerprint?: string;
  detail?: string;
}

/** A connection to one watchkeeper server. */
export class Client implements Caller {
  readonly url: string;
  /** Seconds each call may take; calls that wait on the server add their wait to it. */
  readonly timeoutS: number;
  readonly incidents: Incidents;
  readonly runbooks: Runbooks;
  readonly procs: Procs;
  readonly jobs: Jobs;
  readonly runners: Runners;
  readonly timeline: Timeline;
  readonly silences: Silences;
  readonly #headers: Record<string, string>;

  constructor(url?: string, token?: string, options: ClientOptions = {}) {
    this.url = (url || process.env[URL_ENV] || DEFAULT_URL).replace(/\/+$/, "");
    this.timeoutS = options.timeoutS ?? TIMEOUT_S;
    const secret = token || process.env[TOKEN_ENV];
    this.#headers = secret ? { Authorization: `Bearer ${secret}` } : {};
    this.incidents = new Incidents(this);
    this.runbooks = new Runbooks(this);
    this.procs = new Procs(this);
    this.jobs = new Jobs(this);
    this.runners = new Runners(this);
    this.timeline = new Timeline(this);
    this.silences = new Silences(this);
  }

  /** Call the API; an error answer throws {@link WatchkeeperError} with the server's message. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<unknown> {
    const headers: Record<string, string> = { ...this.#headers, ...options.headers };
    let body: string | Uint8Array | undefined = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers["Content-Type"] = "application/json";
    }
    // Timers take whole milliseconds; a wait's limit is fractional seconds.
    const signal = AbortSignal.timeout(Math.ceil((options.timeoutS ?? this.timeoutS) * 1000));
    let response: Response;
    let content: string;
    try {
      response = await fetch(this.url + withQuery(path, options.query), { method, headers, body, signal });
      content = await response.text();
    } catch (error) {
      throw unreachable(this.url, error);
    }
    return answerOf(response.status, content, response.statusText, response.headers.get("retry-after"));
  }

  /** Call the API for a JSON object, the answer of most calls. */
  async requestObject<T = JsonObject>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return (await this.request(method, path, options)) as T;
  }

  /**
   * {@link request}, asking again after each `429` as its `Retry-After` says.
   *
   * `deadline` (seconds on `performance.now()`'s clock; `null`: no end) is when to stop
   * asking: the last {@link Busy} is thrown.
   */
  async requestWhenFree(
    method: string,
    path: string,
    deadline: number | null,
    options: RequestOptions = {},
  ): Promise<unknown> {
    for (;;) {
      try {
        return await this.request(method, path, options);
      } catch (error) {
        if (!(error instanceof Busy)) {
          throw error;
        }
        await pause(error, deadline);
      }
    }
  }

  // Reports -------------------------------------------------------------------

  /** Report that work started; returns the run (with its `run_id`). */
  start(kind: string, title: string, options: StartOptions = {}): Promise<Run> {
    const body = {
      kind,
      title,
      effects: options.effects ?? "unknown",
      ...present({
        run_id: options.runId,
        origin: options.origin,
        budget_s: options.budgetS,
        expected_s: options.expectedS,
        lease_s: options.leaseS,
      }),
    };
    return this.requestObject<Run>("POST", RUNS_PATH, { json: body });
  }

  #move(kind: string, runId: string, verb: string, body: Record<string, unknown>): Promise<Run> {
    return this.requestObject<Run>("POST", movePath(kind, runId, verb), { json: present(body) });
  }

  /**
   * Report where the work is: optionally its step, counters and the step's times. The same
   * step and counters as the report before is a repeat, not progress: the kind's
   * `loop_after` of them in a row (default 5) make the run looping.
   */
  progress(kind: string, runId: string, step?: string, options: ProgressOptions = {}): Promise<Run> {
    return this.#move(kind, runId, "progress", {
      step,
      done: options.done,
      total: options.total,
      budget_s: options.budgetS,
      expected_s: options.expectedS,
    });
  }

  /** Report that the owner is alive (not progress). */
  heartbeat(kind: string, runId: string): Promise<Run> {
    return this.#move(kind, runId, "heartbeat", {});
  }

  /** Report that the work waits for a person. */
  waiting(kind: string, runId: string, reason?: string): Promise<Run> {
    return this.#move(kind, runId, "waiting", { reason });
  }

  /** Report success. */
  finish(kind: string, runId: string, step?: string): Promise<Run> {
    return this.#move(kind, runId, "finish", { step });
  }

  /** Report failure. */
  fail(kind: string, runId: string, reason: string, options: FailOptions = {}): Promise<Run> {
    return this.#move(kind, runId, "fail", { reason, fingerprint: options.fingerprint, detail: options.detail });
  }

  /**
   * Start a run, call `work` with it, then finish the run, or fail it with what `work`
   * threw (which is thrown again). Resolves to what `work` returned.
   */
  async run<T>(
    kind: string,
    title: string,
    work: (run: RunHandle) => Promise<T> | T,
    options: StartOptions = {},
  ): Promise<T> {
    const started = await this.start(kind, title, options);
    const handle = new RunHandle(this, kind, title, String(started.run_id));
    let result: T;
    try {
      result = await work(handle);
    } catch (error) {
      await this.fail(kind, handle.runId, failureOf(error));
      throw error;
    }
    await this.finish(kind, handle.runId);
    return result;
  }

  // Reading -------------------------------------------------------------------

  /** What needs attention and what runs (and, with `all`, what finished). */
  runs(options: { all?: boolean } = {}): Promise<Overview> {
    return this.requestObject<Overview>("GET", RUNS_PATH, { query: { all: options.all ?? false } });
  }

  /**
   * One run as reported, with `verdict` (`null`: nothing wrong), `incident_id`, `decision`
   * and `card` (its chat card's sending state).
   */
  getRun(kind: string, runId: string): Promise<RunDetail> {
    return this.requestObject<RunDetail>(
      "GET",
      `${RUNS_PATH}/${encodeURIComponent(kind)}/${encodeURIComponent(runId)}`,
    );
  }

  /** The replicas sharing the server's database: each one's heartbeat, and who leads. */
  replicas(): Promise<Replicas> {
    return this.requestObject<Replicas>("GET", "/api/v1/replicas");
  }
}

/** The reason a run fails with, from what its work threw. */
function failureOf(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `Error: ${String(error)}`;
  return text.trim().replace(/:$/, "").slice(0, 2000);
}

/** A started run; `progress`, `heartbeat` and `waiting` report on it. */
export class RunHandle {
  readonly #client: Client;
  readonly kind: string;
  readonly title: string;
  readonly runId: string;

  constructor(client: Client, kind: string, title: string, runId: string) {
    this.#client = client;
    this.kind = kind;
    this.title = title;
    this.runId = runId;
  }

  /**
   * Report where the work is: the step it starts, its counters, and that step's budget and
   * expected time (the run's own budget applies again at the next report).
   */
  async progress(step?: string, options: ProgressOptions = {}): Promise<void> {
    await this.#client.progress(this.kind, this.runId, step, options);
  }

  /** Report liveness. */
  async heartbeat(): Promise<void> {
    await this.#client.heartbeat(this.kind, this.runId);
  }

  /** Report waiting for a person. */
  async waiting(reason?: string): Promise<void> {
    await this.#client.waiting(this.kind, this.runId, reason);
  }
}

/** `client.incidents`: read incidents, press their buttons. */
export class Incidents extends ApiPart {
  /** Incidents, newest first; `status` may be live, open, recovered or resolved. */
  list(options: { status?: string; limit?: number } = {}): Promise<Incident[]> {
    return this.listed<Incident>("/api/v1/incidents", "incidents", {
      limit: options.limit ?? 200,
      status: options.status || undefined,
    });
  }

  /** One incident with its history, buttons, decision, presses and action journal. */
  get(incidentId: number): Promise<Incident> {
    return this.client.requestObject<Incident>("GET", `/api/v1/incidents/${incidentId}`);
  }

  /**
   * Press a button. Without `stateToken` the incident's current one is used.
   *
   * The server records the press as made on the API; `via: "cli"` asks it to say "the
   * command line" instead. A press that loses throws {@link WatchkeeperError} (409 already
   * decided or stale, 403 refused, 422 not offered) whose message says who won.
   */
  async decide(
    incidentId: number,
    action: string,
    options: { stateToken?: string; via?: "api" | "cli" } = {},
  ): Promise<JsonObject> {
    const via = options.via ?? "api";
    if (via !== "api" && via !== "cli") {
      throw new TypeError(
        `via must be 'api' or 'cli', not '${String(via)}': the server names the dashboard's and the chat platforms' presses itself`,
      );
    }
    const stateToken = options.stateToken ?? String((await this.get(incidentId)).state_token);
    return this.client.requestObject("POST", `/api/v1/incidents/${incidentId}/decide`, {
      json: { action, state_token: stateToken },
      headers: { [CLIENT_HEADER]: via },
    });
  }

  /** Ask to diagnose: read-only; returns the diagnosis under `diagnosis`. */
  diagnose(incidentId: number): Promise<JsonObject> {
    return this.client.requestObject("POST", `/api/v1/incidents/${incidentId}/diagnose`);
  }

  /** "I am on it": mark yourself as looking at the incident, without deciding. */
  ack(incidentId: number, options: { via?: "api" | "cli" } = {}): Promise<JsonObject> {
    return this.client.requestObject("POST", `/api/v1/incidents/${incidentId}/ack`, {
      headers: { [CLIENT_HEADER]: options.via ?? "api" },
    });
  }
}

/** `client.runbooks`: the automatic first steps. */
export class Runbooks extends ApiPart {
  /** Every runbook and whether it is on. */
  list(): Promise<Runbook[]> {
    return this.listed<Runbook>("/api/v1/runbooks", "runbooks");
  }

  /** Switch one on or off (admins only). */
  switch(name: string, enabled: boolean): Promise<Runbook> {
    return this.client.requestObject<Runbook>("PUT", `/api/v1/runbooks/${encodeURIComponent(name)}`, {
      json: { enabled },
    });
  }
}
