/**
 * The errors every call may raise: {@link WatchkeeperError} for an error answer (or none),
 * {@link Busy} for a `429 Too Many Requests`, and how long a `Retry-After` says to wait.
 */

/** Longest one pause, whatever `Retry-After` says, in seconds. */
export const MAX_PAUSE_S = 30;
/** The pause when the answer has no usable `Retry-After`, in seconds. */
export const DEFAULT_PAUSE_S = 1;
/** Shortest pause: a `Retry-After: 0` must not turn into a busy loop. */
export const MIN_PAUSE_S = 0.1;

/**
 * The watchkeeper server answered a call with an error, or did not answer at all.
 *
 * `status` is the HTTP status (`0` when no answer came: `code` is then `unreachable`,
 * or the SDK's own refusal such as `not_started` or `too_many`); `code` is the server's
 * stable error code and `message` its sentence saying what to change. `String(error)`
 * adds the status and code to the sentence.
 */
export class WatchkeeperError extends Error {
  readonly status: number;
  readonly code: string;
  /** The request field the error is about, when the server names one. */
  readonly field: string | undefined;

  constructor(status: number, code: string, message: string, field?: string) {
    super(message);
    this.name = "WatchkeeperError";
    this.status = status;
    this.code = code;
    this.field = field;
  }

  override toString(): string {
    return this.status
      ? `${this.name}: ${this.message} (HTTP ${this.status}, ${this.code})`
      : `${this.name}: ${this.message}`;
  }
}

/** The server refused the request for now (`429`); `retryAfterS` says for how long. */
export class Busy extends WatchkeeperError {
  readonly retryAfterS: number;

  constructor(code: string, message: string, retryAfterS: number) {
    super(429, code, message);
    this.name = "Busy";
    this.retryAfterS = retryAfterS;
  }
}

/** Seconds to wait from a `Retry-After` value (seconds or an HTTP date), bounded. */
export function retryAfter(header: string | null | undefined, now: () => number = Date.now): number {
  const value = header?.trim() ?? "";
  if (value === "") {
    return DEFAULT_PAUSE_S;
  }
  let seconds = Number(value);
  if (Number.isNaN(seconds)) {
    const at = Date.parse(value);
    if (Number.isNaN(at)) {
      return DEFAULT_PAUSE_S;
    }
    seconds = (at - now()) / 1000;
  }
  return Math.min(MAX_PAUSE_S, Math.max(MIN_PAUSE_S, seconds));
}
