/**
 * `client.jobs` and `client.runners`: the job queue over the HTTP API.
 *
 * ```ts
 * const job = await client.jobs.submit("nightly build", { org: "acme", fleet: "cpu", argv: ["make", "all"] });
 * console.log(job.status, job.tasks[0]?.blocked); // why it has not started
 * await client.jobs.cancel(job.id);               // { affected: 1, ... }
 * ```
 *
 * Runners use `client.runners`: register, heartbeat, lease, then renew, complete or fail
 * each task with the lease token it came with. A move on a lease that is gone throws
 * `WatchkeeperError` with the code `lease_lost`.
 */

import { ApiPart } from "./part.js";
import type { Affected, JsonObject, Job, Outcome, Runner, Task } from "./types.js";
import { present } from "./wire.js";

export interface SubmitOptions {
  org: string;
  fleet: string;
  /** The command to run (joins `payload` as its `argv`). */
  argv?: string[];
  payload?: JsonObject;
  /** Whether a task may run again after a lost lease (default `true`). */
  rerunnable?: boolean;
  maxAttempts?: number;
  leaseS?: number;
  /**
   * The pull request or issue it came from, `github:OWNER/REPO#N`: the server labels it
   * `watchkeeper:waiting`, and when the job ends says there how it ended.
   */
  origin?: string;
}

export interface RegisterOptions {
  capacity: number;
  host: string;
  pid: number;
  org?: string;
  name?: string;
}

export interface ShipOptions {
  offset: number;
  end: number;
  output: string;
  final?: boolean;
  runId?: string;
  host?: string;
}

function job(jobId: string, verb?: string): string {
  const base = `/api/v1/jobs/${encodeURIComponent(jobId)}`;
  return verb === undefined ? base : `${base}/${verb}`;
}

function task(taskId: string, verb?: string): string {
  const base = `/api/v1/tasks/${encodeURIComponent(taskId)}`;
  return verb === undefined ? base : `${base}/${verb}`;
}

function runner(runnerId: string, verb: string): string {
  return `/api/v1/runners/${encodeURIComponent(runnerId)}/${verb}`;
}

/** Submit, read and control jobs. */
export class Jobs extends ApiPart {
  /** Queue a job running `argv` (or a full `payload`); admin token. */
  submit(title: string, options: SubmitOptions): Promise<Job> {
    const payload: JsonObject = { ...options.payload, ...(options.argv?.length ? { argv: [...options.argv] } : {}) };
    return this.post<Job>("/api/v1/jobs", {
      title,
      org: options.org,
      fleet: options.fleet,
      payload,
      rerunnable: options.rerunnable ?? true,
      ...present({ max_attempts: options.maxAttempts, lease_s: options.leaseS, origin: options.origin }),
    });
  }

  /** Jobs newest first, filtered by rolled-up status, fleet or org. */
  list(options: { status?: string; fleet?: string; org?: string; limit?: number } = {}): Promise<Job[]> {
    return this.listed<Job>("/api/v1/jobs", "jobs", {
      limit: options.limit ?? 200,
      status: options.status || undefined,
      fleet: options.fleet || undefined,
      org: options.org || undefined,
    });
  }

  /** One job: status, tasks (queued ones with `blocked`), timeline. */
  get(jobId: string): Promise<Job> {
    return this.client.requestObject<Job>("GET", job(jobId));
  }

  /** Cancel the job's unfinished tasks; `affected` says how many. */
  cancel(jobId: string): Promise<Affected> {
    return this.post<Affected>(job(jobId, "cancel"));
  }

  /** Queue the job's failed, cancelled and stuck tasks again; `affected` says how many. */
  retry(jobId: string): Promise<Affected> {
    return this.post<Affected>(job(jobId, "retry"));
  }

  /**
   * Add a continuation task to a finished job; resolves to the task.
   *
   * `jobId` may name a task (`t-...`) instead: the continuation joins that task's job, with
   * that task's payload unless `payload` is given.
   */
  resume(jobId: string, payload?: JsonObject): Promise<Task> {
    const path = jobId.startsWith("t-") ? task(jobId, "resume") : job(jobId, "resume");
    return this.post<Task>(path, { payload: payload ?? null });
  }

  /** Delete the job and its tasks; `affected` says how many tasks went. */
  delete(jobId: string): Promise<Affected> {
    return this.client.requestObject<Affected>("DELETE", job(jobId));
  }

  /** One task (with `blocked` while queued). */
  task(taskId: string): Promise<Task> {
    return this.client.requestObject<Task>("GET", task(taskId));
  }

  /**
   * The redacted tail of what the task printed (`output`, `null` until it ended).
   *
   * `all: true`: all that its last run shipped so far, with `running`, `complete` and `cut`.
   */
  output(taskId: string, options: { all?: boolean } = {}): Promise<JsonObject> {
    return this.client.requestObject("GET", task(taskId, "output"), options.all ? { query: { all: true } } : {});
  }
}

/** What a runner daemon says to the server, and the topology. */
export class Runners extends ApiPart {
  /** Register a runner; resolves to it with its `id`. */
  register(fleet: string, options: RegisterOptions): Promise<Runner> {
    return this.post<Runner>("/api/v1/runners", {
      fleet,
      capacity: options.capacity,
      host: options.host,
      pid: options.pid,
      ...present({ org: options.org, name: options.name }),
    });
  }

  /** Registered runners, alive or not. */
  list(): Promise<Runner[]> {
    return this.listed<Runner>("/api/v1/runners", "runners");
  }

  /** Say the runner is alive. */
  heartbeat(runnerId: string): Promise<Runner> {
    return this.post<Runner>(runner(runnerId, "heartbeat"));
  }

  /** Lease up to `max` tasks; each comes with its `lease_token`. */
  async lease(runnerId: string, max = 1): Promise<Task[]> {
    const answer = await this.post<{ tasks: Task[] }>(runner(runnerId, "lease"), { max });
    return answer.tasks;
  }

  /** Renew a lease; a `WatchkeeperError` with code `lease_lost` means stop the task. */
  renew(taskId: string, leaseToken: string, options: { progressed?: boolean; step?: string } = {}): Promise<Task> {
    return this.post<Task>(task(taskId, "renew"), {
      lease_token: leaseToken,
      progressed: options.progressed ?? false,
      ...present({ step: options.step }),
    });
  }

  /** Record success under the lease. */
  complete(taskId: string, leaseToken: string, exitCode: number | null = 0): Promise<Task> {
    return this.post<Task>(task(taskId, "complete"), { lease_token: leaseToken, exit_code: exitCode });
  }

  /**
   * Record several tasks' outcomes in one request (and one transaction). The answer has
   * one entry per outcome, in order: the task, or `{id, code: "lease_lost"}` for one whose
   * lease is gone (that one alone was not recorded).
   */
  async report(outcomes: Outcome[]): Promise<JsonObject[]> {
    const answer = await this.post<{ outcomes: JsonObject[] }>("/api/v1/tasks/outcomes", { outcomes });
    return [...answer.outcomes];
  }

  /**
   * Record outcomes (as `report`) and lease up to `max` tasks into the slots they free, in
   * one request and one transaction. A request refused as a whole (say, an unknown runner)
   * recorded no outcome.
   */
  async reportAndLease(
    runnerId: string,
    outcomes: Outcome[],
    max = 1,
  ): Promise<{ outcomes: JsonObject[]; tasks: Task[] }> {
    const answer = await this.post<{ outcomes: JsonObject[]; tasks: Task[] }>(runner(runnerId, "lease"), {
      max,
      outcomes,
    });
    return { outcomes: [...answer.outcomes], tasks: [...answer.tasks] };
  }

  /** Record failure under the lease. */
  fail(
    taskId: string,
    leaseToken: string,
    reason: string,
    options: { fingerprint?: string; exitCode?: number } = {},
  ): Promise<Task> {
    return this.post<Task>(task(taskId, "fail"), {
      lease_token: leaseToken,
      reason,
      ...present({ fingerprint: options.fingerprint, exit_code: options.exitCode }),
    });
  }

  /** Send the redacted tail of the task's output under the lease, before its outcome. */
  output(taskId: string, leaseToken: string, output: string): Promise<JsonObject> {
    return this.post<JsonObject>(task(taskId, "output"), { lease_token: leaseToken, output });
  }

  /**
   * Ship what the task's log gained (bytes `offset` to `end`, redacted) under the lease;
   * the answer's `next_offset` says where the next piece starts.
   */
  shipOutput(taskId: string, leaseToken: string, options: ShipOptions): Promise<JsonObject> {
    return this.post<JsonObject>(task(taskId, "output/chunks"), {
      lease_token: leaseToken,
      offset: options.offset,
      end: options.end,
      output: options.output,
      final: options.final ?? false,
      ...present({ run_id: options.runId, host: options.host }),
    });
  }

  /** The runner leaves; its leases are taken back. */
  stop(runnerId: string): Promise<Runner> {
    return this.post<Runner>(runner(runnerId, "stop"));
  }

  /** Fleets, runners and the tasks each runs now. */
  topology(): Promise<JsonObject> {
    return this.client.requestObject("GET", "/api/v1/topology");
  }
}
