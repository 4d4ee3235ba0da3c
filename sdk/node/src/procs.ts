/**
 * `client.procs`: start, watch, wait on and abort processes on the server's host.
 *
 * ```ts
 * const run = await client.procs.start(["pytest", "-x"], { timeoutS: 3600 });
 * const done = await client.procs.wait(run.id);
 * console.log(done.status, done.exit_code);
 * ```
 */

import { Busy } from "./errors.js";
import { ApiPart, monotonic, pause } from "./part.js";
import type { AbortResult, JsonObject, LogPiece, Origin, Park, ProcRun } from "./types.js";
import { present } from "./wire.js";

/** The statuses a process run ends in: a wait returns once the run has one. */
export const ENDED: ReadonlySet<string> = new Set(["succeeded", "failed", "cancelled"]);
/** Longest the server holds one `wait` request, in seconds. */
export const MAX_ASK_S = 30;
/** The server's grace period when an abort names none, in seconds. */
export const SERVER_GRACE_S = 5;
/** What an abort takes past its grace periods: the SIGKILL's wait and the witness's. */
export const ABORT_SETTLE_S = 11;

export interface ProcStartOptions {
  /** Return once started (the default) instead of when the command ends. */
  detach?: boolean;
  cwd?: string;
  name?: string;
  budgetS?: number;
  timeoutS?: number;
  origin?: Origin;
  session?: string;
  onDoneCmd?: string;
  onDoneUrl?: string;
}

const PREFIX = "/api/v1/procs";

function at(runId: string, verb?: string): string {
  const base = `${PREFIX}/${encodeURIComponent(runId)}`;
  return verb === undefined ? base : `${base}/${verb}`;
}

/** Process runs over the HTTP API. */
export class Procs extends ApiPart {
  /** Start `argv` on the server's host (admin token); returns the run with its `id`. */
  start(argv: string[], options: ProcStartOptions = {}): Promise<ProcRun> {
    const body = {
      argv: [...argv],
      detach: options.detach ?? true,
      ...present({
        cwd: options.cwd,
        name: options.name,
        budget_s: options.budgetS,
        timeout_s: options.timeoutS,
        origin: options.origin,
        session: options.session,
        on_done_cmd: options.onDoneCmd,
        on_done_url: options.onDoneUrl,
      }),
    };
    return this.post<ProcRun>(PREFIX, body);
  }

  /** Active runs (and, with `all`, those that ended in the last day). */
  list(options: { all?: boolean } = {}): Promise<ProcRun[]> {
    return this.listed<ProcRun>(PREFIX, "runs", { all: options.all ?? false });
  }

  /** One run, with `effective_status` (`stale` when its process is gone). */
  get(runId: string): Promise<ProcRun> {
    return this.client.requestObject<ProcRun>("GET", at(runId));
  }

  /** The end of the run's output, secrets redacted. */
  async log(runId: string, tailBytes = 65536): Promise<string> {
    const answer = await this.client.requestObject<LogPiece>("GET", at(runId, "log"), {
      query: { tail_bytes: tailBytes },
    });
    return String(answer.text);
  }

  /**
   * The run's output from byte `offset` on, secrets redacted, for following it.
   *
   * While the run goes on, `text` stops after the last complete line (a secret is never
   * split between two pieces); `wholeLines: false` adds the unfinished last line. Follow a
   * run by asking again from `next_offset` until `ended` and `next_offset` reached `size`.
   */
  logFrom(runId: string, offset = 0, options: { wholeLines?: boolean } = {}): Promise<LogPiece> {
    return this.client.requestObject<LogPiece>("GET", at(runId, "log"), {
      query: { offset, whole_lines: options.wholeLines ?? true },
    });
  }

  /**
   * Resolve once the run ends (or `timeoutS` passes) with the run.
   *
   * The server holds each ask up to 30 s. When it holds too many already it answers
   * `429`: the wait pauses as its `Retry-After` says and asks again, until `timeoutS`;
   * a refusal at the end throws {@link Busy} (a `WatchkeeperError`).
   */
  async wait(runId: string, options: { timeoutS?: number } = {}): Promise<ProcRun> {
    const deadline = options.timeoutS === undefined ? null : monotonic() + options.timeoutS;
    for (;;) {
      const left = Math.max(0, Math.min(MAX_ASK_S, deadline === null ? MAX_ASK_S : deadline - monotonic()));
      let run: ProcRun;
      try {
        run = await this.client.requestObject<ProcRun>("GET", at(runId, "wait"), {
          query: { timeout_s: left },
          timeoutS: this.client.timeoutS + left,
        });
      } catch (error) {
        if (!(error instanceof Busy)) {
          throw error;
        }
        await pause(error, deadline);
        continue;
      }
      if (ENDED.has(run.status) || (deadline !== null && monotonic() >= deadline)) {
        return run;
      }
    }
  }

  /**
   * Abort the run; `outcome` is `signaled`, `already_exited` or `not_ours`.
   *
   * The answer comes once the group has exited, so the call lasts up to about twice
   * `graceS`. When the server holds too many requests already (`429`) the abort pauses as
   * told and asks again, until `timeoutS` (unset: until it is taken).
   */
  async abort(runId: string, options: { graceS?: number; timeoutS?: number } = {}): Promise<AbortResult> {
    const grace = options.graceS ?? SERVER_GRACE_S;
    const deadline = options.timeoutS === undefined ? null : monotonic() + options.timeoutS;
    const answer = await this.client.requestWhenFree("POST", at(runId, "abort"), deadline, {
      json: options.graceS === undefined ? {} : { grace_s: options.graceS },
      timeoutS: this.client.timeoutS + 2 * grace + ABORT_SETTLE_S,
    });
    return answer as AbortResult;
  }

  /** Report progress on a process run. */
  progress(runId: string, step?: string): Promise<ProcRun> {
    return this.post<ProcRun>(at(runId, "progress"), present({ step }));
  }

  /** Settle the server host's runs now. */
  reclaim(): Promise<JsonObject> {
    return this.post<JsonObject>(`${PREFIX}/reclaim`);
  }

  /** Record that `session` hands back, waiting on run `until`. */
  park(
    session: string,
    until: string,
    reason: string,
    options: { wakeCmd?: string; progress?: string } = {},
  ): Promise<Park> {
    return this.post<Park>(`${PREFIX}/parks`, {
      session,
      until,
      reason,
      ...present({ wake_cmd: options.wakeCmd, progress: options.progress }),
    });
  }

  /** Parked sessions and what each waits on. */
  parked(): Promise<Park[]> {
    return this.listed<Park>(`${PREFIX}/parks`, "parks");
  }

  /** Record the session's own progress note (resets no wake breaker: `released` is 0). */
  sessionProgress(session: string, note?: string): Promise<JsonObject> {
    return this.post<JsonObject>(`${PREFIX}/sessions/${encodeURIComponent(session)}/progress`, present({ note }));
  }
}
