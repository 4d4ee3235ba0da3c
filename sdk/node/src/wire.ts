/**
 * The SDK's side of the HTTP API: where the server is, what an answer means, and how a
 * query string is written. Every call's answer goes through {@link answerOf}, so a result
 * or an error is the same whichever part of the SDK made the call.
 */

import { Busy, WatchkeeperError, retryAfter } from "./errors.js";

export const DEFAULT_URL = "http://127.0.0.1:8750";
export const URL_ENV = "WATCHKEEPER_URL";
export const TOKEN_ENV = "WATCHKEEPER_TOKEN";
/** Where runs are reported and read. */
export const RUNS_PATH = "/api/v1/runs";
/** Seconds a call may take unless the caller says otherwise. */
export const TIMEOUT_S = 10;

/** A value of a query string; `undefined` and `null` leave the parameter out. */
export type QueryValue = string | number | boolean | null | undefined;

/** The path of a report (`progress`, `heartbeat`, `finish` ...) on one run. */
export function movePath(kind: string, runId: string, verb: string): string {
  return `${RUNS_PATH}/${encodeURIComponent(kind)}/${encodeURIComponent(runId)}/${verb}`;
}

/** `path` with the given parameters; booleans are written `true`/`false`, as the server reads them. */
export function withQuery(path: string, query: Record<string, QueryValue> | undefined): string {
  if (query === undefined) {
    return path;
  }
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null) {
      params.append(name, String(value));
    }
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** The fields that were given: an option left out is not sent as `null`. */
export function present(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== null));
}

/**
 * The JSON of a successful answer (`null` when it has no body); an error answer throws
 * {@link WatchkeeperError} with the server's code and message ({@link Busy} for 429).
 */
export function answerOf(status: number, content: string, reason: string, retryAfterHeader: string | null): unknown {
  if (status >= 200 && status < 300) {
    return content ? (JSON.parse(content) as unknown) : null;
  }
  let code = "http_error";
  let message = content.slice(0, 500) || reason;
  let field: string | undefined;
  try {
    const error = (JSON.parse(content) as { error?: { code?: unknown; message?: unknown; field?: unknown } }).error;
    if (error !== undefined && error.code !== undefined && error.message !== undefined) {
      code = String(error.code);
      message = String(error.message);
      field = typeof error.field === "string" ? error.field : undefined;
    }
  } catch {
    // Not JSON (a proxy's page, say): the text itself is the message.
  }
  if (status === 429) {
    throw new Busy(code, message, retryAfter(retryAfterHeader));
  }
  throw new WatchkeeperError(status, code, message, field);
}

/** The error of a call that got no answer from `url`. */
export function unreachable(url: string, cause: unknown): WatchkeeperError {
  const error = new WatchkeeperError(0, "unreachable", `cannot reach watchkeeper at ${url}: ${describe(cause)}`);
  (error as { cause?: unknown }).cause = cause;
  return error;
}

function describe(cause: unknown): string {
  if (cause instanceof Error) {
    // fetch says only "fetch failed"; what failed (ECONNREFUSED, a DNS miss...) is its cause.
    const inner = (cause as { cause?: unknown }).cause;
    if (inner instanceof Error && inner.message) {
      return inner.message;
    }
    if (cause.name === "TimeoutError") {
      return "no answer within the time limit";
    }
    return cause.message;
  }
  return String(cause);
}
