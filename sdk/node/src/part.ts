/** What every part of the SDK (jobs, runners, procs, incidents...) shares: its client. */

import type { Busy } from "./errors.js";
import type { QueryValue } from "./wire.js";

/** How one call is made: its query, its body and how long it may take. */
export interface RequestOptions {
  query?: Record<string, QueryValue>;
  /** A JSON body (sent as `application/json`). */
  json?: unknown;
  /** A body already encoded (its headers say what it is). */
  body?: Uint8Array;
  headers?: Record<string, string>;
  /** Seconds this call may take (default: the client's `timeoutS`). */
  timeoutS?: number;
}

/** What a part asks of the client it belongs to (the client itself, in practice). */
export interface Caller {
  /** Seconds each call may take; calls that wait on the server add their wait to it. */
  readonly timeoutS: number;
  request(method: string, path: string, options?: RequestOptions): Promise<unknown>;
  requestObject<T = Record<string, unknown>>(method: string, path: string, options?: RequestOptions): Promise<T>;
  requestWhenFree(method: string, path: string, deadline: number | null, options?: RequestOptions): Promise<unknown>;
}

/** One part of the API, reached through the client it belongs to. */
export class ApiPart {
  protected readonly client: Caller;

  constructor(client: Caller) {
    this.client = client;
  }

  /** `POST` `json` to `path`; the JSON object answered. */
  protected post<T>(path: string, json?: unknown): Promise<T> {
    return this.client.requestObject<T>("POST", path, json === undefined ? {} : { json });
  }

  /** `GET` `path` and pick the list answered under `key`. */
  protected async listed<T>(path: string, key: string, query?: Record<string, QueryValue>): Promise<T[]> {
    const answer = await this.client.requestObject<Record<string, T[]>>("GET", path, query ? { query } : {});
    return answer[key] ?? [];
  }
}

/** Resolves after `seconds`. */
export function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** Seconds on a monotonic clock (for deadlines). */
export function monotonic(): number {
  return performance.now() / 1000;
}

/**
 * Wait as `busy` says before asking again; throw it when `deadline` (on {@link monotonic}'s
 * clock; `null`: never) has passed.
 */
export async function pause(busy: Busy, deadline: number | null): Promise<void> {
  let wait = busy.retryAfterS;
  if (deadline !== null) {
    const left = deadline - monotonic();
    if (left <= 0) {
      throw busy;
    }
    wait = Math.min(wait, left);
  }
  await sleep(wait);
}
