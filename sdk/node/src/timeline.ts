/**
 * `client.timeline`: timeline events, spend and execution records over the HTTP API.
 *
 * A batch (up to 5,000 events) is stored all or nothing; a bad event throws a
 * `WatchkeeperError` whose message names its index and field. Batches are sent
 * gzip-compressed. `input_tokens` counts every input token, cached ones included.
 */

import { gzipSync } from "node:zlib";

import { WatchkeeperError } from "./errors.js";
import { ApiPart } from "./part.js";
import type { Emitted, JsonObject, Spend, TimelineEvent, TimelineEventIn } from "./types.js";

export const MAX_BATCH = 5000;

export interface SpendOptions {
  org?: string;
  jobId?: string;
  /** From this date (`"2026-01-05"`: its start, UTC) or time (a `Date`, or RFC 3339 text) on. */
  since?: Date | string;
  /** Up to this date (`"2026-01-11"`: its end, UTC, so that day counts) or before this time. */
  until?: Date | string;
}

/** A value as the API speaks it: a `Date` becomes RFC 3339 text in UTC. */
function wire(value: unknown): unknown {
  return value instanceof Date ? value.toISOString() : value;
}

/** Emit timeline events; read timelines, spend and records. */
export class Timeline extends ApiPart {
  /** Store `events` (all or nothing); resolves to `accepted`, `cost` and `unpriced`. */
  async emitBatch(events: readonly TimelineEventIn[]): Promise<Emitted> {
    if (events.length === 0) {
      return { accepted: 0, cost: 0, unpriced: 0 };
    }
    if (events.length > MAX_BATCH) {
      throw new WatchkeeperError(0, "too_many", `${events.length} events: send at most ${MAX_BATCH} per batch`);
    }
    const body = {
      events: events.map((event) =>
        Object.fromEntries(
          Object.entries(event)
            .filter(([, value]) => value !== undefined && value !== null)
            .map(([key, value]) => [key, wire(value)]),
        ),
      ),
    };
    return this.client.requestObject<Emitted>("POST", "/api/v1/events/batch", {
      body: gzipSync(JSON.stringify(body), { level: 5 }),
      headers: { "Content-Type": "application/json", "Content-Encoding": "gzip" },
    });
  }

  /** Store one event. */
  emit(event: TimelineEventIn): Promise<Emitted> {
    return this.emitBatch([event]);
  }

  /** Events of a job or a task, oldest first. */
  events(options: { jobId?: string; taskId?: string } = {}): Promise<TimelineEvent[]> {
    return this.listed<TimelineEvent>("/api/v1/timeline", "events", {
      job_id: options.jobId || undefined,
      task_id: options.taskId || undefined,
    });
  }

  /** When the task last made progress by its timeline (RFC 3339), or `null`. */
  async lastProgressAt(taskId: string): Promise<string | null> {
    const answer = await this.client.requestObject<{ last_progress_at?: string | null }>("GET", "/api/v1/timeline", {
      query: { task_id: taskId },
    });
    return answer.last_progress_at ?? null;
  }

  /** Spend grouped by org, job, role, model, provider or day, with totals. */
  spend(by = "model", options: SpendOptions = {}): Promise<Spend> {
    return this.client.requestObject<Spend>("GET", "/api/v1/spend", {
      query: {
        by,
        org: options.org,
        job_id: options.jobId,
        since: wire(options.since) as string | undefined,
        until: wire(options.until) as string | undefined,
      },
    });
  }

  /** The signed execution record of a finished job. */
  record(jobId: string): Promise<JsonObject> {
    return this.client.requestObject("GET", `/api/v1/jobs/${encodeURIComponent(jobId)}/record`);
  }
}
